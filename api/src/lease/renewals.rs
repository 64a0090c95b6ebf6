//! Keeping this replica's leases of one table alive: the one renewal loop that
//! agent runs, task runs and mission steps share. A holder registers the lease
//! it claimed ([`Renewals::hold`]) and keeps the [`Holding`] while it works;
//! the loop renews every held lease every quarter lease (one small write each,
//! each in a task of its own so a slow one holds back no other, on the
//! connection the [`Leases`] were built with: a dedicated one, so renewals
//! never queue behind the replica's other queries), and tells
//! a holder whose lease was taken back (the conditional renewal matched no
//! row) through [`Holding::lost`]. Dropping the `Holding` stops renewing.
//!
//! Reapers give a lapsed lease half a term of grace plus their own slowest
//! recent lease round trip ([`Leases::grace`]), so a lease is reaped only
//! after several renewals in a row failed to land, however slow the database,
//! and a replica never reaps a lease it still holds ([`Renewals::lapsed`]).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use futures::future::join_all;
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use super::{Lapsed, Lease, Leases};
use crate::clock::stamp;
use crate::storage::DbError;

/// Renewals come no closer together than this, however short the lease.
const FASTEST: Duration = Duration::from_millis(250);

/// What a renewal round tells a holder that listens ([`Renewals::hold_hearing`]).
pub enum Heard<T> {
    /// Renewed: the `returning` fields of the row.
    Renewed(T),
    /// Taken back: the renewal matched no row under this lease.
    Lost,
}

type OnHeard<T> = Box<dyn Fn(Heard<T>) + Send + Sync>;

struct Held<T> {
    lease: Lease,
    lost: watch::Sender<bool>,
    on_heard: Option<OnHeard<T>>,
}

/// The leases this replica holds in one table, renewed by one loop.
pub struct Renewals<T> {
    leases: Leases,
    /// The fields a renewal returns (`T`), e.g. a run's `cancel_requested`.
    returning: &'static str,
    every: Duration,
    held: Mutex<HashMap<String, Arc<Held<T>>>>,
}

impl<T: DeserializeOwned + Send + 'static> Renewals<T> {
    /// Renewals of `leases` every quarter lease, each returning `returning`.
    pub fn new(leases: Leases, returning: &'static str) -> Arc<Self> {
        Self::every(leases, returning, Duration::MAX)
    }

    /// Like [`new`](Self::new), but renewing at least every `at_most` (agent
    /// runs hear a cancel asked on another replica when they renew).
    pub fn every(leases: Leases, returning: &'static str, at_most: Duration) -> Arc<Self> {
        let every = (leases.term() / 4).min(at_most).max(FASTEST);
        Arc::new(Self {
            leases,
            returning,
            every,
            held: Mutex::new(HashMap::new()),
        })
    }

    pub fn leases(&self) -> &Leases {
        &self.leases
    }

    /// How often the loop renews.
    pub fn interval(&self) -> Duration {
        self.every
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Held<T>>>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `lease` on the row `key` renewed until the returned [`Holding`]
    /// is dropped.
    pub fn hold(self: &Arc<Self>, key: &str, lease: Lease) -> Holding<T> {
        self.register(key, lease, None)
    }

    /// Like [`hold`](Self::hold), calling `on_heard` after each renewal.
    pub fn hold_hearing(
        self: &Arc<Self>,
        key: &str,
        lease: Lease,
        on_heard: impl Fn(Heard<T>) + Send + Sync + 'static,
    ) -> Holding<T> {
        self.register(key, lease, Some(Box::new(on_heard)))
    }

    fn register(self: &Arc<Self>, key: &str, lease: Lease, on_heard: Option<OnHeard<T>>) -> Holding<T> {
        let held = Arc::new(Held {
            lease,
            lost: watch::Sender::new(false),
            on_heard,
        });
        self.held().insert(key.to_string(), held.clone());
        Holding {
            key: key.to_string(),
            held,
            renewals: Arc::downgrade(self),
        }
    }

    /// Whether this replica holds `lease` on `key` (the same claim: owner
    /// and token) and keeps renewing it.
    pub fn holds(&self, key: &str, lease: &Lease) -> bool {
        self.held()
            .get(key)
            .is_some_and(|held| held.lease.owner == lease.owner && held.lease.token == lease.token)
    }

    /// The table's leases that lapsed past their grace ([`Leases::lapsed`]),
    /// but for those this replica still holds: its own work is alive, however
    /// late its renewals land on a busy database, so it never reaps it.
    pub async fn lapsed(&self, extra: &str) -> Result<Vec<Lapsed>, DbError> {
        let mut lapsed = self.leases.lapsed(extra).await?;
        lapsed.retain(|lapsed| !self.holds(&lapsed.key, &lapsed.lease));
        if !lapsed.is_empty() {
            let (now, grace) = (stamp(self.leases.now()), self.leases.grace());
            for found in &lapsed {
                tracing::info!(
                    table = self.leases.table(), key = %found.key, owner = %found.lease.owner,
                    until = %found.lease.until, %now, grace_ms = grace.as_millis(),
                    "a lease lapsed past its grace"
                );
            }
        }
        Ok(lapsed)
    }

    /// How many leases are held now.
    pub fn count(&self) -> usize {
        self.held().len()
    }

    /// One round: every held lease renewed at once, one write each, waiting
    /// for them all. A lease the renewal no longer finds (taken back) is
    /// reported lost to its holder and no longer renewed.
    pub async fn renew_all(&self) {
        let held: Vec<(String, Arc<Held<T>>)> = self
            .held()
            .iter()
            .map(|(key, held)| (key.clone(), held.clone()))
            .collect();
        join_all(held.iter().map(|(key, held)| self.renew_one(key, held))).await;
    }

    /// Renews one lease and tells its holder what came of it.
    async fn renew_one(&self, key: &str, held: &Arc<Held<T>>) {
        let started = std::time::Instant::now();
        let renewed = self.leases.renew::<T>(key, &held.lease, self.returning).await;
        if started.elapsed() > self.every {
            // The margin a lease has left shrinks by this: worth knowing on a busy database.
            tracing::info!(
                table = self.leases.table(), key = %key, took_ms = started.elapsed().as_millis(),
                "a lease renewal took longer than the time between renewals"
            );
        }
        match renewed {
            Ok(Some(fields)) => {
                if let Some(on_heard) = &held.on_heard {
                    on_heard(Heard::Renewed(fields));
                }
            }
            Ok(None) => {
                self.forget(key, held);
                held.lost.send_replace(true);
                if let Some(on_heard) = &held.on_heard {
                    on_heard(Heard::Lost);
                }
            }
            Err(err) => tracing::warn!(
                table = self.leases.table(), key = %key, error = %err,
                "could not renew a lease; retrying next round"
            ),
        }
    }

    /// Stops renewing `key` if `held` is still what is held there (a new
    /// claim of the same row may have replaced it).
    fn forget(&self, key: &str, held: &Arc<Held<T>>) {
        let mut all = self.held();
        if all.get(key).is_some_and(|current| Arc::ptr_eq(current, held)) {
            all.remove(key);
        }
    }

    /// The loop (for the app's `Background`): every quarter lease, each held
    /// lease whose last renewal has landed is renewed again, in a task of its
    /// own, so one slow write never holds back the others' renewals; until the
    /// `Renewals` is dropped.
    pub fn run(self: &Arc<Self>) -> impl Future<Output = ()> + Send + 'static {
        let renewals = Arc::downgrade(self);
        let every = self.every;
        async move {
            let in_flight: Arc<Mutex<HashSet<String>>> = Arc::default();
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticks.tick().await;
            loop {
                let scheduled = ticks.tick().await;
                let Some(renewals) = renewals.upgrade() else {
                    return;
                };
                let late = scheduled.elapsed();
                if late > every {
                    // Not the database: this replica's own runtime kept the
                    // loop from running (its renewals land late by this too).
                    tracing::info!(
                        table = renewals.leases.table(),
                        late_ms = late.as_millis(),
                        "the lease renewal loop woke late"
                    );
                }
                let due: Vec<(String, Arc<Held<T>>)> = {
                    let held = renewals.held();
                    let mut flying = in_flight.lock().unwrap_or_else(PoisonError::into_inner);
                    held.iter()
                        .filter(|(key, _)| flying.insert((*key).clone()))
                        .map(|(key, held)| (key.clone(), held.clone()))
                        .collect()
                };
                for (key, held) in due {
                    let (renewals, in_flight) = (renewals.clone(), in_flight.clone());
                    tokio::spawn(async move {
                        renewals.renew_one(&key, &held).await;
                        in_flight
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .remove(&key);
                    });
                }
            }
        }
    }
}

/// A lease being kept alive; renewal stops when it is dropped.
pub struct Holding<T> {
    key: String,
    held: Arc<Held<T>>,
    renewals: Weak<Renewals<T>>,
}

impl<T> Holding<T> {
    /// The lease as claimed (its token is what the holder's writes name).
    pub fn lease(&self) -> &Lease {
        &self.held.lease
    }

    /// Whether a renewal found the lease taken back.
    pub fn is_lost(&self) -> bool {
        *self.held.lost.borrow()
    }

    /// Resolves once a renewal finds the lease taken back (another replica
    /// reaped it: this one stalled past the lease and its grace).
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut lost = self.held.lost.subscribe();
        async move {
            // The sender lives as long as this holding, which outlives the wait.
            if lost.wait_for(|lost| *lost).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

impl<T> Drop for Holding<T> {
    fn drop(&mut self) {
        if let Some(renewals) = self.renewals.upgrade() {
            let mut all = renewals.held.lock().unwrap_or_else(PoisonError::into_inner);
            if all
                .get(&self.key)
                .is_some_and(|current| Arc::ptr_eq(current, &self.held))
            {
                all.remove(&self.key);
            }
        }
    }
}
