//! Polling instead of sleeping: `wait_until` asks again every 50 ms until the
//! check gives a value, and panics naming what never happened.

use std::time::Duration;

use tokio::time::Instant;

const INTERVAL: Duration = Duration::from_millis(50);

/// Polls `check` until it returns `Some`, for at most `timeout`; `None` when
/// time ran out (for callers that add their own diagnostics).
pub async fn poll_until<T>(timeout: Duration, mut check: impl AsyncFnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return Some(value);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(INTERVAL).await;
    }
}

/// Polls `check` until it returns `Some` and returns that value; panics with
/// `what` after `timeout`. For a plain condition, return `cond.then_some(())`.
pub async fn wait_until<T>(timeout: Duration, what: &str, check: impl AsyncFnMut() -> Option<T>) -> T {
    match poll_until(timeout, check).await {
        Some(value) => value,
        None => panic!("timed out after {timeout:?} waiting until {what}"),
    }
}

/// `n` seconds, for timeouts.
pub const fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}
