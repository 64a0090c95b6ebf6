//! What the router tells the usage meter about every upstream model call:
//! who it is for (`Attribution`), a budget/limit check before it goes out
//! (`UsageMeter::admit`, which may refuse it) and the tokens it used after
//! (`UsageMeter::settle`). The meter itself lives in `usage`, which imports
//! `providers`; this trait keeps the dependency one way.

use std::sync::Arc;

use futures::future::BoxFuture;

use super::{ChatCall, ModelRef, Usage};
use crate::limits::Limits;

/// Who an upstream call is made for; travels on every `ChatCall`.
#[derive(Debug, Clone, Default)]
pub struct Attribution {
    /// The API key's id (never the secret): a stored key's UUID, or
    /// `config:<digest prefix>` for a key from the config or environment.
    pub key: Option<Arc<str>>,
    /// The key's own budgets and limits, if it has any.
    pub key_limits: Option<Limits>,
    pub agent: Option<String>,
    /// The scheduled task that started the run.
    pub task: Option<String>,
    pub session: Option<String>,
    pub run: Option<String>,
}

/// Why a call was refused before it went out (answered as 429).
#[derive(Debug, Clone)]
pub struct Refusal {
    /// `budget_exceeded` or `rate_limit_exceeded`.
    pub code: &'static str,
    /// Names the limit: "key budget dailyUsd (1.00 USD) reached", …
    pub message: String,
    /// Seconds until the limit's window resets.
    pub retry_after: u64,
}

/// A reservation made by `admit`, handed back to `settle`.
#[derive(Debug, Clone)]
pub struct Reservation {
    pub id: String,
    /// The counter windows it holds an estimate in.
    pub windows: Vec<String>,
    /// The estimate held: USD and tokens.
    pub usd: f64,
    pub tokens: u64,
}

pub trait UsageMeter: Send + Sync {
    /// Checks and reserves against the budgets and limits of the call's
    /// caller (`call.who`), estimating its cost at `target`'s price. `Ok(None)`
    /// when none apply (then it must not touch the database).
    fn admit<'a>(
        &'a self,
        call: &'a ChatCall,
        target: &'a ModelRef,
    ) -> BoxFuture<'a, Result<Option<Reservation>, Refusal>>;

    /// Records a finished (or failed: `usage` is `None`) call and settles its
    /// reservation; returns the cost in USD when the price is known. Must not block.
    fn settle(
        &self,
        who: &Attribution,
        served_by: &ModelRef,
        usage: Option<&Usage>,
        reservation: Option<Reservation>,
    ) -> Option<f64>;
}

/// Records nothing and limits nothing (unit tests, tools that build a router alone).
pub struct NoMeter;

impl UsageMeter for NoMeter {
    fn admit<'a>(
        &'a self,
        _: &'a ChatCall,
        _: &'a ModelRef,
    ) -> BoxFuture<'a, Result<Option<Reservation>, Refusal>> {
        Box::pin(std::future::ready(Ok(None)))
    }

    fn settle(
        &self,
        _: &Attribution,
        _: &ModelRef,
        _: Option<&Usage>,
        _: Option<Reservation>,
    ) -> Option<f64> {
        None
    }
}
