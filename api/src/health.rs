//! The state of every dependency, for `/health` and `onyx doctor`: each
//! provider is asked for its models (a reachable upstream that refuses the
//! question still counts as up). Results are cached briefly so a load
//! balancer polling `/health` does not turn into upstream traffic.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use serde::Serialize;
use tokio::sync::Mutex;

use crate::knowledge::Menos;
use crate::memory::{Availability, Memory};
use crate::providers::{ProviderError, Router};
use crate::storage::{Db, ObjectStore};

const PROBE_TIMEOUT: Duration = Duration::from_secs(3);
const CACHE_FOR: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "DependencyState")]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "DependencyState"))]
#[serde(rename_all = "lowercase")]
pub enum State {
    Up,
    Down,
    /// Not configured, and Onyx works without it (reported, not degraded).
    Disabled,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct DependencyHealth {
    pub name: String,
    pub kind: String,
    pub status: State,
    pub latency_ms: u64,
    pub detail: Option<String>,
}

#[derive(Default)]
pub struct HealthCache {
    last: Mutex<Option<(Instant, Vec<DependencyHealth>)>>,
    /// menos, when `knowledge.menos` is configured.
    menos: Option<Arc<Menos>>,
}

impl HealthCache {
    pub fn new(menos: Option<Arc<Menos>>) -> Self {
        Self {
            last: Mutex::default(),
            menos,
        }
    }

    pub async fn dependencies(
        &self,
        router: &Router,
        stores: Stores<'_>,
        memory: &Memory,
    ) -> Vec<DependencyHealth> {
        let mut last = self.last.lock().await;
        if let Some((at, deps)) = last.as_ref()
            && at.elapsed() < CACHE_FOR
        {
            let mut deps = deps.clone();
            deps.push(embedder_health(memory, None).await);
            deps.push(search_index_health(memory));
            deps.extend(self.menos_health().await);
            return deps;
        }
        let (mut deps, providers) = futures::join!(probe_stores(stores), probe_providers(router));
        deps.extend(providers);
        *last = Some((Instant::now(), deps.clone()));
        // Not cached: the state is kept current by every embedding call and the
        // memory worker's liveness probe, and costs nothing to read.
        deps.push(embedder_health(memory, None).await);
        deps.push(search_index_health(memory));
        deps.extend(self.menos_health().await);
        deps
    }

    /// menos (its probe keeps its own few seconds' cache): whether it answers
    /// and accepts Onyx's signature, without its address or its own words.
    async fn menos_health(&self) -> Option<DependencyHealth> {
        let probe = self.menos.as_ref()?.probe().await;
        Some(DependencyHealth {
            name: "menos".into(),
            kind: "knowledge:menos".into(),
            status: if probe.up { State::Up } else { State::Down },
            latency_ms: probe.latency_ms,
            detail: Some(probe.summary),
        })
    }
}

/// This replica's resident memory search index: how full its budget is
/// (down when over it: the replica holds more than it was given), and what
/// the memory goes to.
pub fn search_index_health(memory: &Memory) -> DependencyHealth {
    let info = memory.search_index();
    let mb = |bytes: usize| bytes as f64 / 1_048_576.0;
    let budget = info.budget_bytes as f64 / 1_048_576.0;
    let (status, detail) = match (info.chunks, info.bytes) {
        (Some(chunks), Some(bytes)) => {
            let full = 100.0 * mb(bytes.total()) / budget.max(f64::MIN_POSITIVE);
            let state = if full > 100.0 { State::Down } else { State::Up };
            (
                state,
                format!(
                    "{chunks} chunks, {:.1} MB of its {budget:.0} MB budget ({full:.1}% full): \
                     vectors {:.1} MB, postings {:.1} MB, text {:.1} MB, metadata {:.1} MB",
                    mb(bytes.total()),
                    mb(bytes.vectors),
                    mb(bytes.postings),
                    mb(bytes.text),
                    mb(bytes.metadata),
                ),
            )
        }
        _ => (State::Up, format!("loading; its budget is {budget:.0} MB")),
    };
    DependencyHealth {
        name: "search-index".into(),
        kind: "memory:resident".into(),
        status,
        latency_ms: 0,
        detail: Some(detail),
    }
}

/// The stores to probe, and how many session turns wait for the object store.
#[derive(Clone, Copy)]
pub struct Stores<'a> {
    pub db: &'a Db,
    pub objects: &'a dyn ObjectStore,
    pub parked_sessions: usize,
}

async fn timed<T, E: std::fmt::Display>(
    name: &str,
    kind: &str,
    probe: impl Future<Output = Result<T, E>>,
    detail: impl FnOnce(T) -> String,
) -> DependencyHealth {
    let started = Instant::now();
    let result = tokio::time::timeout(PROBE_TIMEOUT, probe).await;
    let latency_ms = started.elapsed().as_millis() as u64;
    let (status, detail) = match result {
        Ok(Ok(value)) => (State::Up, detail(value)),
        Ok(Err(err)) => (State::Down, err.to_string()),
        Err(_) => (State::Down, format!("no answer within {PROBE_TIMEOUT:?}")),
    };
    DependencyHealth {
        name: name.into(),
        kind: kind.into(),
        status,
        latency_ms,
        detail: Some(detail),
    }
}

/// The database and the object store (whose buckets are created if missing).
pub async fn probe_stores(stores: Stores<'_>) -> Vec<DependencyHealth> {
    let database = timed("database", "surrealdb", stores.db.health(), |()| {
        stores.db.url.clone()
    });
    let objects_kind = format!("objects:{}", stores.objects.backend());
    let objects = timed(
        "objects",
        &objects_kind,
        stores.objects.ensure_buckets(),
        |()| match stores.parked_sessions {
            0 => "buckets ready".to_string(),
            n => format!("buckets ready; turns of {n} session(s) waiting to be written"),
        },
    );
    let (database, mut objects) = futures::join!(database, objects);
    if stores.parked_sessions > 0 && objects.status == State::Up {
        // Up again, but the backlog has not drained yet.
        objects.detail = objects.detail.map(|d| format!("{d} (retrying)"));
    }
    vec![database, objects]
}

/// Asks every provider at once; never takes longer than the probe timeout.
pub async fn probe_providers(router: &Router) -> Vec<DependencyHealth> {
    join_all(router.providers().iter().map(|p| probe_provider(p.as_ref()))).await
}

/// Asks one provider for its models (the UI's "test connection" too).
pub async fn probe_provider(provider: &dyn crate::providers::Provider) -> DependencyHealth {
    let started = Instant::now();
    let result = tokio::time::timeout(PROBE_TIMEOUT, provider.list_models()).await;
    let latency_ms = started.elapsed().as_millis() as u64;
    let (status, detail) = match result {
        Ok(Ok(models)) => (State::Up, Some(format!("{} models", models.len()))),
        Ok(Err(ProviderError::Upstream { status, message, .. })) if status < 500 => (
            State::Up,
            Some(format!("reachable; model list refused ({status}: {message})")),
        ),
        Ok(Err(err)) => (State::Down, Some(err.to_string())),
        Err(_) => (State::Down, Some(format!("no answer within {PROBE_TIMEOUT:?}"))),
    };
    DependencyHealth {
        name: provider.name().to_string(),
        kind: format!("provider:{}", provider.kind().as_str()),
        status,
        latency_ms,
        detail,
    }
}

fn built_in_missing(model: &str, error: &str) -> String {
    format!(
        "the built-in {model} is not available yet ({error}); memory search is full-text (BM25) only \
         until it is downloaded (once, into the data dir) or another embedder is configured"
    )
}

/// The memory embedder: up (with its dimensions and the pending queue), down,
/// or disabled when none is configured (search is then full-text only).
/// With `probe`, asks the embedder now (for `onyx doctor`); without, reports
/// what the last call to it found.
pub async fn embedder_health(memory: &Memory, probe: Option<Duration>) -> DependencyHealth {
    let started = Instant::now();
    let probed = match probe {
        Some(within) => memory.probe_embedder(within).await,
        None => None,
    };
    let latency_ms = started.elapsed().as_millis() as u64;
    let info = memory.embedder_info();
    let pending = memory.pending_count().await;
    let waiting = match pending {
        0 => String::new(),
        n => format!("; {n} chunk(s) waiting to be embedded"),
    };
    let model = info.model.clone().unwrap_or_default();
    let dimensions = info.state.dimensions.unwrap_or(0);
    let automatic = memory.embedder_is_automatic();
    let (status, detail) = match (info.state.state, probed) {
        (Availability::None, _) => (
            State::Disabled,
            "none configured: memory search is full-text (BM25) only".to_string(),
        ),
        // The built-in default that cannot run yet (its model not downloaded,
        // or no network): full-text search is what a fresh install offers
        // until it can, not a fault.
        (_, Some(Err(err))) if automatic => (State::Disabled, built_in_missing(&model, &err.to_string())),
        (Availability::Down, None) if automatic => (
            State::Disabled,
            built_in_missing(&model, info.state.error.as_deref().unwrap_or("no answer")),
        ),
        (_, Some(Ok(dimensions))) => (State::Up, format!("{model}, {dimensions} dimensions{waiting}")),
        (_, Some(Err(err))) => (
            State::Down,
            format!("{model}: {err}; memory search falls back to full text{waiting}"),
        ),
        (Availability::Up, None) => (State::Up, format!("{model}, {dimensions} dimensions{waiting}")),
        (Availability::Unknown, None) => (State::Up, format!("{model}: not asked yet{waiting}")),
        (Availability::Down, None) => (
            State::Down,
            format!(
                "{model}: {}; memory search falls back to full text{waiting}",
                info.state.error.as_deref().unwrap_or("no answer")
            ),
        ),
    };
    DependencyHealth {
        name: "embedder".into(),
        kind: format!("embedder:{}", info.kind.unwrap_or("none")),
        status,
        latency_ms,
        detail: Some(detail),
    }
}
