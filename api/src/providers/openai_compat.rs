//! Any server speaking OpenAI's API (OpenAI, OpenRouter, Groq, Together, vLLM,
//! llama.cpp, LM Studio…), through async-openai's bring-your-own-types calls so
//! the request body reaches the upstream exactly as the client sent it (only
//! `model` is rewritten) and the response comes back as raw JSON.

use std::time::Duration;

use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use secrecy::ExposeSecret;
use serde_json::{Map, Value};

use super::{ChatCall, ChunkStream, EmbeddingsCall, Provider, ProviderError, ResponsesAnswer, WithModel};
use crate::config::{ProviderConfig, ProviderKind};

pub struct OpenAiCompat {
    name: String,
    client: async_openai::Client<OpenAIConfig>,
    timeout: Duration,
    /// Chat fields this upstream must not get (`prompt_cache_key` where refused).
    chat_without: &'static [&'static str],
    /// `/v1/responses` goes to the upstream's own Responses API.
    responses: bool,
}

impl OpenAiCompat {
    pub fn new(config: &ProviderConfig) -> Result<Self, ProviderError> {
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
        let http = super::http_client(config)?;
        // async-openai's default executor retries on its own; Onyx's router owns
        // retries (per-provider budget, then fallbacks), so use the plain transport.
        let client = async_openai::Client::build(http.clone(), openai)
            .with_http_service(async_openai::middleware::ReqwestService::new(http));
        Ok(Self {
            name: config.name.clone(),
            client,
            timeout: config.timeout,
            chat_without: if config.prompt_cache_key {
                &[]
            } else {
                &["prompt_cache_key"]
            },
            responses: config.responses,
        })
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

impl Provider for OpenAiCompat {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> ProviderKind {
        ProviderKind::OpenAi
    }

    fn chat<'a>(&'a self, model: &'a str, call: &'a ChatCall) -> BoxFuture<'a, Result<Value, ProviderError>> {
        async move {
            let body = WithModel {
                model,
                body: &call.body,
                without: self.chat_without,
                stream_usage: false,
            };
            self.within(self.client.chat().create_byot::<_, Value>(body))
                .await
        }
        .boxed()
    }

    fn chat_stream<'a>(
        &'a self,
        model: &'a str,
        call: &'a ChatCall,
    ) -> BoxFuture<'a, Result<ChunkStream, ProviderError>> {
        async move {
            let body = WithModel {
                model,
                body: &call.body,
                without: self.chat_without,
                stream_usage: true,
            };
            let stream = self
                .within(self.client.chat().create_stream_byot::<_, Value>(body))
                .await?;
            let name = self.name.clone();
            let timeout = self.timeout;
            Ok(stream
                .map(move |item| item.map_err(|err| map_openai_error(&name, timeout, err)))
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
                body: &call.body,
                without: &[],
                stream_usage: false,
            };
            self.within(self.client.embeddings().create_byot::<_, Value>(body))
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
                body,
                without: &[],
                stream_usage: false,
            };
            let responses = self.client.responses();
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
            let list: Value = self.within(self.client.models().list_byot()).await?;
            let ids = list["data"]
                .as_array()
                .map(|data| {
                    data.iter()
                        .filter_map(|m| m["id"].as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
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
