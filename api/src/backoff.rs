//! Doubling waits between retries of background work, up to a cap.

use std::time::Duration;

pub struct Backoff {
    first: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    pub fn new(first: Duration, max: Duration) -> Self {
        Self {
            first,
            max,
            next: first,
        }
    }

    /// How long to wait after a failure; each failure doubles the next wait.
    pub fn failed(&mut self) -> Duration {
        let wait = self.next;
        self.next = (self.next * 2).min(self.max);
        wait
    }

    /// Back to the first wait.
    pub fn succeeded(&mut self) {
        self.next = self.first;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_the_cap_and_reset_on_success() {
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(5));
        let waits: Vec<u64> = (0..5).map(|_| backoff.failed().as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 5, 5]);
        backoff.succeeded();
        assert_eq!(backoff.failed(), Duration::from_secs(1));
    }
}
