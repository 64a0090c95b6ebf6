//! Circuit breakers, one per provider and replica (in memory): after
//! `failures` consecutive transient failures (connect errors, timeouts, 5xx,
//! 429) a provider's circuit opens and the router skips it at once for a
//! cooling period; then one probe call is let through (half-open): success
//! closes the circuit, failure opens it again for twice as long, up to a cap.
//! Time comes from an injected [`Ticks`] so the state machine is testable.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::ProviderError;
use crate::config::CircuitBreakerConfig;

/// How long a caller turned away during a half-open probe is told to wait.
const PROBE_WAIT: Duration = Duration::from_secs(1);

/// A monotonic clock.
pub trait Ticks: Send + Sync {
    fn now(&self) -> Instant;
}

/// The process's monotonic clock.
pub struct SystemTicks;

impl Ticks for SystemTicks {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// The state of a circuit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "CircuitState")]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "CircuitState"))]
#[serde(rename_all = "snake_case")]
pub enum CircuitState {
    Closed,
    Open,
    HalfOpen,
}

impl CircuitState {
    /// The `onyx_circuit_state` gauge's value.
    pub fn gauge(self) -> i64 {
        match self {
            Self::Closed => 0,
            Self::HalfOpen => 1,
            Self::Open => 2,
        }
    }
}

/// A circuit as `/health` and `/v1/providers` show it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct CircuitView {
    pub provider: String,
    pub state: CircuitState,
    pub consecutive_failures: u32,
    /// When it last opened (RFC 3339), while it is not closed.
    pub opened_at: Option<String>,
    /// When the next probe may go (RFC 3339), while it is open.
    pub next_probe_at: Option<String>,
    /// How many times it has opened since this replica started.
    pub openings: u64,
}

#[derive(Debug, Clone, Copy)]
enum Phase {
    Closed,
    Open { until: Instant },
    HalfOpen { probing: bool },
}

struct Inner {
    phase: Phase,
    failures: u32,
    /// The cooling period of the next opening from half-open.
    cool: Duration,
    opened_at: Option<chrono::DateTime<chrono::Utc>>,
    openings: u64,
}

pub struct Breaker {
    settings: CircuitBreakerConfig,
    ticks: Arc<dyn Ticks>,
    inner: Mutex<Inner>,
}

/// What a failed call did to the circuit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tripped {
    No,
    /// This failure opened the circuit.
    Opened,
}

impl Breaker {
    pub fn new(settings: CircuitBreakerConfig) -> Self {
        Self::with_ticks(settings, Arc::new(SystemTicks))
    }

    pub fn with_ticks(settings: CircuitBreakerConfig, ticks: Arc<dyn Ticks>) -> Self {
        Self {
            inner: Mutex::new(Inner {
                phase: Phase::Closed,
                failures: 0,
                cool: settings.cool,
                opened_at: None,
                openings: 0,
            }),
            settings,
            ticks,
        }
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        crate::locks::lock(&self.inner)
    }

    /// Lets a call through (the probe, when half-open), or says how long
    /// until the next probe may go.
    pub fn admit(&self) -> Result<Permit<'_>, Duration> {
        let now = self.ticks.now();
        let mut inner = self.inner();
        let probe = match inner.phase {
            Phase::Closed => false,
            Phase::Open { until } if now < until => return Err(until - now),
            Phase::HalfOpen { probing: true } => return Err(PROBE_WAIT),
            Phase::Open { .. } | Phase::HalfOpen { probing: false } => {
                inner.phase = Phase::HalfOpen { probing: true };
                true
            }
        };
        Ok(Permit {
            breaker: self,
            probe,
            settled: false,
        })
    }

    fn succeeded(&self) {
        let mut inner = self.inner();
        inner.phase = Phase::Closed;
        inner.failures = 0;
        inner.cool = self.settings.cool;
        inner.opened_at = None;
    }

    fn failed(&self, probe: bool) -> Tripped {
        let now = self.ticks.now();
        let mut inner = self.inner();
        inner.failures = inner.failures.saturating_add(1);
        let cool = match inner.phase {
            Phase::Closed if inner.failures >= self.settings.failures => self.settings.cool,
            Phase::HalfOpen { .. } if probe => {
                let cool = inner.cool.saturating_mul(2).min(self.settings.max_cool);
                inner.cool = cool;
                cool
            }
            // Below the threshold, or a call let in before it opened.
            _ => return Tripped::No,
        };
        inner.phase = Phase::Open { until: now + cool };
        inner.opened_at = Some(crate::clock::now());
        inner.openings += 1;
        Tripped::Opened
    }

    fn release_probe(&self) {
        let mut inner = self.inner();
        if let Phase::HalfOpen { probing: true } = inner.phase {
            inner.phase = Phase::HalfOpen { probing: false };
        }
    }

    pub fn state(&self) -> CircuitState {
        let now = self.ticks.now();
        match self.inner().phase {
            Phase::Closed => CircuitState::Closed,
            Phase::Open { until } if now < until => CircuitState::Open,
            Phase::Open { .. } | Phase::HalfOpen { .. } => CircuitState::HalfOpen,
        }
    }

    pub fn view(&self, provider: &str) -> CircuitView {
        let state = self.state();
        let now = self.ticks.now();
        let inner = self.inner();
        let next_probe_at = match inner.phase {
            Phase::Open { until } if until > now => {
                let wait = chrono::Duration::from_std(until - now).unwrap_or_default();
                Some(crate::clock::stamp(crate::clock::now() + wait))
            }
            _ => None,
        };
        CircuitView {
            provider: provider.to_string(),
            state,
            consecutive_failures: inner.failures,
            opened_at: inner.opened_at.map(crate::clock::stamp),
            next_probe_at,
            openings: inner.openings,
        }
    }
}

/// One call let through a breaker; its outcome goes back to the breaker.
/// Dropped without an outcome (the caller went away, or the call never
/// reached the upstream), a probe frees the half-open slot for the next caller.
pub struct Permit<'a> {
    breaker: &'a Breaker,
    probe: bool,
    settled: bool,
}

impl Permit<'_> {
    pub fn succeeded(&mut self) {
        self.settled = true;
        self.breaker.succeeded();
    }

    /// Counts a failed attempt: transient failures count against the
    /// provider; an answer that blames the request shows it is up.
    pub fn failed(&mut self, err: &ProviderError) -> Tripped {
        if err.is_retryable() {
            let tripped = self.breaker.failed(self.probe);
            self.settled = self.settled || self.probe || tripped == Tripped::Opened;
            tripped
        } else {
            if matches!(err, ProviderError::Upstream { .. }) {
                self.succeeded();
            }
            Tripped::No
        }
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if self.probe && !self.settled {
            self.breaker.release_probe();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct FakeTicks(Mutex<Instant>);

    impl FakeTicks {
        fn advance(&self, by: Duration) {
            *self.0.lock().unwrap() += by;
        }
    }

    impl Ticks for FakeTicks {
        fn now(&self) -> Instant {
            *self.0.lock().unwrap()
        }
    }

    fn breaker() -> (Breaker, Arc<FakeTicks>) {
        let ticks = Arc::new(FakeTicks(Mutex::new(Instant::now())));
        let settings = CircuitBreakerConfig {
            failures: 3,
            cool: Duration::from_secs(30),
            max_cool: Duration::from_secs(100),
        };
        (Breaker::with_ticks(settings, ticks.clone()), ticks)
    }

    fn transient() -> ProviderError {
        ProviderError::Upstream {
            provider: "p".into(),
            status: 503,
            message: "down".into(),
            kind: None,
            code: None,
            param: None,
        }
    }

    fn fail(breaker: &Breaker) -> Tripped {
        breaker.admit().expect("admitted").failed(&transient())
    }

    #[test]
    fn opens_after_consecutive_failures_and_probes_after_cooling() {
        let (breaker, ticks) = breaker();
        assert_eq!(fail(&breaker), Tripped::No);
        assert_eq!(fail(&breaker), Tripped::No);
        // A success in between starts the count again.
        breaker.admit().unwrap().succeeded();
        assert_eq!(fail(&breaker), Tripped::No);
        assert_eq!(fail(&breaker), Tripped::No);
        assert_eq!(fail(&breaker), Tripped::Opened);
        assert_eq!(breaker.state(), CircuitState::Open);
        let view = breaker.view("p");
        assert_eq!((view.consecutive_failures, view.openings), (3, 1));
        assert!(view.opened_at.is_some() && view.next_probe_at.is_some());

        ticks.advance(Duration::from_secs(10));
        assert_eq!(breaker.admit().err(), Some(Duration::from_secs(20)));
        ticks.advance(Duration::from_secs(20));
        assert_eq!(breaker.state(), CircuitState::HalfOpen);
        let mut probe = breaker.admit().expect("the probe");
        // Only one probe at a time.
        assert_eq!(breaker.admit().err(), Some(PROBE_WAIT));
        probe.succeeded();
        drop(probe);
        assert_eq!(breaker.state(), CircuitState::Closed);
        assert_eq!(breaker.view("p").consecutive_failures, 0);
        assert!(breaker.admit().is_ok());
    }

    #[test]
    fn a_failed_probe_reopens_for_longer_up_to_the_cap() {
        let (breaker, ticks) = breaker();
        for _ in 0..3 {
            fail(&breaker);
        }
        for expected in [60, 100, 100] {
            ticks.advance(Duration::from_secs(200));
            assert_eq!(fail(&breaker), Tripped::Opened);
            assert_eq!(breaker.admit().err(), Some(Duration::from_secs(expected)));
        }
        assert_eq!(breaker.view("p").openings, 4);
        // Healed: the cooling period starts over from the configured one.
        ticks.advance(Duration::from_secs(200));
        breaker.admit().unwrap().succeeded();
        for _ in 0..3 {
            fail(&breaker);
        }
        assert_eq!(breaker.admit().err(), Some(Duration::from_secs(30)));
    }

    #[test]
    fn an_abandoned_probe_lets_the_next_caller_probe() {
        let (breaker, ticks) = breaker();
        for _ in 0..3 {
            fail(&breaker);
        }
        ticks.advance(Duration::from_secs(30));
        drop(breaker.admit().expect("the probe"));
        assert_eq!(breaker.state(), CircuitState::HalfOpen);
        assert!(breaker.admit().is_ok());
    }

    #[test]
    fn errors_that_blame_the_request_do_not_count() {
        let (breaker, _) = breaker();
        fail(&breaker);
        fail(&breaker);
        let bad_request = ProviderError::Upstream {
            provider: "p".into(),
            status: 400,
            message: "bad".into(),
            kind: None,
            code: None,
            param: None,
        };
        assert_eq!(breaker.admit().unwrap().failed(&bad_request), Tripped::No);
        assert_eq!(breaker.view("p").consecutive_failures, 0);
        let refused = ProviderError::InvalidRequest("tools: no".into());
        fail(&breaker);
        breaker.admit().unwrap().failed(&refused);
        assert_eq!(breaker.view("p").consecutive_failures, 1);
        assert_eq!(breaker.state(), CircuitState::Closed);
    }
}
