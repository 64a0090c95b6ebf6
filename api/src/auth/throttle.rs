//! Failed-login throttling: five failures per minute from one address, then
//! 429 until the oldest failure is a minute old. Per replica, in memory.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const WINDOW: Duration = Duration::from_secs(60);
const MAX_FAILURES: usize = 5;

#[derive(Default)]
pub struct LoginThrottle {
    failures: Mutex<HashMap<IpAddr, VecDeque<Instant>>>,
}

impl LoginThrottle {
    /// `Some(wait)` when this address must wait before trying again.
    pub fn blocked(&self, ip: IpAddr) -> Option<Duration> {
        let mut failures = self.failures.lock().ok()?;
        let recent = failures.get_mut(&ip)?;
        while recent.front().is_some_and(|at| at.elapsed() >= WINDOW) {
            recent.pop_front();
        }
        (recent.len() >= MAX_FAILURES)
            .then(|| WINDOW.saturating_sub(recent.front().map_or(WINDOW, |at| at.elapsed())))
    }

    pub fn failed(&self, ip: IpAddr) {
        if let Ok(mut failures) = self.failures.lock() {
            failures.entry(ip).or_default().push_back(Instant::now());
            // Forget addresses that have been quiet for a while.
            if failures.len() > 10_000 {
                failures.retain(|_, f| f.back().is_some_and(|at| at.elapsed() < WINDOW));
            }
        }
    }

    pub fn succeeded(&self, ip: IpAddr) {
        if let Ok(mut failures) = self.failures.lock() {
            failures.remove(&ip);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_failures_block_the_address_and_only_that_one() {
        let throttle = LoginThrottle::default();
        let (a, b): (IpAddr, IpAddr) = ([10, 0, 0, 1].into(), [10, 0, 0, 2].into());
        for _ in 0..4 {
            throttle.failed(a);
        }
        assert!(throttle.blocked(a).is_none());
        throttle.failed(a);
        assert!(throttle.blocked(a).is_some_and(|wait| wait <= WINDOW));
        assert!(throttle.blocked(b).is_none());
        throttle.succeeded(a);
        assert!(throttle.blocked(a).is_none());
    }
}
