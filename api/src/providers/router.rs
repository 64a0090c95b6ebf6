//! Resolves a request's `model` to an ordered list of targets and runs a call
//! against them: transient failures (429, 5xx, connect errors, timeouts) are
//! retried on the same target with exponential backoff, then the next target of
//! an alias's fallback list is tried. Streams are retried only until the
//! upstream starts answering; after the first chunk a failure ends the stream.
//! The tokens each answer reports (prompt, completion, read from the prompt
//! cache) are counted here, for every caller: plain calls and agent runs alike.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::future::BoxFuture;
use serde_json::{Map, Value};

use super::anthropic::EventUsage;
use super::{
    ChatCall, ChunkStream, EmbeddingsCall, MessagesAnswer, MessagesCall, ModelRef, Provider, ProviderError,
    Usage,
};
use crate::observability::Metrics;

const BACKOFF_BASE: Duration = Duration::from_millis(100);
const BACKOFF_CAP: Duration = Duration::from_secs(5);

/// One concrete upstream model to try.
#[derive(Clone)]
pub struct ModelTarget {
    pub provider: Arc<dyn Provider>,
    pub model: String,
    pub max_retries: u32,
}

impl ModelTarget {
    pub fn model_ref(&self) -> ModelRef {
        ModelRef {
            provider: self.provider.name().to_string(),
            model: self.model.clone(),
        }
    }
}

/// Why a model string could not be routed (answered as 404 `model_not_found`).
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    #[error("{0}")]
    BadReference(#[from] super::ModelRefError),
    #[error("unknown provider {provider:?} in model {model:?}; configured providers: {known}")]
    UnknownProvider {
        provider: String,
        model: String,
        known: String,
    },
}

/// What an upstream's Responses API answered.
pub enum ResponsesAnswer {
    /// One `response` object.
    Response(Value),
    /// Its stream events (each with its `type`), in order.
    Events(ChunkStream),
}

pub struct Router {
    providers: BTreeMap<String, (Arc<dyn Provider>, u32)>,
    aliases: BTreeMap<String, Vec<ModelRef>>,
    metrics: Arc<Metrics>,
}

impl Router {
    pub fn new(
        providers: Vec<(Arc<dyn Provider>, u32)>,
        aliases: BTreeMap<String, Vec<ModelRef>>,
        metrics: Arc<Metrics>,
    ) -> Self {
        let providers = providers
            .into_iter()
            .map(|(p, retries)| (p.name().to_string(), (p, retries)))
            .collect();
        Self {
            providers,
            aliases,
            metrics,
        }
    }

    pub fn providers(&self) -> impl Iterator<Item = &Arc<dyn Provider>> {
        self.providers.values().map(|(p, _)| p)
    }

    pub fn aliases(&self) -> &BTreeMap<String, Vec<ModelRef>> {
        &self.aliases
    }

    /// The targets for `model`: an alias's list, or the one `provider/model`.
    pub fn resolve(&self, model: &str) -> Result<Vec<ModelTarget>, RouteError> {
        let refs = match self.aliases.get(model) {
            Some(refs) => refs.clone(),
            None => vec![ModelRef::parse(model)?],
        };
        refs.into_iter()
            .map(|r| match self.providers.get(&r.provider) {
                Some((provider, retries)) => Ok(ModelTarget {
                    provider: provider.clone(),
                    model: r.model,
                    max_retries: *retries,
                }),
                None => Err(RouteError::UnknownProvider {
                    provider: r.provider,
                    model: model.to_string(),
                    known: self.known_providers(),
                }),
            })
            .collect()
    }

    fn known_providers(&self) -> String {
        if self.providers.is_empty() {
            "none (set OPENAI_API_KEY, ANTHROPIC_API_KEY, OLLAMA_HOST or add `providers` to the config)"
                .into()
        } else {
            self.providers.keys().cloned().collect::<Vec<_>>().join(", ")
        }
    }

    pub async fn chat(
        &self,
        targets: &[ModelTarget],
        call: &ChatCall,
    ) -> Result<(Value, ModelRef), ProviderError> {
        let (completion, served_by) = self.run(targets, |t| t.provider.chat(&t.model, call)).await?;
        if let Some(usage) = Usage::from_response(&completion) {
            record_usage(&self.metrics, &served_by, &usage);
        }
        Ok((completion, served_by))
    }

    pub async fn chat_stream(
        &self,
        targets: &[ModelTarget],
        call: &ChatCall,
    ) -> Result<(ChunkStream, ModelRef), ProviderError> {
        let (stream, served_by) = self
            .run(targets, |t| t.provider.chat_stream(&t.model, call))
            .await?;
        let (metrics, model) = (self.metrics.clone(), served_by.clone());
        let stream = stream.inspect(move |chunk| {
            if let Some(usage) = chunk.as_ref().ok().and_then(Usage::from_response) {
                record_usage(&metrics, &model, &usage);
            }
        });
        Ok((stream.boxed(), served_by))
    }

    /// A Responses API call passed through to upstreams that speak it; the
    /// usage of the finished response is counted like a chat answer's.
    pub async fn responses(
        &self,
        targets: &[ModelTarget],
        body: &Map<String, Value>,
        stream: bool,
    ) -> Result<(ResponsesAnswer, ModelRef), ProviderError> {
        let (answer, served_by) = self
            .run(targets, |t| t.provider.responses(&t.model, body, stream))
            .await?;
        let answer = match answer {
            ResponsesAnswer::Response(response) => {
                if let Some(usage) = Usage::from_responses_usage(&response) {
                    record_usage(&self.metrics, &served_by, &usage);
                }
                ResponsesAnswer::Response(response)
            }
            ResponsesAnswer::Events(events) => {
                let (metrics, model) = (self.metrics.clone(), served_by.clone());
                let events = events.inspect(move |event| {
                    let finished = event.as_ref().ok().filter(|e| {
                        matches!(
                            e["type"].as_str(),
                            Some("response.completed" | "response.incomplete" | "response.failed")
                        )
                    });
                    if let Some(usage) = finished.and_then(|e| Usage::from_responses_usage(&e["response"])) {
                        record_usage(&metrics, &model, &usage);
                    }
                });
                ResponsesAnswer::Events(events.boxed())
            }
        };
        Ok((answer, served_by))
    }

    pub async fn embeddings(
        &self,
        targets: &[ModelTarget],
        call: &EmbeddingsCall,
    ) -> Result<(Value, ModelRef), ProviderError> {
        self.run(targets, |t| t.provider.embeddings(&t.model, call)).await
    }

    async fn run<'a, T>(
        &self,
        targets: &'a [ModelTarget],
        op: impl Fn(&'a ModelTarget) -> BoxFuture<'a, Result<T, ProviderError>>,
    ) -> Result<(T, ModelRef), ProviderError> {
        let mut last_error = None;
        for target in targets {
            let mut attempt = 0;
            loop {
                let started = Instant::now();
                let result = op(target).await;
                self.metrics
                    .record_upstream(target.provider.name(), started.elapsed().as_secs_f64());
                let err = match result {
                    Ok(value) => return Ok((value, target.model_ref())),
                    Err(err) => err,
                };
                self.metrics
                    .record_upstream_error(target.provider.name(), error_reason(&err));
                tracing::warn!(provider = target.provider.name(), model = %target.model, attempt, error = %err, "upstream call failed");
                if err.is_retryable() && attempt < target.max_retries {
                    tokio::time::sleep(backoff(attempt)).await;
                    attempt += 1;
                    continue;
                }
                if is_callers_fault(&err) {
                    return Err(err);
                }
                last_error = Some(err);
                break;
            }
        }
        Err(last_error.unwrap_or_else(|| ProviderError::InvalidRequest("no model to call".into())))
    }

    /// A Messages API request passed through to Anthropic upstreams, retried
    /// and counted like `chat`.
    pub async fn messages(
        &self,
        targets: &[ModelTarget],
        call: &MessagesCall,
    ) -> Result<(MessagesAnswer, ModelRef), ProviderError> {
        let (answer, served_by) = self.run(targets, |t| t.provider.messages(&t.model, call)).await?;
        let answer = match answer {
            MessagesAnswer::Message(message) => {
                if let Some(usage) = EventUsage::of_message(&message) {
                    record_usage(&self.metrics, &served_by, &usage);
                }
                MessagesAnswer::Message(message)
            }
            MessagesAnswer::Events(events) => {
                let (metrics, model) = (self.metrics.clone(), served_by.clone());
                let mut usage = EventUsage::default();
                let events = events.inspect(move |event| {
                    if let Some(usage) = event.as_ref().ok().and_then(|e| usage.observe(e)) {
                        record_usage(&metrics, &model, &usage);
                    }
                });
                MessagesAnswer::Events(events.boxed())
            }
        };
        Ok((answer, served_by))
    }

    /// The upstream's token count for a Messages API request (first target).
    pub async fn count_tokens(
        &self,
        targets: &[ModelTarget],
        call: &MessagesCall,
    ) -> Result<Value, ProviderError> {
        let (count, _) = self
            .run(targets, |t| t.provider.count_tokens(&t.model, call))
            .await?;
        Ok(count)
    }
}

fn record_usage(metrics: &Metrics, served_by: &ModelRef, usage: &Usage) {
    metrics.record_usage(
        &served_by.provider,
        &served_by.model,
        usage.prompt_tokens,
        usage.completion_tokens,
    );
    metrics.record_cached(&served_by.provider, &served_by.model, usage.cached_tokens());
}

/// A bad request fails the same way on every fallback, so it ends the walk.
fn is_callers_fault(err: &ProviderError) -> bool {
    matches!(
        err,
        ProviderError::InvalidRequest(_) | ProviderError::Unsupported(_)
    ) || matches!(
        err,
        ProviderError::Upstream {
            status: 400 | 413 | 422,
            ..
        }
    )
}

fn error_reason(err: &ProviderError) -> &'static str {
    match err {
        ProviderError::Upstream { status: 429, .. } => "rate_limited",
        ProviderError::Upstream { status, .. } if *status >= 500 => "server_error",
        ProviderError::Upstream { .. } => "client_error",
        ProviderError::Connect { .. } => "connect",
        ProviderError::Timeout { .. } => "timeout",
        ProviderError::BadResponse { .. } => "bad_response",
        ProviderError::Unsupported(_) | ProviderError::InvalidRequest(_) => "invalid_request",
    }
}

/// Exponential backoff with up to 50% random jitter, capped.
fn backoff(attempt: u32) -> Duration {
    let base = BACKOFF_BASE
        .saturating_mul(1u32 << attempt.min(10))
        .min(BACKOFF_CAP);
    let jitter_permille = u64::from(uuid::Uuid::new_v4().as_u128() as u16 % 500);
    base + base.mul_f64(jitter_permille as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        assert!(backoff(0) >= BACKOFF_BASE && backoff(0) < BACKOFF_BASE * 2);
        assert!(backoff(2) >= BACKOFF_BASE * 4);
        assert!(backoff(30) <= BACKOFF_CAP.mul_f64(1.5));
    }
}
