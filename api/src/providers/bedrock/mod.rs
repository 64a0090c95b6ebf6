//! AWS Bedrock (`type: "bedrock"`) through the AWS SDK's Bedrock Runtime
//! client: the Converse and ConverseStream APIs, which speak one message
//! format for every model family on Bedrock (Claude, Llama, Mistral, Nova…).
//! The model is a model id or an inference profile id or ARN
//! (`bedrock/us.anthropic.claude-3-5-sonnet-20241022-v2:0`). Translated
//! both ways to OpenAI's chat completions: requests (`request`), answers and
//! errors (`response`), streams (`stream`), free-form JSON (`document`);
//! `client` builds the SDK client (region, endpoint, credentials).

mod client;
mod document;
mod request;
mod response;
mod stream;

use std::time::Duration;

use aws_sdk_bedrockruntime::Client;
use aws_sdk_bedrockruntime::error::{ProvideErrorMetadata, SdkError};
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use serde_json::Value;

use super::{ChatCall, ChatChunkStream, CompletionReply, EmbeddingsCall, Provider, ProviderError};
use crate::config::{ProviderConfig, ProviderKind};

/// The request parts on a `converse` or `converse_stream` builder (one
/// shape, two types).
macro_rules! with_parts {
    ($builder:expr, $model:expr, $parts:expr) => {{
        let parts: request::Converse = $parts;
        $builder
            .model_id($model)
            .set_messages(Some(parts.messages))
            .set_system((!parts.system.is_empty()).then_some(parts.system))
            .set_inference_config(parts.inference)
            .set_tool_config(parts.tools)
    }};
}

pub struct Bedrock {
    name: String,
    settings: client::Settings,
    client: tokio::sync::OnceCell<Client>,
    /// Listed by `/v1/models` (Bedrock's own list is a different service).
    models: Vec<String>,
    timeout: Duration,
}

impl Bedrock {
    pub fn new(config: &ProviderConfig) -> Result<Self, ProviderError> {
        Ok(Self {
            name: config.name.clone(),
            settings: client::Settings::new(config),
            client: tokio::sync::OnceCell::new(),
            models: config.models.clone(),
            timeout: config.timeout,
        })
    }

    async fn client(&self) -> Result<&Client, ProviderError> {
        self.client.get_or_try_init(|| self.settings.client()).await
    }

    /// A failed call, with the HTTP status of its response when there was one.
    fn sdk_error<E>(&self, err: SdkError<E, aws_smithy_runtime_api::http::Response>) -> ProviderError
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let status = err.raw_response().map(|r| r.status().as_u16());
        response::sdk_error(&self.name, err, self.timeout, status)
    }

    fn check_model(model: &str) -> Result<(), ProviderError> {
        match model.is_empty() {
            true => Err(ProviderError::InvalidRequest(
                "model: a bedrock model id is required (bedrock/<model or inference profile id>)".into(),
            )),
            false => Ok(()),
        }
    }
}

impl Provider for Bedrock {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> ProviderKind {
        ProviderKind::Bedrock
    }

    fn complete<'a>(
        &'a self,
        model: &'a str,
        call: &'a ChatCall,
    ) -> BoxFuture<'a, Result<CompletionReply, ProviderError>> {
        async move {
            Self::check_model(model)?;
            let parts = request::converse_request(&call.request)?;
            let send = with_parts!(self.client().await?.converse(), model, parts).send();
            let output = super::within(&self.name, self.timeout, send, |e| self.sdk_error(e)).await?;
            Ok(CompletionReply::Typed(response::to_completion(&output, model)))
        }
        .boxed()
    }

    fn stream<'a>(
        &'a self,
        model: &'a str,
        call: &'a ChatCall,
    ) -> BoxFuture<'a, Result<ChatChunkStream, ProviderError>> {
        async move {
            Self::check_model(model)?;
            let parts = request::converse_request(&call.request)?;
            let send = with_parts!(self.client().await?.converse_stream(), model, parts).send();
            let output = super::within(&self.name, self.timeout, send, |e| self.sdk_error(e)).await?;
            let mut events = output.stream;
            let mut translator = stream::StreamTranslator::new(&self.name, model);
            let name = self.name.clone();
            let timeout = self.timeout;
            let chunks = async_stream::stream! {
                loop {
                    match events.recv().await {
                        Ok(Some(event)) => for chunk in translator.on_event(&event) { yield Ok(chunk) },
                        Ok(None) => break,
                        Err(err) => {
                            yield Err(stream::stream_error(&name, err, timeout));
                            return;
                        }
                    }
                }
                match translator.finish() {
                    Ok(chunks) => for chunk in chunks { yield Ok(chunk) },
                    Err(err) => yield Err(err),
                }
            };
            Ok(chunks.boxed())
        }
        .boxed()
    }

    fn embeddings<'a>(
        &'a self,
        _: &'a str,
        _: &'a EmbeddingsCall,
    ) -> BoxFuture<'a, Result<Value, ProviderError>> {
        super::no_embeddings(&self.name, ProviderKind::Bedrock)
    }

    fn list_models(&self) -> BoxFuture<'_, Result<Vec<String>, ProviderError>> {
        let models = self.models.clone();
        async move { Ok(models) }.boxed()
    }
}
