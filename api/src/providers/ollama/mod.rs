//! Ollama through ollama-rs: chat (JSON and NDJSON streaming), tools,
//! embeddings (`/api/embed`) and the model list (`/api/tags`).

mod translate;

use std::time::Duration;

use base64::Engine;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use ollama_rs::error::OllamaError;
use ollama_rs::generation::embeddings::request::{EmbeddingsInput, GenerateEmbeddingsRequest};
use serde_json::{Value, json};

use super::{ChatCall, ChatChunkStream, CompletionReply, EmbeddingsCall, Provider, ProviderError};
use crate::chat::{ChunkFactory, EmbeddingInput, FinishReason};
use crate::config::{ProviderConfig, ProviderKind};

pub struct Ollama {
    name: String,
    client: ollama_rs::Ollama,
    timeout: Duration,
}

impl Ollama {
    pub fn new(config: &ProviderConfig) -> Result<Self, ProviderError> {
        Ok(Self {
            name: config.name.clone(),
            client: super::transport::ollama(config)?,
            timeout: config.timeout,
        })
    }

    async fn within<T>(
        &self,
        future: impl Future<Output = Result<T, OllamaError>>,
    ) -> Result<T, ProviderError> {
        super::within(&self.name, self.timeout, future, |err| self.map_error(err)).await
    }

    /// ollama-rs reports upstream failures as the body text, without the status.
    fn map_error(&self, err: OllamaError) -> ProviderError {
        let provider = self.name.clone();
        let upstream = |message: String| {
            let status = if message.contains("not found") { 404 } else { 500 };
            ProviderError::Upstream {
                provider: provider.clone(),
                status,
                code: (status == 404).then(|| "model_not_found".to_string()),
                message,
                kind: None,
                param: None,
            }
        };
        match err {
            OllamaError::ReqwestError(err) if err.is_timeout() => ProviderError::Timeout {
                provider,
                after: self.timeout,
            },
            OllamaError::ReqwestError(err) => ProviderError::Connect {
                provider,
                detail: crate::error_chain::root_cause(&err),
            },
            OllamaError::Other(text) => {
                let message = serde_json::from_str::<Value>(&text)
                    .ok()
                    .and_then(|v| v["error"].as_str().map(String::from))
                    .unwrap_or(text);
                upstream(message)
            }
            OllamaError::InternalError(inner) => upstream(inner.message),
            OllamaError::JsonError(err) => ProviderError::BadResponse {
                provider,
                detail: err.to_string(),
            },
            other => ProviderError::BadResponse {
                provider,
                detail: other.to_string(),
            },
        }
    }
}

impl Provider for Ollama {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> ProviderKind {
        ProviderKind::Ollama
    }

    fn complete<'a>(
        &'a self,
        model: &'a str,
        call: &'a ChatCall,
    ) -> BoxFuture<'a, Result<CompletionReply, ProviderError>> {
        async move {
            let request = translate::chat_request(&call.request, model)?;
            let response = self.within(self.client.send_chat_messages(request)).await?;
            Ok(CompletionReply::Typed(translate::completion(
                response,
                super::completion_id(),
            )))
        }
        .boxed()
    }

    fn stream<'a>(
        &'a self,
        model: &'a str,
        call: &'a ChatCall,
    ) -> BoxFuture<'a, Result<ChatChunkStream, ProviderError>> {
        async move {
            let request = translate::chat_request(&call.request, model)?;
            let mut upstream = self.within(self.client.send_chat_messages_stream(request)).await?;
            let factory = ChunkFactory::new(super::completion_id(), model.to_string());
            let name = self.name.clone();
            let chunks = async_stream::stream! {
                let mut first = true;
                let mut tools = 0u32;
                while let Some(item) = upstream.next().await {
                    let Ok(response) = item else {
                        yield Err(ProviderError::Connect { provider: name.clone(), detail: "the stream broke off".into() });
                        return;
                    };
                    let delta = translate::delta(&response, first, &mut tools);
                    first = false;
                    if delta.content.is_some() || delta.tool_calls.is_some() || delta.role.is_some() {
                        yield Ok(factory.delta(delta, None));
                    }
                    if response.done {
                        let reason = if tools > 0 { FinishReason::ToolCalls } else { FinishReason::Stop };
                        yield Ok(factory.delta(Default::default(), Some(reason)));
                        // Always: the router records it and drops it for a client that did not ask.
                        yield Ok(factory.usage(translate::usage(&response)));
                        return;
                    }
                }
                yield Err(ProviderError::Connect { provider: name.clone(), detail: "the stream ended before done".into() });
            };
            Ok(chunks.boxed())
        }
        .boxed()
    }

    fn embeddings<'a>(
        &'a self,
        model: &'a str,
        call: &'a EmbeddingsCall,
    ) -> BoxFuture<'a, Result<Value, ProviderError>> {
        async move {
            let texts = match &call.request.input {
                EmbeddingInput::One(text) => vec![text.clone()],
                EmbeddingInput::Many(texts) => texts.clone(),
                EmbeddingInput::Tokens(_) | EmbeddingInput::TokenBatches(_) => {
                    return Err(ProviderError::InvalidRequest(
                        "input: ollama embeds text only, not token arrays".into(),
                    ));
                }
            };
            let mut request =
                GenerateEmbeddingsRequest::new(model.to_string(), EmbeddingsInput::Multiple(texts));
            if let Some(dimensions) = call.request.dimensions {
                request = request.dimensions(dimensions);
            }
            let response = self.within(self.client.generate_embeddings(request)).await?;
            let base64 = call.request.encoding_format.as_deref() == Some("base64");
            let data: Vec<Value> = response
                .embeddings
                .into_iter()
                .enumerate()
                .map(|(index, vector)| {
                    let embedding = if base64 {
                        json!(encode_base64(&vector))
                    } else {
                        json!(vector)
                    };
                    json!({"object": "embedding", "index": index, "embedding": embedding})
                })
                .collect();
            Ok(json!({
                "object": "list",
                "data": data,
                "model": model,
                "usage": {"prompt_tokens": 0, "total_tokens": 0}
            }))
        }
        .boxed()
    }

    fn list_models(&self) -> BoxFuture<'_, Result<Vec<String>, ProviderError>> {
        async move {
            let models = self.within(self.client.list_local_models()).await?;
            Ok(models.into_iter().map(|m| m.name).collect())
        }
        .boxed()
    }
}

/// OpenAI's `encoding_format: "base64"`: little-endian f32s, base64-encoded.
fn encode_base64(vector: &[f32]) -> String {
    let bytes: Vec<u8> = vector.iter().flat_map(|v| v.to_le_bytes()).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
