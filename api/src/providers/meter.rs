//! What the router tells the usage meter about every upstream model call:
//! who it is for (`Attribution`), a budget/limit check before it goes out
//! (`UsageMeter::admit`, which may refuse it) and the tokens it used after
//! (`UsageMeter::settle`). The meter itself lives in `usage`, which imports
//! `providers`; this trait keeps the dependency one way.

use std::sync::Arc;

use futures::future::BoxFuture;

use super::{BodyRef, ModelRef, Usage};
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
    /// The counter windows it holds an estimate in.
    pub windows: Vec<String>,
    /// The estimate held: USD and tokens.
    pub usd: f64,
    pub tokens: u64,
}

pub trait UsageMeter: Send + Sync {
    /// Checks and reserves against the budgets and limits of `who`,
    /// estimating the cost of the request `body` (any protocol's: see
    /// [`estimate`]) at `target`'s price. `Ok(None)` when none apply (then it
    /// must not touch the database).
    fn admit<'a>(
        &'a self,
        who: &'a Attribution,
        body: BodyRef<'a>,
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
        _: &'a Attribution,
        _: BodyRef<'a>,
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

/// A request's size before it goes out, for budget reservations, from its
/// body in any protocol: about four bytes of JSON per prompt token (messages,
/// system prompt and tools alike), and the output limit it asks for.
pub fn estimate(body: BodyRef<'_>) -> (u64, Option<u64>) {
    let bytes = match body {
        BodyRef::Raw(raw) => raw.json_len(),
        BodyRef::Tree(map) => {
            let mut bytes = ByteCount(0);
            // Counted as it is written: the body's JSON is never held in memory.
            let _ = serde_json::to_writer(&mut bytes, map);
            bytes.0
        }
    };
    let output = body.first_u64(&["max_completion_tokens", "max_tokens", "max_output_tokens"]);
    ((bytes as u64).div_ceil(4), output)
}

/// A writer that only counts what is written to it.
struct ByteCount(usize);

impl std::io::Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn estimates_any_protocols_body() {
        let Value::Object(chat) =
            serde_json::json!({"messages": [{"role": "user", "content": "hello there"}], "max_tokens": 7})
        else {
            unreachable!()
        };
        let (prompt, output) = estimate((&chat).into());
        assert!((10..=30).contains(&prompt), "{prompt}");
        let written = serde_json::to_vec(&chat).unwrap().len() as u64;
        assert_eq!(prompt, written.div_ceil(4), "the count is the JSON's length");
        assert_eq!(output, Some(7));
        let Value::Object(responses) = serde_json::json!({"input": "hi", "max_output_tokens": 3}) else {
            unreachable!()
        };
        assert_eq!(estimate((&responses).into()).1, Some(3));
        let raw =
            super::super::RawObject::read(bytes::Bytes::from(serde_json::to_vec(&chat).unwrap())).unwrap();
        assert_eq!(
            estimate(BodyRef::Raw(&raw)),
            (prompt, Some(7)),
            "as it came, the same"
        );
    }
}
