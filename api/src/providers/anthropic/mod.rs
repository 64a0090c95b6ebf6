//! Anthropic's Messages API over the provider's [`Transport`], translated both ways to OpenAI's
//! chat completions: requests (`request`), responses and errors (`response`),
//! and streaming events (`stream`); `passthrough` sends Messages API
//! requests from Anthropic clients upstream as they are.

mod passthrough;
mod request;
mod response;
mod stream;

pub use passthrough::EventUsage;
pub use response::{finish_reason, stop_reason};

use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;

use super::transport::Transport;
use super::{
    ChatCall, ChatChunkStream, CompletionReply, EmbeddingsCall, MessagesAnswer, MessagesCall, Provider,
    ProviderError,
};
use crate::config::{ProviderConfig, ProviderKind};

const DEFAULT_VERSION: &str = "2023-06-01";

pub struct Anthropic {
    name: String,
    transport: Transport,
    /// `…/v1`, whether or not the configured base URL ended in it.
    api_base: String,
    api_key: Option<SecretString>,
    version: String,
    headers: Vec<(String, SecretString)>,
    timeout: Duration,
}

impl Anthropic {
    pub fn new(config: &ProviderConfig) -> Result<Self, ProviderError> {
        let base = config.base_url.as_str().trim_end_matches('/');
        let api_base = if base.ends_with("/v1") {
            base.to_string()
        } else {
            format!("{base}/v1")
        };
        Ok(Self {
            name: config.name.clone(),
            transport: Transport::new(config)?,
            api_base,
            api_key: config.api_key.clone(),
            version: config
                .api_version
                .clone()
                .unwrap_or_else(|| DEFAULT_VERSION.into()),
            headers: config.headers.clone(),
            timeout: config.timeout,
        })
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let mut builder = self
            .transport
            .client()
            .request(method, format!("{}{path}", self.api_base));
        builder = builder.header("anthropic-version", &self.version);
        if let Some(key) = &self.api_key {
            builder = builder.header("x-api-key", key.expose_secret());
        }
        for (name, value) in &self.headers {
            builder = builder.header(name, value.expose_secret());
        }
        builder
    }

    /// Sends a request and returns the response once its status is a success.
    async fn send(&self, builder: reqwest::RequestBuilder) -> Result<reqwest::Response, ProviderError> {
        let response = super::within(&self.name, self.timeout, builder.send(), |err| {
            ProviderError::from_reqwest(&self.name, err, self.timeout)
        })
        .await?;
        if response.status().is_success() {
            return Ok(response);
        }
        let status = response.status().as_u16();
        let body = response.bytes().await.unwrap_or_default();
        Err(match serde_json::from_slice::<response::ErrorBody>(&body) {
            Ok(parsed) => ProviderError::Upstream {
                provider: self.name.clone(),
                status,
                code: (status == 404).then(|| "model_not_found".to_string()),
                message: parsed.error.message,
                kind: Some(parsed.error.kind),
                param: None,
            },
            Err(_) => ProviderError::Upstream {
                provider: self.name.clone(),
                status,
                message: format!("the upstream failed with HTTP {status}"),
                kind: None,
                code: None,
                param: None,
            },
        })
    }

    fn bad_response(&self, detail: impl ToString) -> ProviderError {
        ProviderError::bad_response(&self.name, detail)
    }
}

/// The HTTP status Anthropic uses for an error type (for errors inside a stream).
fn status_for_error_type(kind: &str) -> u16 {
    match kind {
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        "rate_limit_error" => 429,
        "overloaded_error" => 529,
        _ => 500,
    }
}

/// The error type Anthropic uses for an HTTP status (the inverse of the above).
pub fn error_type_for_status(status: u16) -> &'static str {
    match status {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        500.. => "api_error",
        _ => "invalid_request_error",
    }
}

impl Provider for Anthropic {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> ProviderKind {
        ProviderKind::Anthropic
    }

    fn complete<'a>(
        &'a self,
        model: &'a str,
        call: &'a ChatCall,
    ) -> BoxFuture<'a, Result<CompletionReply, ProviderError>> {
        async move {
            let body = request::messages_request(&call.request, model, false)?;
            let response = self
                .send(self.request(reqwest::Method::POST, "/messages").json(&body))
                .await?;
            let bytes = super::within(&self.name, self.timeout, response.bytes(), |err| {
                ProviderError::from_reqwest(&self.name, err, self.timeout)
            })
            .await?;
            let message: response::Message =
                serde_json::from_slice(&bytes).map_err(|err| self.bad_response(err))?;
            Ok(CompletionReply::Typed(response::to_completion(message)))
        }
        .boxed()
    }

    fn stream<'a>(
        &'a self,
        model: &'a str,
        call: &'a ChatCall,
    ) -> BoxFuture<'a, Result<ChatChunkStream, ProviderError>> {
        async move {
            let body = request::messages_request(&call.request, model, true)?;
            let response = self
                .send(self.request(reqwest::Method::POST, "/messages").json(&body))
                .await?;
            // Always with usage: the router records it and drops it for a client that did not ask.
            let translator = stream::StreamTranslator::new(&self.name, model, true);
            Ok(super::sse::chunks(&self.name, response, translator))
        }
        .boxed()
    }

    fn embeddings<'a>(
        &'a self,
        _: &'a str,
        _: &'a EmbeddingsCall,
    ) -> BoxFuture<'a, Result<Value, ProviderError>> {
        let message = format!(
            "provider {:?} (anthropic) offers no embeddings; use an OpenAI-compatible or Ollama provider",
            self.name
        );
        async move { Err(ProviderError::Unsupported(message)) }.boxed()
    }

    fn messages<'a>(
        &'a self,
        model: &'a str,
        call: &'a MessagesCall,
    ) -> BoxFuture<'a, Result<MessagesAnswer, ProviderError>> {
        self.passthrough(model, call).boxed()
    }

    fn count_tokens<'a>(
        &'a self,
        model: &'a str,
        call: &'a MessagesCall,
    ) -> BoxFuture<'a, Result<Value, ProviderError>> {
        self.count_tokens_upstream(model, call).boxed()
    }

    fn list_models(&self) -> BoxFuture<'_, Result<Vec<String>, ProviderError>> {
        async move {
            let response = self
                .send(self.request(reqwest::Method::GET, "/models?limit=1000"))
                .await?;
            let list: Value = response.json().await.map_err(|err| self.bad_response(err))?;
            Ok(list["data"]
                .as_array()
                .map(|data| {
                    data.iter()
                        .filter_map(|m| m["id"].as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default())
        }
        .boxed()
    }
}
