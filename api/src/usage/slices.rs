//! Budgets spent in memory. Each replica holds a slice of every limited
//! window it uses, taken from SurrealDB with [`budget::grow`] (what the call
//! needs plus a fiftieth of the limit), and admits calls against it without
//! a database round trip. Real use is written back every second
//! ([`budget::write_back`]); a slice idle for a few seconds is given back so
//! other replicas can take it.
//!
//! Every admitted call is covered by a hold in the database, so replicas
//! together cannot spend more than a limit allows. The price: what one
//! replica holds and does not use can make another refuse a little early
//! (at most a fiftieth of the limit per replica, for a few seconds).

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;

use super::budget::{self, Amount, GrowError, Scope, Window, Writeback};
use crate::providers::{Refusal, Reservation};
use crate::storage::Db;

/// How often real use is written back.
pub const WRITE_EVERY: Duration = Duration::from_secs(1);
/// A slice with no call in flight and none for this long is given back.
const IDLE: Duration = Duration::from_secs(3);
/// A slice in use is written (its lease renewed) at least this often.
const RENEW_EVERY: Duration = Duration::from_secs(60);
/// Rounds of taking more before a call that keeps losing its room to
/// others is refused.
const ADMIT_ROUNDS: usize = 8;

pub struct Limiter {
    db: Db,
    /// This process: names its leases.
    replica: String,
    /// By window id; FxHash: SipHash was ~1,300 instructions per call and
    /// the ids are ours (scope names and dates), not a client's.
    slices: Mutex<FxHashMap<String, Slice>>,
    /// Writes that failed, tried again with the next.
    unwritten: Mutex<Vec<Writeback>>,
    /// One trip to the database at a time: callers that queue behind it
    /// usually find the room it took.
    growing: tokio::sync::Mutex<()>,
}

struct Slice {
    window: Window,
    /// What this replica holds in the database.
    held: Amount,
    /// Estimates of the calls admitted and not yet settled.
    inflight: Amount,
    /// Real use of settled calls, not yet written back.
    spent: Amount,
    used_at: Instant,
    renewed_at: Instant,
    /// Little of the limit is left: hold only what calls in flight need.
    tight: bool,
}

impl Slice {
    fn new(window: Window) -> Self {
        let now = Instant::now();
        Self {
            window,
            held: Amount::default(),
            inflight: Amount::default(),
            spent: Amount::default(),
            used_at: now,
            renewed_at: now,
            tight: false,
        }
    }

    /// What it holds beyond what its calls committed, minus what it may
    /// keep spare: given back at the next write.
    fn excess(&self) -> Amount {
        let mut keep = self.inflight;
        keep.add(self.spent);
        if !self.tight {
            keep.add(self.window.limited(self.window.headroom()));
        }
        self.window.limited(self.held.minus(keep))
    }

    /// How much more than it holds this slice needs to admit `need`.
    fn shortfall(&self, need: Amount) -> Amount {
        let mut committed = self.inflight;
        committed.add(self.spent);
        committed.add(need);
        self.window.limited(committed).minus(self.held)
    }
}

impl Limiter {
    pub fn new(db: Db) -> Self {
        Self {
            db,
            replica: uuid::Uuid::new_v4().simple().to_string(),
            slices: Mutex::new(FxHashMap::default()),
            unwritten: Mutex::new(Vec::new()),
            growing: tokio::sync::Mutex::new(()),
        }
    }

    fn slices(&self) -> MutexGuard<'_, FxHashMap<String, Slice>> {
        crate::locks::lock(&self.slices)
    }

    fn unwritten(&self) -> MutexGuard<'_, Vec<Writeback>> {
        crate::locks::lock(&self.unwritten)
    }

    /// Admits a call estimated at `usd` and `tokens` in every window of
    /// `scopes`, or says which limit refused it. `None` when no window applies.
    pub async fn admit(
        &self,
        scopes: &[Scope],
        usd: f64,
        tokens: u64,
    ) -> Result<Option<Reservation>, Refusal> {
        let need = Amount {
            usd,
            requests: 1,
            tokens,
        };
        for _ in 0..ADMIT_ROUNDS {
            let now = crate::clock::now();
            let windows = budget::windows(scopes, now);
            if windows.is_empty() {
                return Ok(None);
            }
            if self.try_admit(&windows, need) {
                return Ok(Some(Reservation {
                    windows: windows.into_iter().map(|w| w.id).collect(),
                    usd,
                    tokens,
                }));
            }
            let _one_trip = self.growing.lock().await;
            let shortfalls = self.shortfalls(&windows, need);
            if shortfalls.is_empty() {
                continue;
            }
            let generous: Vec<(&Window, Amount)> = shortfalls
                .iter()
                .map(|(w, short)| {
                    let mut grant = *short;
                    grant.add(w.limited(w.headroom()));
                    (*w, grant)
                })
                .collect();
            let granted = match budget::grow(&self.db, &self.replica, &generous, true).await {
                Err(GrowError::Limit(i)) => {
                    // Little is left: from now on this slice keeps nothing
                    // spare for itself.
                    self.mark_tight(shortfalls.get(i).map(|(w, _)| w.id.as_str()));
                    budget::grow(&self.db, &self.replica, &shortfalls, false)
                        .await
                        .map(|()| shortfalls.clone())
                }
                other => other.map(|()| generous),
            };
            match granted {
                Ok(granted) => self.add_held(&granted),
                Err(GrowError::Limit(i)) => {
                    return Err(budget::refusal(shortfalls.get(i).map(|(w, _)| *w), now));
                }
                Err(GrowError::Db(err)) => return Err(unavailable(&err)),
            }
        }
        Err(Refusal {
            code: "rate_limit_exceeded",
            message: "too many calls are competing for what is left of a limit; try again shortly".into(),
            retry_after: 1,
        })
    }

    /// Admits `need` in every window from the slices alone, if all have room.
    fn try_admit(&self, windows: &[Window], need: Amount) -> bool {
        let mut slices = self.slices();
        let fits = windows.iter().all(|w| {
            slices
                .get(&w.id)
                .is_some_and(|s| s.renewed_at.elapsed() < budget::LEASE / 2 && s.shortfall(need).is_zero())
        });
        if fits {
            let now = Instant::now();
            for w in windows {
                if let Some(slice) = slices.get_mut(&w.id) {
                    slice.inflight.add(need);
                    slice.used_at = now;
                }
            }
        }
        fits
    }

    /// The windows that need more to admit `need`, with how much more.
    fn shortfalls<'w>(&self, windows: &'w [Window], need: Amount) -> Vec<(&'w Window, Amount)> {
        let mut slices = self.slices();
        windows
            .iter()
            .filter_map(|w| {
                let slice = slices
                    .entry(w.id.clone())
                    .or_insert_with(|| Slice::new(w.clone()));
                if slice.renewed_at.elapsed() >= budget::LEASE / 2 {
                    // Not renewed for so long that a sweep may have given
                    // the hold back: count on none of it.
                    slice.held = Amount::default();
                }
                let short = slice.shortfall(need);
                (!short.is_zero()).then_some((w, short))
            })
            .collect()
    }

    fn mark_tight(&self, window: Option<&str>) {
        let mut slices = self.slices();
        if let Some(slice) = window.and_then(|id| slices.get_mut(id)) {
            slice.tight = true;
        }
    }

    fn add_held(&self, granted: &[(&Window, Amount)]) {
        let mut slices = self.slices();
        let now = Instant::now();
        for (w, grant) in granted {
            let slice = slices
                .entry(w.id.clone())
                .or_insert_with(|| Slice::new((*w).clone()));
            slice.held.add(*grant);
            slice.renewed_at = now;
        }
    }

    /// Settles a call: its estimate leaves the slices, its real use (`usd`
    /// and `tokens`, 0 for a failed call) is counted. Never waits.
    pub fn settle(&self, reservation: &Reservation, usd: f64, tokens: u64) {
        let estimate = Amount {
            usd: reservation.usd,
            requests: 1,
            tokens: reservation.tokens,
        };
        let real = Amount {
            usd,
            requests: 1,
            tokens,
        };
        let mut slices = self.slices();
        for id in &reservation.windows {
            if let Some(slice) = slices.get_mut(id) {
                slice.inflight = slice.inflight.minus(estimate);
                slice.spent.add(real);
            }
        }
    }

    /// Writes real use back and gives back idle slices (every slice with
    /// nothing in flight, when `release_all`).
    pub async fn write_back(&self, release_all: bool) {
        let writes = self.due(release_all);
        if writes.is_empty() {
            return;
        }
        match budget::write_back(&self.db, &self.replica, &writes).await {
            Ok(()) => {
                let now = Instant::now();
                let mut slices = self.slices();
                for write in writes.iter().filter(|w| !w.release) {
                    if let Some(slice) = slices.get_mut(&write.window) {
                        slice.renewed_at = now;
                    }
                }
            }
            Err(err) => {
                // The holds stay in the database (the slices count on less
                // than they have, which is safe) until a retry succeeds.
                tracing::warn!(error = %err, "could not write budget use back; will retry");
                self.unwritten().extend(writes);
            }
        }
    }

    /// Takes what is due to be written out of the slices.
    fn due(&self, release_all: bool) -> Vec<Writeback> {
        let mut writes = std::mem::take(&mut *self.unwritten());
        let mut slices = self.slices();
        slices.retain(|id, slice| {
            let idle = slice.inflight.is_zero() && (release_all || slice.used_at.elapsed() >= IDLE);
            let stale = slice.renewed_at.elapsed() >= RENEW_EVERY;
            if slice.spent.is_zero() && !idle && !stale {
                return true;
            }
            let excess = slice.excess();
            let spent = std::mem::take(&mut slice.spent);
            let give_back = if idle {
                slice.held
            } else {
                let mut give_back = slice.window.limited(spent).min(slice.held);
                give_back.add(excess);
                give_back
            };
            slice.held = slice.held.minus(give_back);
            writes.push(Writeback {
                window: id.clone(),
                spent,
                give_back,
                release: idle,
            });
            !idle
        });
        writes
    }
}

fn unavailable(err: &crate::storage::DbError) -> Refusal {
    // Fail closed: a budget that cannot be checked is not spent.
    tracing::error!(error = %err, "could not check budgets and rate limits");
    Refusal {
        code: "budget_unavailable",
        message: "budgets and rate limits cannot be checked right now; try again shortly".into(),
        retry_after: 5,
    }
}

#[cfg(test)]
mod tests;
