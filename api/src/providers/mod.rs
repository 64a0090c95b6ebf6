//! Model providers behind one OpenAI-shaped interface.
//!
//! A request's `model` is a [`ModelRef`] (`provider/model`) or a configured alias;
//! the [`Router`] resolves it, retries transient failures with backoff and walks
//! an alias's fallback list, skipping providers whose circuit breaker is
//! open. Each wire protocol is one submodule:
//! `openai_compat` (JSON calls with endpoints prepared once, async-openai for
//! streams; with `azure`'s URLs for Azure OpenAI), `anthropic` (Messages API),
//! `ollama` (ollama-rs), `gemini` (Gemini API and Vertex AI), `bedrock` (AWS
//! Bedrock's Converse API through the AWS SDK). Every one but Bedrock speaks
//! HTTP through [`transport`]. They take a [`ChatCall`] and answer in the
//! [`crate::chat`] vocabulary: a [`CompletionReply`] (typed, or an
//! OpenAI-compatible upstream's own bytes) or a stream of [`ChatChunk`]s.
//! Anthropic providers also take Messages API requests as they are
//! ([`Provider::messages`]), for Anthropic clients, and OpenAI-compatible
//! ones Responses API requests ([`Provider::responses`]); those pass-through
//! protocols stay JSON.

pub mod anthropic;
pub mod api_added;
mod azure;
#[cfg(feature = "bedrock")]
mod bedrock;
pub mod breaker;
mod call;
pub mod catalog;
mod completion;
mod error;
mod gemini;
pub mod meter;
mod ollama;
mod openai_compat;
mod openai_wire;
mod passthrough_routes;
mod raw_object;
pub mod registry;
mod request_body;
mod router;
mod sse;
pub mod subscription;
mod transport;
pub mod types;

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use serde_json::{Map, Value};

pub use crate::chat::{ChatChunk, Usage};
pub use crate::model_ref::{ModelRef, ModelRefError};
pub(crate) use call::push_turn;
pub use call::{ChatCall, EmbeddingsCall};
pub use completion::CompletionReply;
pub use error::ProviderError;
pub use meter::{Attribution, NoMeter, Refusal, Reservation, UsageMeter};
pub use raw_object::RawObject;
pub use registry::ProviderRegistry;
pub(crate) use request_body::WithModel;
pub use request_body::{BodyRef, ChatBody};
pub use router::{ModelTarget, ResponsesAnswer, RouteError, RoutedProvider, Router, Routes};

use crate::config::{ProviderConfig, ProviderKind};

/// A streamed answer's chunks, ending where the upstream's stream ends; an
/// `Err` is a failure mid-stream and the last item.
pub type ChatChunkStream = BoxStream<'static, Result<ChatChunk, ProviderError>>;

/// A pass-through protocol's stream events (Messages API, Responses API), as JSON.
pub type EventStream = BoxStream<'static, Result<Value, ProviderError>>;

/// A Messages API request from an Anthropic client, for an upstream that
/// speaks it: the body goes as it is, only `model` rewritten.
#[derive(Debug)]
pub struct MessagesCall {
    pub body: Map<String, Value>,
    /// The client's `anthropic-beta` header, forwarded.
    pub beta: Option<String>,
    pub who: Attribution,
}

impl MessagesCall {
    pub fn stream(&self) -> bool {
        self.body.get("stream").and_then(Value::as_bool).unwrap_or(false)
    }
}

/// The upstream's answer to a [`MessagesCall`]: its `message` object, or its
/// stream events' data in order (each names its event in `type`).
pub enum MessagesAnswer {
    Message(Value),
    Events(EventStream),
}

fn unsupported<T: Send + 'static>(provider: &str, api: &str) -> BoxFuture<'static, Result<T, ProviderError>> {
    let message = format!("provider {provider:?} does not speak {api}");
    Box::pin(async move { Err(ProviderError::Unsupported(message)) })
}

/// The answer of a provider that has no embeddings endpoint Onyx speaks.
fn no_embeddings(provider: &str, kind: ProviderKind) -> BoxFuture<'static, Result<Value, ProviderError>> {
    let message = format!(
        "provider {provider:?} ({}) does not serve /v1/embeddings through Onyx yet; use an OpenAI-compatible or Ollama provider",
        kind.as_str()
    );
    Box::pin(async move { Err(ProviderError::Unsupported(message)) })
}

/// One upstream that speaks some chat protocol: it takes a [`ChatCall`] and
/// answers in the [`crate::chat`] vocabulary.
pub trait Provider: Send + Sync {
    fn name(&self) -> &str;
    fn kind(&self) -> ProviderKind;
    /// A complete answer: typed, or an upstream's own `chat.completion` bytes.
    fn complete<'a>(
        &'a self,
        model: &'a str,
        call: &'a ChatCall,
    ) -> BoxFuture<'a, Result<CompletionReply, ProviderError>>;
    /// The answer's chunks; resolves once the upstream has accepted the
    /// request and started streaming. The upstream is always asked for its
    /// usage, which comes as a last, usage-only chunk.
    fn stream<'a>(
        &'a self,
        model: &'a str,
        call: &'a ChatCall,
    ) -> BoxFuture<'a, Result<ChatChunkStream, ProviderError>>;
    /// An OpenAI `list` of embeddings, as the upstream answered it.
    fn embeddings<'a>(
        &'a self,
        model: &'a str,
        call: &'a EmbeddingsCall,
    ) -> BoxFuture<'a, Result<Value, ProviderError>>;
    /// The upstream's own model names (without the provider prefix).
    fn list_models(&self) -> BoxFuture<'_, Result<Vec<String>, ProviderError>>;
    /// A Messages API request passed through (Anthropic upstreams only).
    fn messages<'a>(
        &'a self,
        _model: &'a str,
        _call: &'a MessagesCall,
    ) -> BoxFuture<'a, Result<MessagesAnswer, ProviderError>> {
        unsupported(self.name(), "the Anthropic Messages API")
    }
    /// `{"input_tokens": N}` from the upstream's token counter (Anthropic upstreams only).
    fn count_tokens<'a>(
        &'a self,
        _model: &'a str,
        _call: &'a MessagesCall,
    ) -> BoxFuture<'a, Result<Value, ProviderError>> {
        unsupported(self.name(), "the Anthropic Messages API")
    }
    /// Whether `/v1/responses` goes to this upstream's own Responses API.
    fn speaks_responses(&self) -> bool {
        false
    }
    /// The upstream's Responses API: the body as sent (only `model` rewritten);
    /// a `response` object, or (with `stream`) its events in order.
    fn responses<'a>(
        &'a self,
        _model: &'a str,
        _body: &'a Map<String, Value>,
        _stream: bool,
    ) -> BoxFuture<'a, Result<ResponsesAnswer, ProviderError>> {
        unsupported(self.name(), "the Responses API")
    }
}

/// Builds the client for one configured provider.
pub fn build(config: &ProviderConfig) -> Result<Arc<dyn Provider>, ProviderError> {
    Ok(match config.kind {
        ProviderKind::OpenAi | ProviderKind::Azure => Arc::new(openai_compat::OpenAiCompat::new(config)?),
        ProviderKind::Anthropic => Arc::new(anthropic::Anthropic::new(config)?),
        ProviderKind::Ollama => Arc::new(ollama::Ollama::new(config)?),
        ProviderKind::Gemini | ProviderKind::Vertex => Arc::new(gemini::Gemini::new(config)?),
        #[cfg(feature = "bedrock")]
        ProviderKind::Bedrock => Arc::new(bedrock::Bedrock::new(config)?),
        #[cfg(not(feature = "bedrock"))]
        ProviderKind::Bedrock => {
            let what = format!("providers.{}.type: \"bedrock\"", config.name);
            return Err(ProviderError::Unsupported(
                crate::features::BEDROCK.missing(&what),
            ));
        }
        ProviderKind::ClaudeSubscription => Arc::new(subscription::claude::provider(config)),
        ProviderKind::Codex => Arc::new(subscription::codex::provider(config)),
        ProviderKind::Copilot => Arc::new(subscription::copilot::provider(config)),
    })
}

/// Runs an upstream call with the provider's time limit, mapping its error.
pub(crate) async fn within<T, E>(
    provider: &str,
    limit: std::time::Duration,
    future: impl Future<Output = Result<T, E>>,
    map_error: impl FnOnce(E) -> ProviderError,
) -> Result<T, ProviderError> {
    match tokio::time::timeout(limit, future).await {
        Ok(result) => result.map_err(map_error),
        Err(_) => Err(ProviderError::Timeout {
            provider: provider.into(),
            after: limit,
        }),
    }
}

/// A fresh id for completions translated from other protocols.
pub(crate) fn completion_id() -> String {
    format!("chatcmpl-{}", uuid::Uuid::now_v7().simple())
}
