//! Any server speaking OpenAI's API (OpenAI, OpenRouter, Groq, Together, vLLM,
//! llama.cpp, LM Studio…). The request body reaches the upstream exactly as
//! the client sent it (only `model` is rewritten): JSON calls over
//! [`super::openai_wire`] with endpoints prepared once, streams and the
//! Responses API through async-openai's bring-your-own-types calls, all on
//! the provider's [`Transport`]. A chat answer is passed on as the upstream's
//! bytes ([`CompletionReply::Verbatim`]); streamed chunks are read as
//! [`ChatChunk`]s (lossless), and an error the upstream sends inside its
//! stream ends it as an error. Azure OpenAI is the same wire format with its
//! own URLs and key header ([`super::azure`]).

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use async_openai::config::{Config, OpenAIConfig};
use async_openai::error::OpenAIError;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use secrecy::ExposeSecret;
use serde_json::{Map, Value};

use super::openai_wire::{self, Wire};
use super::transport::{Endpoint, Transport};
use super::{
    ChatCall, ChatChunk, ChatChunkStream, CompletionReply, EmbeddingsCall, Provider, ProviderError,
    ResponsesAnswer, WithModel,
};
use crate::config::{ProviderConfig, ProviderKind};

type Client = async_openai::Client<Arc<dyn Config>>;

/// The JSON endpoints called over [`Wire`].
#[derive(Clone, Copy)]
enum JsonApi {
    Chat,
    Embeddings,
}

impl JsonApi {
    fn path(self) -> &'static str {
        match self {
            Self::Chat => "/chat/completions",
            Self::Embeddings => "/embeddings",
        }
    }
}

/// Where calls go.
enum Upstream {
    /// One client for every model, and its JSON endpoints prepared.
    Shared {
        client: Client,
        chat: Box<Endpoint>,
        embeddings: Box<Endpoint>,
    },
    /// Azure: each model's deployment (a client per call, sharing the transport).
    Azure { deployments: super::azure::Deployments },
}

pub struct OpenAiCompat {
    name: String,
    transport: Transport,
    kind: ProviderKind,
    upstream: Upstream,
    timeout: Duration,
    /// Chat fields this upstream must not get (`prompt_cache_key` where refused).
    chat_without: &'static [&'static str],
    /// `/v1/responses` goes to the upstream's own Responses API.
    responses: bool,
}

impl OpenAiCompat {
    pub fn new(config: &ProviderConfig) -> Result<Self, ProviderError> {
        let transport = Transport::new(config)?;
        let upstream = match config.kind {
            ProviderKind::Azure => Upstream::Azure {
                deployments: super::azure::Deployments::new(config)?,
            },
            _ => {
                let openai: Arc<dyn Config> = Arc::new(openai_config(config)?);
                Upstream::Shared {
                    chat: Box::new(openai_wire::endpoint(
                        openai.as_ref(),
                        JsonApi::Chat.path(),
                        &config.name,
                    )?),
                    embeddings: Box::new(openai_wire::endpoint(
                        openai.as_ref(),
                        JsonApi::Embeddings.path(),
                        &config.name,
                    )?),
                    client: client(transport.client(), openai),
                }
            }
        };
        Ok(Self {
            name: config.name.clone(),
            transport,
            kind: config.kind,
            upstream,
            timeout: config.timeout,
            chat_without: if config.prompt_cache_key {
                &[]
            } else {
                &["prompt_cache_key"]
            },
            responses: config.responses,
        })
    }

    /// The client for `model` (Azure: its deployment's).
    fn client(&self, model: &str) -> Result<Client, ProviderError> {
        match &self.upstream {
            Upstream::Shared { client, .. } => Ok(client.clone()),
            Upstream::Azure { deployments } => {
                Ok(client(self.transport.client(), deployments.config_for(model)?))
            }
        }
    }

    /// The endpoint of `api` for `model` (Azure: its deployment's, made per call).
    fn endpoint(&self, model: &str, api: JsonApi) -> Result<Cow<'_, Endpoint>, ProviderError> {
        match &self.upstream {
            Upstream::Shared { chat, embeddings, .. } => Ok(Cow::Borrowed(match api {
                JsonApi::Chat => chat.as_ref(),
                JsonApi::Embeddings => embeddings.as_ref(),
            })),
            Upstream::Azure { deployments } => Ok(Cow::Owned(openai_wire::endpoint(
                deployments.config_for(model)?.as_ref(),
                api.path(),
                &self.name,
            )?)),
        }
    }

    /// The client's chat body as this upstream takes it: `model` rewritten,
    /// refused fields left out, and (for streams) usage asked for.
    fn chat_body<'a>(&'a self, model: &'a str, call: &'a ChatCall, stream: bool) -> WithModel<'a> {
        WithModel {
            model,
            body: (&call.body).into(),
            without: self.chat_without,
            stream_usage: stream,
        }
    }

    fn wire(&self) -> Wire<'_> {
        Wire {
            transport: &self.transport,
            provider: &self.name,
            timeout: self.timeout,
        }
    }

    fn map_error(&self, err: OpenAIError) -> ProviderError {
        map_openai_error(&self.name, self.timeout, err)
    }

    async fn within<T>(
        &self,
        future: impl Future<Output = Result<T, OpenAIError>>,
    ) -> Result<T, ProviderError> {
        super::within(&self.name, self.timeout, future, |err| self.map_error(err)).await
    }
}

fn openai_config(config: &ProviderConfig) -> Result<OpenAIConfig, ProviderError> {
    let key = config
        .api_key
        .as_ref()
        .map(|k| k.expose_secret().to_string())
        .unwrap_or_default();
    let base = config.base_url.as_str().trim_end_matches('/').to_string();
    let mut openai = OpenAIConfig::new().with_api_base(base).with_api_key(key);
    for (name, value) in &config.headers {
        let invalid = |detail: String| {
            ProviderError::InvalidRequest(format!("providers.{}.headers: {detail}", config.name))
        };
        let name = http::HeaderName::try_from(name.as_str()).map_err(|err| invalid(err.to_string()))?;
        openai = openai
            .with_header(name, value.expose_secret())
            .map_err(|err| invalid(err.to_string()))?;
    }
    Ok(openai)
}

/// async-openai's default executor retries on its own; Onyx's router owns
/// retries (per-provider budget, then fallbacks), so use the plain transport.
fn client(http: &reqwest::Client, config: Arc<dyn Config>) -> Client {
    async_openai::Client::build(http.clone(), config)
        .with_http_service(async_openai::middleware::ReqwestService::new(http.clone()))
}

impl Provider for OpenAiCompat {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> ProviderKind {
        self.kind
    }

    fn complete<'a>(
        &'a self,
        model: &'a str,
        call: &'a ChatCall,
    ) -> BoxFuture<'a, Result<CompletionReply, ProviderError>> {
        async move {
            let endpoint = self.endpoint(model, JsonApi::Chat)?;
            let bytes = self
                .wire()
                .post_for_bytes(&endpoint, self.chat_body(model, call, false).to_json())
                .await?;
            CompletionReply::verbatim(&self.name, bytes)
        }
        .boxed()
    }

    fn stream<'a>(
        &'a self,
        model: &'a str,
        call: &'a ChatCall,
    ) -> BoxFuture<'a, Result<ChatChunkStream, ProviderError>> {
        async move {
            let body = self.chat_body(model, call, true);
            let stream = self
                .within(
                    self.client(model)?
                        .chat()
                        .create_stream_byot::<_, ChatChunk>(body),
                )
                .await?;
            let name = self.name.clone();
            let timeout = self.timeout;
            Ok(stream
                .map(move |item| match item {
                    Ok(chunk) => match chunk.error() {
                        Some(error) => Err(openai_wire::stream_error(&name, error)),
                        None => Ok(chunk),
                    },
                    Err(err) => Err(map_openai_error(&name, timeout, err)),
                })
                .boxed())
        }
        .boxed()
    }

    fn embeddings<'a>(
        &'a self,
        model: &'a str,
        call: &'a EmbeddingsCall,
    ) -> BoxFuture<'a, Result<Value, ProviderError>> {
        async move {
            let body = WithModel {
                model,
                body: (&call.body).into(),
                without: &[],
                stream_usage: false,
            };
            self.wire()
                .post(&*self.endpoint(model, JsonApi::Embeddings)?, body.to_json())
                .await
        }
        .boxed()
    }

    fn speaks_responses(&self) -> bool {
        self.responses
    }

    fn responses<'a>(
        &'a self,
        model: &'a str,
        body: &'a Map<String, Value>,
        stream: bool,
    ) -> BoxFuture<'a, Result<ResponsesAnswer, ProviderError>> {
        async move {
            let body = WithModel {
                model,
                body: body.into(),
                without: &[],
                stream_usage: false,
            };
            let client = self.client(model)?;
            let responses = client.responses();
            if !stream {
                let response = self.within(responses.create_byot::<_, Value>(body)).await?;
                return Ok(ResponsesAnswer::Response(response));
            }
            let events = self
                .within(responses.create_stream_byot::<_, Value>(body))
                .await?;
            let name = self.name.clone();
            let timeout = self.timeout;
            Ok(ResponsesAnswer::Events(
                events
                    .map(move |item| item.map_err(|err| map_openai_error(&name, timeout, err)))
                    .boxed(),
            ))
        }
        .boxed()
    }

    fn list_models(&self) -> BoxFuture<'_, Result<Vec<String>, ProviderError>> {
        async move {
            let client = match &self.upstream {
                Upstream::Shared { client, .. } => client.clone(),
                Upstream::Azure { deployments } => {
                    client(self.transport.client(), deployments.resource_config())
                }
            };
            let list: Value = self.within(client.models().list_byot()).await?;
            let mut ids: Vec<String> = list["data"]
                .as_array()
                .map(|data| {
                    data.iter()
                        .filter_map(|m| m["id"].as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            // Azure lists the resource's base models; the names routed are the deployments'.
            if let Upstream::Azure { deployments, .. } = &self.upstream {
                ids.extend(
                    deployments
                        .models()
                        .filter(|m| !ids.contains(m))
                        .cloned()
                        .collect::<Vec<_>>(),
                );
            }
            Ok(ids)
        }
        .boxed()
    }
}

fn map_openai_error(provider: &str, timeout: Duration, err: OpenAIError) -> ProviderError {
    match err {
        OpenAIError::ApiError(response) => {
            let status = response.status_code.as_u16();
            let api = response.api_error;
            // async-openai keeps a 5xx body verbatim as the message: it may be an
            // HTML page or carry upstream internals, so only a JSON error is shown.
            let message = if status >= 500 {
                serde_json::from_str::<async_openai::error::WrappedError>(&api.message)
                    .map(|wrapped| wrapped.error.message)
                    .unwrap_or_else(|_| format!("the upstream failed with HTTP {status}"))
            } else {
                api.message
            };
            ProviderError::Upstream {
                provider: provider.into(),
                status,
                message,
                kind: api.r#type,
                code: api.code,
                param: api.param,
            }
        }
        OpenAIError::Reqwest(err) => ProviderError::from_reqwest(provider, err, timeout),
        OpenAIError::JSONDeserialize(err, _) => ProviderError::BadResponse {
            provider: provider.into(),
            detail: err.to_string(),
        },
        OpenAIError::StreamError(err) => ProviderError::BadResponse {
            provider: provider.into(),
            detail: err.to_string(),
        },
        OpenAIError::InvalidArgument(detail) => ProviderError::InvalidRequest(detail),
        other => ProviderError::BadResponse {
            provider: provider.into(),
            detail: other.to_string(),
        },
    }
}
