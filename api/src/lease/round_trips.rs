//! How slow this replica's lease writes are right now: the adaptive part of
//! the grace a reaper gives a lapsed lease. A holder's renewal lands late by
//! about as long as a write takes on the shared database; when this replica's
//! own renewals take 10 s, the holder's probably do too, so its lease is
//! given that much longer before it is reaped ([`Leases::grace`](super::Leases::grace)).
//!
//! The slowest round trip is kept over a recent window (two buckets of
//! [`RoundTrips::window`], so one slow spell is forgotten once the database
//! is fast again), and a round trip still in flight counts with its age so far:
//! a write stuck for 10 s widens the grace while it is stuck, not only once
//! it lands. Times come from the leases' clock, so tests move a clock.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::clock::SharedClock;

/// The slowest recent lease round trips of one replica's table.
pub struct RoundTrips {
    clock: SharedClock,
    window: Duration,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// When the current bucket started (none yet: the first round trip starts it).
    bucket_start: Option<DateTime<Utc>>,
    slowest_now: Duration,
    slowest_before: Duration,
    next_id: u64,
    in_flight: HashMap<u64, DateTime<Utc>>,
}

impl RoundTrips {
    /// Round trips remembered for between one and two `window`s.
    pub fn new(clock: SharedClock, window: Duration) -> Arc<Self> {
        Arc::new(Self {
            clock,
            window,
            state: Mutex::new(State::default()),
        })
    }

    pub fn window(&self) -> Duration {
        self.window
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts timing one round trip; it counts until the returned guard drops.
    pub fn start(self: &Arc<Self>) -> RoundTrip {
        let mut state = self.state();
        let id = state.next_id;
        state.next_id += 1;
        state.in_flight.insert(id, self.clock.now());
        RoundTrip {
            trips: self.clone(),
            id,
        }
    }

    /// Records a round trip that took `took` (ending now).
    pub fn record(&self, took: Duration) {
        let now = self.clock.now();
        let mut state = self.state();
        Self::rotate(&mut state, now, self.window);
        state.slowest_now = state.slowest_now.max(took);
    }

    /// The slowest round trip of the last window or two, or the age of the
    /// oldest one still in flight, whichever is longer.
    pub fn slowest(&self) -> Duration {
        let now = self.clock.now();
        let mut state = self.state();
        Self::rotate(&mut state, now, self.window);
        let oldest_in_flight = state
            .in_flight
            .values()
            .map(|started| elapsed(*started, now))
            .max()
            .unwrap_or_default();
        state.slowest_now.max(state.slowest_before).max(oldest_in_flight)
    }

    /// Moves to a new bucket once the current one is a window old (and
    /// forgets both when a whole window passed with no round trip).
    fn rotate(state: &mut State, now: DateTime<Utc>, window: Duration) {
        let Some(start) = state.bucket_start else {
            state.bucket_start = Some(now);
            return;
        };
        let age = elapsed(start, now);
        if age < window {
            return;
        }
        state.slowest_before = if age < window * 2 {
            state.slowest_now
        } else {
            Duration::ZERO
        };
        state.slowest_now = Duration::ZERO;
        state.bucket_start = Some(now);
    }

    fn finish(&self, id: u64) {
        let now = self.clock.now();
        let started = self.state().in_flight.remove(&id);
        if let Some(started) = started {
            self.record(elapsed(started, now));
        }
    }
}

/// One round trip being timed; dropping it (answered, failed or cancelled)
/// records how long it took.
pub struct RoundTrip {
    trips: Arc<RoundTrips>,
    id: u64,
}

impl Drop for RoundTrip {
    fn drop(&mut self) {
        self.trips.finish(self.id);
    }
}

/// `now - since`, zero if the clock went back.
fn elapsed(since: DateTime<Utc>, now: DateTime<Utc>) -> Duration {
    (now - since).to_std().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{ManualClock, parse_stamp};

    #[test]
    fn the_slowest_recent_round_trip_counts_until_it_is_two_windows_old() {
        let clock = ManualClock::at(parse_stamp("2026-11-27T09:00:00Z").unwrap());
        let trips = RoundTrips::new(clock.clone(), Duration::from_secs(10));
        assert_eq!(trips.slowest(), Duration::ZERO, "nothing measured yet");
        trips.record(Duration::from_millis(40));
        trips.record(Duration::from_secs(7));
        trips.record(Duration::from_millis(90));
        assert_eq!(trips.slowest(), Duration::from_secs(7));
        // Into the next window: still remembered.
        clock.advance(Duration::from_secs(12));
        trips.record(Duration::from_millis(50));
        assert_eq!(trips.slowest(), Duration::from_secs(7));
        // Two windows on, only fast ones since: forgotten.
        clock.advance(Duration::from_secs(11));
        trips.record(Duration::from_millis(50));
        assert_eq!(trips.slowest(), Duration::from_millis(50));
        // A silence longer than two windows forgets everything.
        trips.record(Duration::from_secs(3));
        clock.advance(Duration::from_secs(30));
        assert_eq!(trips.slowest(), Duration::ZERO);
    }

    #[test]
    fn a_round_trip_in_flight_counts_with_its_age_and_is_recorded_when_it_ends() {
        let clock = ManualClock::at(parse_stamp("2026-11-27T09:00:00Z").unwrap());
        let trips = RoundTrips::new(clock.clone(), Duration::from_secs(60));
        let stuck = trips.start();
        clock.advance(Duration::from_secs(4));
        assert_eq!(trips.slowest(), Duration::from_secs(4), "stuck for 4 s so far");
        let quick = trips.start();
        clock.advance(Duration::from_secs(1));
        drop(quick);
        assert_eq!(
            trips.slowest(),
            Duration::from_secs(5),
            "the stuck one is the oldest"
        );
        clock.advance(Duration::from_secs(5));
        drop(stuck);
        clock.advance(Duration::from_secs(20));
        assert_eq!(
            trips.slowest(),
            Duration::from_secs(10),
            "landed after 10 s, remembered"
        );
    }
}
