//! Usage and cost: a record of every upstream model call (tokens, cost, and
//! who it was for), the price table, budgets and rate limits (reservations in
//! SurrealDB), and the `/v1/usage` report.
//!
//! [`Meter`] is the router's [`UsageMeter`]: for a caller with no budget or
//! limit (no key limits, no agent limits, no global limits) admitting a call
//! costs nothing; for a limited one it is a lookup in this replica's slices
//! of the limits (`slices`), with a database round trip only when a slice
//! runs out. Recording a call is a channel send.

mod budget;
pub mod prices;
mod query;
mod record;
mod slices;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use crate::limits::Limits;
use crate::observability::Metrics;
use crate::providers::meter::estimate;
use crate::providers::{Attribution, BodyRef, ModelRef, Refusal, Reservation, Usage, UsageMeter};
use crate::storage::Db;

pub use budget::{Spent, spent};
pub use prices::{Price, PriceTable};
pub use query::{GroupBy, Report, ReportRow, UsageQuery};

/// Output tokens assumed for a reservation when the request sets no maximum.
const DEFAULT_OUTPUT_ESTIMATE: u64 = 4096;
/// How often expired holds of dead replicas are looked for.
const SWEEP_EVERY: Duration = Duration::from_secs(30);

/// The settings `usage` needs from the config.
#[derive(Debug, Clone, Default)]
pub struct UsageSettings {
    pub prices: BTreeMap<String, Price>,
    /// The gateway-wide cap.
    pub global: Option<Limits>,
    /// Agent id → its limits.
    pub agents: BTreeMap<String, Limits>,
}

pub struct Meter {
    db: Db,
    prices: PriceTable,
    global: Option<Limits>,
    agents: BTreeMap<String, Limits>,
    writer: record::Writer,
    limiter: slices::Limiter,
    metrics: Arc<Metrics>,
}

impl Meter {
    pub fn new(db: Db, settings: UsageSettings, metrics: Arc<Metrics>) -> Arc<Self> {
        Arc::new(Self {
            writer: record::Writer::start(db.clone()),
            limiter: slices::Limiter::new(db.clone()),
            prices: PriceTable::new(&settings.prices),
            global: settings.global.and_then(Limits::non_empty),
            agents: settings
                .agents
                .into_iter()
                .filter(|(_, l)| !l.is_empty())
                .collect(),
            db,
            metrics,
        })
    }

    /// Writes budget use back every second and gives back the holds of
    /// dead replicas, forever (a background loop).
    pub async fn upkeep_loop(self: Arc<Self>) {
        let mut swept_at = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(slices::WRITE_EVERY).await;
            self.limiter.write_back(false).await;
            if swept_at.elapsed() < SWEEP_EVERY {
                continue;
            }
            swept_at = tokio::time::Instant::now();
            match budget::sweep(&self.db).await {
                Ok(0) => {}
                Ok(released) => tracing::info!(released, "gave back budget holds of replicas that stopped"),
                Err(err) => tracing::warn!(error = %err, "could not sweep budget holds"),
            }
        }
    }

    /// Waits until every record so far is stored, and gives back every
    /// budget hold with nothing in flight (shutdown).
    pub async fn flush(&self) {
        self.writer.flush().await;
        self.limiter.write_back(true).await;
    }

    pub fn prices(&self) -> &PriceTable {
        &self.prices
    }

    /// The report `GET /v1/usage` answers.
    pub async fn report(&self, query: &UsageQuery) -> Result<Report, crate::storage::DbError> {
        self.writer.flush().await;
        query::report(&self.db, query).await
    }

    /// The configured agent limits and the global cap, with what each has spent.
    pub async fn limits_overview(
        &self,
        keys: Vec<(String, String, Limits)>,
    ) -> Result<Vec<LimitStatus>, crate::storage::DbError> {
        let mut scopes: Vec<(String, String, Limits)> = keys
            .into_iter()
            .map(|(id, name, l)| (format!("key:{id}"), name, l))
            .collect();
        scopes.extend(
            self.agents
                .iter()
                .map(|(id, l)| (format!("agent:{id}"), id.clone(), *l)),
        );
        scopes.extend(
            self.global
                .map(|l| ("global".to_string(), "global".to_string(), l)),
        );
        // This replica's use so far, so the numbers include it.
        self.limiter.write_back(false).await;
        let mut out = Vec::with_capacity(scopes.len());
        for (scope, name, limits) in scopes {
            let spent = budget::spent(&self.db, &scope).await?;
            out.push(LimitStatus {
                scope,
                name,
                limits,
                spent,
            });
        }
        Ok(out)
    }

    /// The scopes whose limits apply to a call for `who`.
    fn scopes(&self, who: &Attribution) -> Vec<budget::Scope> {
        let mut scopes = Vec::new();
        if let (Some(key), Some(limits)) = (&who.key, who.key_limits) {
            scopes.push(budget::Scope {
                name: format!("key:{key}"),
                limits,
            });
        }
        if let Some(limits) = who.agent.as_ref().and_then(|a| self.agents.get(a)) {
            scopes.push(budget::Scope {
                name: format!("agent:{}", who.agent.as_deref().unwrap_or_default()),
                limits: *limits,
            });
        }
        if let Some(limits) = self.global {
            scopes.push(budget::Scope {
                name: "global".into(),
                limits,
            });
        }
        scopes
    }

    fn is_limited(&self, who: &Attribution) -> bool {
        self.global.is_some()
            || who.key_limits.is_some()
            || (!self.agents.is_empty() && who.agent.as_ref().is_some_and(|a| self.agents.contains_key(a)))
    }
}

/// A limited scope, its limits and its spend in the current windows.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
#[schemars(rename = "UsageLimitStatus")]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "UsageLimitStatus"))]
pub struct LimitStatus {
    /// `key:<id>`, `agent:<id>` or `global`.
    pub scope: String,
    /// The key's name, the agent's id, or `global`.
    pub name: String,
    pub limits: Limits,
    pub spent: Spent,
}

impl UsageMeter for Meter {
    fn admit<'a>(
        &'a self,
        who: &'a Attribution,
        body: BodyRef<'a>,
        target: &'a ModelRef,
    ) -> BoxFuture<'a, Result<Option<Reservation>, Refusal>> {
        if !self.is_limited(who) {
            return Box::pin(std::future::ready(Ok(None)));
        }
        Box::pin(async move {
            let (prompt, output) = estimate(body);
            let output = output.unwrap_or(DEFAULT_OUTPUT_ESTIMATE);
            // An unknown price reserves nothing in USD: such calls count
            // against token and request limits only (see README).
            let usd = self
                .prices
                .price(target)
                .map_or(0.0, |price| price.ceiling(prompt, output));
            self.limiter.admit(&self.scopes(who), usd, prompt + output).await
        })
    }

    fn settle(
        &self,
        who: &Attribution,
        served_by: &ModelRef,
        usage: Option<&Usage>,
        reservation: Option<Reservation>,
    ) -> Option<f64> {
        let cost = usage.and_then(|u| self.prices.price(served_by).map(|p| p.cost(u)));
        if let Some(usage) = usage {
            if let Some(cost) = cost {
                self.metrics
                    .record_cost(&served_by.provider, &served_by.model, cost);
            }
            self.writer.send(record::Record::new(who, served_by, usage, cost));
        }
        if let Some(reservation) = reservation {
            let tokens = usage.map_or(0, |u| u.prompt_tokens + u.completion_tokens);
            self.limiter.settle(&reservation, cost.unwrap_or(0.0), tokens);
        }
        cost
    }
}
