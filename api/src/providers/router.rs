//! Resolves a request's `model` to an ordered list of targets and runs a call
//! against them: transient failures (429, 5xx, connect errors, timeouts) are
//! retried on the same target with exponential backoff, then the next target of
//! an alias's fallback list is tried. Streams are retried only until the
//! upstream starts answering; after the first chunk a failure ends the stream.
//! The tokens each answer reports (prompt, completion, read from the prompt
//! cache) are counted here, for every caller: plain calls and agent runs alike;
//! the [`UsageMeter`] admits each call against budgets and limits before it
//! goes out and records what it used after. A target whose circuit is open
//! ([`super::breaker`]) is skipped at once, without retries.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use futures::StreamExt;
use futures::future::BoxFuture;
use serde_json::Value;

use super::breaker::{Breaker, CircuitView, Tripped};
use super::meter::{Attribution, NoMeter, Reservation, UsageMeter};
use super::{
    BodyRef, ChatCall, ChatChunkStream, CompletionReply, EmbeddingsCall, EventStream, ModelRef, Provider,
    ProviderError, Usage,
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
    /// None when the provider's breaker is off.
    pub breaker: Option<Arc<Breaker>>,
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
    Events(EventStream),
}

/// A provider as the router uses it.
#[derive(Clone)]
pub struct RoutedProvider {
    pub client: Arc<dyn Provider>,
    pub max_retries: u32,
    /// Models offered whether or not the upstream lists them.
    pub models: Vec<String>,
    /// Shared by every build of the routes while the provider is unchanged.
    pub breaker: Option<Arc<Breaker>>,
}

/// What the router routes to: swapped whole when providers change.
#[derive(Default)]
pub struct Routes {
    pub providers: BTreeMap<String, RoutedProvider>,
    pub aliases: BTreeMap<String, Vec<ModelRef>>,
}

pub struct Router {
    routes: ArcSwap<Routes>,
    metrics: Arc<Metrics>,
    meter: Arc<dyn UsageMeter>,
}

impl Router {
    pub fn new(routes: Routes, metrics: Arc<Metrics>) -> Self {
        Self {
            routes: ArcSwap::from_pointee(routes),
            metrics,
            meter: Arc::new(NoMeter),
        }
    }

    /// Records and limits every call through `meter`.
    pub fn with_meter(mut self, meter: Arc<dyn UsageMeter>) -> Self {
        self.meter = meter;
        self
    }

    pub(super) fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Routes every later request by `routes` (calls under way finish on the old ones).
    pub fn replace(&self, routes: Routes) {
        self.routes.store(Arc::new(routes));
    }

    /// The routes as they are now.
    pub fn routes(&self) -> Arc<Routes> {
        self.routes.load_full()
    }

    pub fn providers(&self) -> Vec<Arc<dyn Provider>> {
        self.routes
            .load()
            .providers
            .values()
            .map(|p| p.client.clone())
            .collect()
    }

    /// Every provider's circuit (those with a breaker).
    pub fn circuits(&self) -> Vec<CircuitView> {
        self.routes
            .load()
            .providers
            .iter()
            .filter_map(|(name, p)| p.breaker.as_ref().map(|b| b.view(name)))
            .collect()
    }

    /// Sets the `onyx_circuit_state` gauges to the circuits as they are now.
    pub fn export_circuits(&self) {
        let states: Vec<(String, i64)> = self
            .circuits()
            .into_iter()
            .map(|c| (c.provider, c.state.gauge()))
            .collect();
        self.metrics.set_circuit_states(&states);
    }

    pub fn provider(&self, name: &str) -> Option<Arc<dyn Provider>> {
        self.routes.load().providers.get(name).map(|p| p.client.clone())
    }

    /// The targets for `model`: an alias's list, or the one `provider/model`.
    pub fn resolve(&self, model: &str) -> Result<Vec<ModelTarget>, RouteError> {
        let routes = self.routes.load();
        let refs = match routes.aliases.get(model) {
            Some(refs) => refs.clone(),
            None => vec![ModelRef::parse(model)?],
        };
        refs.into_iter()
            .map(|r| match routes.providers.get(&r.provider) {
                Some(routed) => Ok(ModelTarget {
                    provider: routed.client.clone(),
                    model: r.model,
                    max_retries: routed.max_retries,
                    breaker: routed.breaker.clone(),
                }),
                None => Err(RouteError::UnknownProvider {
                    provider: r.provider,
                    model: model.to_string(),
                    known: known_providers(&routes),
                }),
            })
            .collect()
    }

    /// A complete answer (it may be the upstream's bytes, unparsed), with
    /// the call's cost in USD when its price is known.
    pub async fn complete(
        &self,
        targets: &[ModelTarget],
        call: &ChatCall,
    ) -> Result<(CompletionReply, ModelRef, Option<f64>), ProviderError> {
        let (reply, served_by, mut settle) = self
            .run_metered(targets, &call.who, (&call.body).into(), |t| {
                t.provider.complete(&t.model, call)
            })
            .await?;
        settle.observe(&self.metrics, reply.usage().cloned());
        Ok((reply, served_by, settle.finish()))
    }

    /// Streams the answer. The upstream is always asked for usage (the
    /// providers see to it); the usage-only chunk reaches the client only when
    /// it asked with `stream_options.include_usage`.
    pub async fn stream(
        &self,
        targets: &[ModelTarget],
        call: &ChatCall,
    ) -> Result<(ChatChunkStream, ModelRef), ProviderError> {
        let (stream, served_by, mut settle) = self
            .run_metered(targets, &call.who, (&call.body).into(), |t| {
                t.provider.stream(&t.model, call)
            })
            .await?;
        let metrics = self.metrics.clone();
        let client_wants_usage = call.request.include_usage();
        let stream = stream.filter_map(move |mut chunk| {
            let mut keep = true;
            if let Ok(chunk) = &mut chunk
                && chunk.usage.is_some()
            {
                // Through the whole guard: the closure must own it, so that it
                // settles when the stream is dropped, not when this returns.
                let guard = &mut settle;
                guard.observe(&metrics, chunk.usage.clone());
                keep = client_wants_usage || !chunk.choices.is_empty();
                if !client_wants_usage {
                    chunk.usage = None;
                }
            }
            std::future::ready(keep.then_some(chunk))
        });
        Ok((stream.boxed(), served_by))
    }

    /// Admits a call against its caller's budgets and limits (a refusal is
    /// [`ProviderError::Refused`]), runs it with retries and fallbacks, and
    /// hands back the answer with the guard that records its usage and
    /// settles the reservation when dropped.
    pub(super) async fn run_metered<'a, T>(
        &self,
        targets: &'a [ModelTarget],
        who: &Attribution,
        body: BodyRef<'_>,
        op: impl Fn(&'a ModelTarget) -> BoxFuture<'a, Result<T, ProviderError>>,
    ) -> Result<(T, ModelRef, Settle), ProviderError> {
        let reservation = match targets.first() {
            Some(first) => self
                .meter
                .admit(who, body, &first.model_ref())
                .await
                .map_err(ProviderError::Refused)?,
            None => None,
        };
        match self.run(targets, op).await {
            Ok((answer, served_by)) => {
                let settle = Settle {
                    meter: self.meter.clone(),
                    who: who.clone(),
                    served_by: served_by.clone(),
                    usage: None,
                    reservation,
                    settled: false,
                };
                Ok((answer, served_by, settle))
            }
            Err(err) => {
                // A failed call used nothing: its reservation is given back.
                if let (Some(first), Some(reservation)) = (targets.first(), reservation) {
                    self.meter
                        .settle(who, &first.model_ref(), None, Some(reservation));
                }
                Err(err)
            }
        }
    }

    pub async fn embeddings(
        &self,
        targets: &[ModelTarget],
        call: &EmbeddingsCall,
    ) -> Result<(Value, ModelRef), ProviderError> {
        self.run(targets, |t| t.provider.embeddings(&t.model, call)).await
    }

    pub(super) async fn run<'a, T>(
        &self,
        targets: &'a [ModelTarget],
        op: impl Fn(&'a ModelTarget) -> BoxFuture<'a, Result<T, ProviderError>>,
    ) -> Result<(T, ModelRef), ProviderError> {
        let mut last_error = None;
        for target in targets {
            let name = target.provider.name();
            let mut permit = match target.breaker.as_deref().map(Breaker::admit) {
                Some(Err(retry_after)) => {
                    self.metrics.record_upstream_error(name, "circuit_open");
                    last_error = Some(ProviderError::CircuitOpen {
                        provider: name.to_string(),
                        retry_after,
                    });
                    continue;
                }
                Some(Ok(permit)) => Some(permit),
                None => None,
            };
            let mut attempt = 0;
            loop {
                let started = Instant::now();
                let result = op(target).await;
                self.metrics
                    .record_upstream(name, started.elapsed().as_secs_f64());
                let err = match result {
                    Ok(value) => {
                        if let Some(permit) = &mut permit {
                            permit.succeeded();
                        }
                        return Ok((value, target.model_ref()));
                    }
                    Err(err) => err,
                };
                self.metrics.record_upstream_error(name, error_reason(&err));
                tracing::warn!(provider = name, model = %target.model, attempt, error = %err, "upstream call failed");
                if permit.as_mut().map(|p| p.failed(&err)) == Some(Tripped::Opened) {
                    self.metrics.record_circuit_opened(name);
                    tracing::warn!(
                        provider = name,
                        "circuit opened: the provider is skipped while it cools down"
                    );
                    last_error = Some(err);
                    break;
                }
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
}

pub(super) fn record_usage(metrics: &Metrics, served_by: &ModelRef, usage: &Usage) {
    metrics.record_usage(
        &served_by.provider,
        &served_by.model,
        usage.prompt_tokens,
        usage.completion_tokens,
    );
    metrics.record_cached(&served_by.provider, &served_by.model, usage.cached_tokens());
}

/// Settles a stream's usage when the stream is dropped: at its end, or when
/// the client went away (then with what was reported so far, if anything).
pub(super) struct Settle {
    meter: Arc<dyn UsageMeter>,
    who: Attribution,
    served_by: ModelRef,
    usage: Option<Usage>,
    reservation: Option<Reservation>,
    settled: bool,
}

impl Settle {
    /// The answer's usage, once known: counted in the metrics now, recorded
    /// and settled when the call ends.
    pub(super) fn observe(&mut self, metrics: &Metrics, usage: Option<Usage>) {
        if let Some(usage) = &usage {
            record_usage(metrics, &self.served_by, usage);
        }
        self.usage = usage.or(self.usage.take());
    }

    /// Records the call now; its cost in USD when the price is known.
    pub(super) fn finish(mut self) -> Option<f64> {
        self.settle()
    }

    fn settle(&mut self) -> Option<f64> {
        if std::mem::replace(&mut self.settled, true) {
            return None;
        }
        self.meter.settle(
            &self.who,
            &self.served_by,
            self.usage.as_ref(),
            self.reservation.take(),
        )
    }
}

impl Drop for Settle {
    fn drop(&mut self) {
        self.settle();
    }
}

/// A bad request fails the same way on every fallback, so it ends the walk.
fn is_callers_fault(err: &ProviderError) -> bool {
    matches!(
        err,
        ProviderError::InvalidRequest(_) | ProviderError::Unsupported(_) | ProviderError::Refused(_)
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
        ProviderError::Refused(_) => "refused",
        ProviderError::CircuitOpen { .. } => "circuit_open",
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

fn known_providers(routes: &Routes) -> String {
    if routes.providers.is_empty() {
        "none (set OPENAI_API_KEY, ANTHROPIC_API_KEY, OLLAMA_HOST, add `providers` to the config or POST /v1/providers)"
            .into()
    } else {
        routes.providers.keys().cloned().collect::<Vec<_>>().join(", ")
    }
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
