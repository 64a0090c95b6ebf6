//! One lease for work that must happen on one replica at a time: agent runs,
//! task runs and mission steps. A leased row in SurrealDB carries
//! `lease_owner` (the replica), `lease_until` (when it lapses unless renewed)
//! and `lease_token`, a fencing token one higher at every claim. The holder's
//! writes name its token, so a replica whose lease lapsed and was taken over
//! can never write as the holder again, however late it wakes up.
//!
//! - claim: the store's own conditional `UPDATE` where the work is free,
//!   setting [`CLAIM`] (often in one transaction with its other writes); the
//!   row it returns carries the new token ([`Lease`]);
//! - renew: [`Renewals`], one loop per table renewing every held lease every
//!   quarter lease through [`Leases::renew`]: one small write per lease (never
//!   a transaction over many, so renewals do not conflict with each other),
//!   retried with jitter when it loses to a concurrent write (a run ending, a
//!   cancel); a renewal that matches no row means the lease was taken back;
//!   a holder whose own round trips are slow asks for a longer lease
//!   ([`Leases::until`]: a term plus twice its slowest recent round trip);
//! - reap: [`Leases::lapsed`] lists what lapsed more than [`Leases::grace`]
//!   ago by the [`Clock`](crate::clock::Clock): half a lease (for clocks that
//!   differ between replicas) plus twice this replica's slowest recent lease
//!   round trip ([`RoundTrips`]: on a slow shared database the holder's
//!   renewals are as slow, and the lease end stored lags by up to two of
//!   them, the one that landed, computed when it was sent, and the one on
//!   its way), so a lease is not reaped for a slow database while its
//!   holder lives; the store
//!   takes each back with a write conditioned on [`LAPSED`] bound to
//!   [`Leases::reap_cutoff`], so exactly one replica does, and only if it was
//!   not renewed meanwhile.
//!
//! Time comes from a [`SharedClock`], so tests move a clock instead of sleeping.

mod renewals;
mod round_trips;

pub use renewals::{Heard, Holding, Renewals};
pub use round_trips::{RoundTrip, RoundTrips};

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::clock::{SharedClock, stamp};
use crate::storage::{Db, DbError};

/// The `SET` of a claim: this owner, until the term ends, the next token.
/// Binds `$lease` (from [`Leases::offer`]).
pub const CLAIM: &str =
    "lease_owner = $lease.owner, lease_until = $lease.until, lease_token = (lease_token ?? 0) + 1";
/// The condition of a holder's write: its lease is still the current one.
/// Binds `$held` (a [`Lease`]).
pub const HELD: &str = "lease_owner = $held.owner AND lease_token = $held.token";
/// The condition of reaping a lease: still that lease (held: a released one
/// has no owner), and lapsed at `$now`. Binds `$held` (a [`Lease`]) and `$now`.
pub const LAPSED: &str = "lease_owner = $held.owner AND lease_token = $held.token AND lease_until < $now";
/// The `SET` that ends a lease (the token stays, so the next claim's is higher).
pub const RELEASE: &str = "lease_owner = NONE, lease_until = NONE";
/// The fields of a row's lease, for a `RETURN` or `SELECT`.
pub const FIELDS: &str = "lease_owner AS owner, lease_token AS token, lease_until AS until";

/// A lease as held: whose, which (the fencing token) and until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub owner: String,
    pub token: u64,
    pub until: String,
}

/// A lapsed lease found by [`Leases::lapsed`]: the row's key and its lease.
#[derive(Debug, Clone, Deserialize)]
pub struct Lapsed {
    pub key: String,
    #[serde(flatten)]
    pub lease: Lease,
}

/// Renewals that lose to concurrent writes this many times in a row give up
/// until the next round (which comes well before the lease lapses).
const RENEW_ATTEMPTS: u32 = 8;
/// Lease round trips are remembered for one to two of this many terms.
const ROUND_TRIPS_WINDOW_TERMS: u32 = 2;
/// The slow-database part of the grace is at most this many terms, so a dead
/// replica's work is still taken back when the database stays this slow.
const MOST_EXTRA_GRACE_TERMS: u32 = 8;

/// The leases of one table, with their term and clock.
#[derive(Clone)]
pub struct Leases {
    db: Db,
    table: &'static str,
    term: Duration,
    clock: SharedClock,
    /// Shared by every clone: the renewals' and the reapers' round trips.
    round_trips: Arc<RoundTrips>,
}

impl Leases {
    pub fn new(db: Db, table: &'static str, term: Duration, clock: SharedClock) -> Self {
        let round_trips = RoundTrips::new(clock.clone(), term * ROUND_TRIPS_WINDOW_TERMS);
        Self {
            db,
            table,
            term,
            clock,
            round_trips,
        }
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    pub fn term(&self) -> Duration {
        self.term
    }

    pub fn table(&self) -> &'static str {
        self.table
    }

    /// How long past its end a lease is still not reaped: half a term, plus
    /// twice this replica's slowest recent lease round trip (at most a few
    /// terms). A renewal's new end is computed when it is sent, so when it
    /// lands it is already a round trip old, and the next one lands a round
    /// trip (and a renewal interval) later: on a database that slow, the
    /// stored end of a live holder's lease lags by up to two round trips.
    pub fn grace(&self) -> Duration {
        self.term / 2 + self.slow_part()
    }

    /// Twice this replica's slowest recent lease round trip, at most a few
    /// terms: what a slow database (or a starved runtime) adds to both ends
    /// of a lease, the grace a reaper gives and the term a holder asks for.
    fn slow_part(&self) -> Duration {
        (self.round_trips.slowest() * 2).min(self.term * MOST_EXTRA_GRACE_TERMS)
    }

    /// This replica's lease round trips (what widens the grace).
    pub fn round_trips(&self) -> &Arc<RoundTrips> {
        &self.round_trips
    }

    /// When a lease taken or renewed now lapses: a term from now, plus the
    /// slow part. A holder whose own round trips are slow (its database, or
    /// its own runtime kept busy) asks for that much longer, so its next
    /// renewal lands before the lease lapses even when the reaper's writes
    /// are fast and its grace is short.
    pub fn until(&self) -> String {
        let term = self.term + self.slow_part();
        stamp(self.now() + chrono::Duration::from_std(term).unwrap_or(chrono::Duration::MAX))
    }

    /// Times a claim as a lease round trip, until the returned guard drops:
    /// a claim's lease end is set when it is sent ([`offer`](Self::offer)), so
    /// a claim that waits behind a busy connection lands with less of its
    /// term left, and the next leases this replica asks for and the grace it
    /// gives widen by it.
    pub fn time_claim(&self) -> RoundTrip {
        self.round_trips.start()
    }

    /// What a claim binds as `$lease`.
    pub fn offer(&self, owner: &str) -> serde_json::Value {
        json!({ "owner": owner, "until": self.until() })
    }

    /// Extends a lease this holder still has, one row in one write, retried
    /// (with jitter) on a write conflict; returns the row's `returning`
    /// fields, or `None` when the lease is no longer this holder's.
    pub async fn renew<T: DeserializeOwned>(
        &self,
        key: &str,
        held: &Lease,
        returning: &str,
    ) -> Result<Option<T>, DbError> {
        let sql = format!(
            "UPDATE type::record($table, $key) SET lease_until = $until WHERE {HELD} RETURN {returning}"
        );
        let vars = json!({ "table": self.table, "key": key, "held": held, "until": self.until() });
        let mut attempt = 0;
        loop {
            let trip = self.round_trips.start();
            let answered = self.db.rows(&sql, vars.clone(), 0).await;
            drop(trip);
            match answered {
                Ok(rows) => return Ok(rows.into_iter().next()),
                Err(err) if err.is_conflict() && attempt + 1 < RENEW_ATTEMPTS => {
                    attempt += 1;
                    tokio::time::sleep(jittered(attempt)).await;
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// Rows whose lease lapsed more than [`grace`](Self::grace) ago (`extra`:
    /// more conditions, `AND`ed).
    pub async fn lapsed(&self, extra: &str) -> Result<Vec<Lapsed>, DbError> {
        let extra = if extra.is_empty() {
            String::new()
        } else {
            format!(" AND {extra}")
        };
        let sql = format!(
            "SELECT key, {FIELDS} FROM type::table($table) WHERE lease_owner AND lease_until < $now{extra}"
        );
        let vars = json!({ "table": self.table, "now": self.reap_cutoff() });
        let _trip = self.round_trips.start();
        self.db.rows(&sql, vars, 0).await
    }

    /// Now less the grace, as stored: what a reaper's [`LAPSED`] binds as `$now`.
    pub fn reap_cutoff(&self) -> String {
        stamp(self.now() - chrono::Duration::from_std(self.grace()).unwrap_or(chrono::Duration::MAX))
    }
}

/// A wait that grows with the attempt, spread at random so that writers who
/// collided do not collide again in step.
fn jittered(attempt: u32) -> Duration {
    let spread = u64::from(uuid::Uuid::new_v4().as_bytes()[0]) % 20;
    Duration::from_millis(u64::from(attempt) * 10 + spread)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::clock::{Clock, ManualClock};

    fn nine_oclock() -> Arc<ManualClock> {
        ManualClock::at(crate::clock::parse_stamp("2026-11-27T09:00:00Z").unwrap())
    }

    /// How many leases `leases` finds lapsed once the clock moved on `secs`.
    async fn lapsed_after(clock: &ManualClock, leases: &Leases, secs: u64) -> usize {
        clock.advance(Duration::from_secs(secs));
        leases.lapsed("").await.unwrap().len()
    }

    async fn leases(clock: SharedClock) -> (Db, Leases) {
        let db = Db::scratch().await;
        let leases = Leases::new(db.clone(), "thing", Duration::from_secs(30), clock);
        (db, leases)
    }

    async fn claim(db: &Db, leases: &Leases, key: &str, owner: &str) -> Option<Lease> {
        let rows: Vec<Lease> = db
            .rows(
                &format!(
                    "UPSERT type::record('thing', $key) SET key = $key, {CLAIM}
                     WHERE !lease_owner RETURN {FIELDS}"
                ),
                json!({ "key": key, "lease": leases.offer(owner) }),
                0,
            )
            .await
            .unwrap();
        rows.into_iter().next()
    }

    async fn reap(db: &Db, leases: &Leases, lapsed: &Lapsed) -> bool {
        let rows: Vec<serde_json::Value> = db
            .rows(
                &format!("UPDATE type::record('thing', $key) SET {RELEASE} WHERE {LAPSED} RETURN key"),
                json!({ "key": lapsed.key, "held": lapsed.lease, "now": leases.reap_cutoff() }),
                0,
            )
            .await
            .unwrap();
        !rows.is_empty()
    }

    #[tokio::test]
    async fn a_lease_lapses_by_the_clock_and_its_old_holder_cannot_write_after_a_new_claim() {
        let clock = nine_oclock();
        let (db, leases) = leases(clock.clone()).await;
        let first = claim(&db, &leases, "a", "replica-1").await.unwrap();
        assert_eq!(
            (first.token, first.until.as_str()),
            (1, "2026-11-27T09:00:30.000000Z")
        );
        assert!(claim(&db, &leases, "a", "replica-2").await.is_none(), "held");

        // Renewed before it lapses: nothing to reap, however far time goes.
        clock.advance(Duration::from_secs(20));
        let renewed: Option<Lease> = leases.renew("a", &first, FIELDS).await.unwrap();
        assert_eq!(renewed.unwrap().until, "2026-11-27T09:00:50.000000Z");
        clock.advance(Duration::from_secs(20));
        assert!(leases.lapsed("").await.unwrap().is_empty());

        // Not renewed: it lapses, and once past the half-term grace one reaper
        // takes it back; the next claim gets token 2.
        clock.advance(Duration::from_secs(20));
        assert!(leases.lapsed("").await.unwrap().is_empty(), "within the grace");
        clock.advance(Duration::from_secs(11));
        let lapsed = leases.lapsed("").await.unwrap();
        assert_eq!(lapsed.len(), 1);
        assert_eq!(lapsed[0].lease.owner, "replica-1");
        assert!(reap(&db, &leases, &lapsed[0]).await);
        assert!(!reap(&db, &leases, &lapsed[0]).await, "reaped once");
        let second = claim(&db, &leases, "a", "replica-2").await.unwrap();
        assert_eq!(second.token, 2);

        // The first holder's renewal names token 1: refused, the lease stays replica-2's.
        let stale: Option<Lease> = leases.renew("a", &first, FIELDS).await.unwrap();
        assert!(stale.is_none());
        let stolen = Lease {
            owner: "replica-2".into(),
            ..first.clone()
        };
        let stale: Option<Lease> = leases.renew("a", &stolen, FIELDS).await.unwrap();
        assert!(stale.is_none(), "the owner alone is not enough: the token fences");
        let current: Option<Lease> = leases.renew("a", &second, FIELDS).await.unwrap();
        assert_eq!(current.unwrap().owner, "replica-2");
    }

    /// A replica whose own lease writes are slow gives a lapsed lease that
    /// much more grace (its holder's renewals are probably as slow), for as
    /// long as the database stays slow, and at most a few terms.
    #[tokio::test]
    async fn a_slow_database_widens_the_grace_for_as_long_as_it_is_slow() {
        let clock = nine_oclock();
        let (db, leases) = leases(clock.clone()).await;
        assert_eq!(leases.grace(), Duration::from_secs(15), "half a term");
        claim(&db, &leases, "a", "replica-1").await.unwrap();

        // This replica's renewals took 10 s: the lease, lapsed 30 s ago, is
        // not reaped until 35 s past its end (half a term, two round trips).
        leases.round_trips().record(Duration::from_secs(10));
        assert_eq!(leases.grace(), Duration::from_secs(35));
        assert_eq!(
            lapsed_after(&clock, &leases, 60).await,
            0,
            "within the wider grace"
        );
        assert_eq!(lapsed_after(&clock, &leases, 6).await, 1, "past it");

        // A write stuck right now counts with its age so far: while this
        // replica's write is 60 s stuck, neither `a` (reapable a moment ago)
        // nor `b` (lapsed 10 s ago) is reaped.
        // (`b` is claimed for a term and the 20 s slow part: see `until`.)
        claim(&db, &leases, "b", "replica-1").await.unwrap();
        let stuck = leases.round_trips().start();
        clock.advance(Duration::from_secs(60));
        assert_eq!(leases.grace(), Duration::from_secs(135));
        assert!(leases.lapsed("").await.unwrap().is_empty());
        drop(stuck);

        // However slow, the extra grace is at most eight terms.
        leases.round_trips().record(Duration::from_secs(3600));
        assert_eq!(leases.grace(), Duration::from_secs(15 + 240));

        // Once the database is fast again for two windows (two terms each),
        // the grace is back to half a term and what the fast writes took.
        clock.advance(Duration::from_secs(61));
        leases.round_trips().record(Duration::from_millis(20));
        clock.advance(Duration::from_secs(61));
        assert_eq!(leases.grace(), Duration::from_millis(15_040));
        assert_eq!(leases.lapsed("").await.unwrap().len(), 2);
    }

    /// A holder whose own lease writes are slow asks for a longer lease, so a
    /// reaper whose writes are fast (its grace is half a term) does not take
    /// it back while the holder's next renewal is on its way.
    #[tokio::test]
    async fn a_holder_whose_writes_are_slow_takes_a_longer_lease() {
        let clock = nine_oclock();
        let (db, holder) = leases(clock.clone()).await;
        let reaper = Leases::new(db.clone(), "thing", Duration::from_secs(30), clock.clone());
        let lease = claim(&db, &holder, "a", "replica-1").await.unwrap();
        assert_eq!(
            lease.until,
            stamp(clock.now() + chrono::Duration::seconds(30)),
            "a term"
        );

        holder.round_trips().record(Duration::from_secs(10));
        let renewed: Lease = holder.renew("a", &lease, FIELDS).await.unwrap().unwrap();
        let asked = clock.now() + chrono::Duration::seconds(50);
        assert_eq!(
            renewed.until,
            stamp(asked),
            "a term and twice the slow round trip"
        );

        assert_eq!(reaper.grace(), Duration::from_secs(15));
        assert_eq!(
            lapsed_after(&clock, &reaper, 64).await,
            0,
            "within the longer lease"
        );
        assert_eq!(lapsed_after(&clock, &reaper, 2).await, 1, "past it and the grace");

        // However slow, the longer lease is at most eight terms longer.
        holder.round_trips().record(Duration::from_secs(3600));
        let renewed: Lease = holder.renew("a", &lease, FIELDS).await.unwrap().unwrap();
        assert_eq!(
            renewed.until,
            stamp(clock.now() + chrono::Duration::seconds(30 + 240))
        );
    }

    #[tokio::test]
    async fn renewals_of_many_leases_at_once_all_land() {
        let (db, leases) = leases(crate::clock::system()).await;
        let mut held = Vec::new();
        for i in 0..40 {
            held.push((
                format!("k{i}"),
                claim(&db, &leases, &format!("k{i}"), "r").await.unwrap(),
            ));
        }
        // Every lease renewed concurrently, while writers touch the same rows.
        let renewals = held
            .iter()
            .map(|(key, lease)| leases.renew::<Lease>(key, lease, FIELDS));
        let touches = held.iter().map(|(key, _)| {
            db.execute_retrying(
                "UPDATE type::record('thing', $key) SET touched = true",
                json!({ "key": key }),
            )
        });
        let (renewed, touched) = tokio::join!(
            futures::future::join_all(renewals),
            futures::future::join_all(touches)
        );
        assert!(touched.iter().all(Result::is_ok));
        for result in renewed {
            assert_eq!(result.unwrap().unwrap().owner, "r");
        }
    }

    /// The renewal loop's round, with the clock moved instead of waiting: held
    /// leases outlive many terms; a dropped holding stops being renewed and
    /// is reaped; a lease reaped while held is reported lost to its holder.
    #[tokio::test]
    async fn renewals_keep_held_leases_and_tell_a_holder_whose_lease_was_taken() {
        let clock = nine_oclock();
        let (db, leases) = leases(clock.clone()).await;
        let renewals = Renewals::<Lease>::new(leases.clone(), FIELDS);
        assert_eq!(
            renewals.interval(),
            Duration::from_millis(7500),
            "a quarter lease"
        );
        let capped = Renewals::<Lease>::every(leases.clone(), FIELDS, Duration::from_secs(1));
        assert_eq!(capped.interval(), Duration::from_secs(1));

        let heard = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let a = renewals.hold("a", claim(&db, &leases, "a", "r").await.unwrap());
        let counter = heard.clone();
        let b = renewals.hold_hearing("b", claim(&db, &leases, "b", "r").await.unwrap(), move |heard| {
            if let Heard::Renewed(row) = heard {
                assert_eq!(row.owner, "r");
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        });
        let c = renewals.hold("c", claim(&db, &leases, "c", "r").await.unwrap());
        assert_eq!(renewals.count(), 3);
        for _ in 0..10 {
            clock.advance(Duration::from_secs(8));
            renewals.renew_all().await;
            assert!(leases.lapsed("").await.unwrap().is_empty(), "all renewed");
        }
        assert_eq!(heard.load(std::sync::atomic::Ordering::SeqCst), 10);

        // `c`'s holder stops: no longer renewed, it lapses and is reaped.
        drop(c);
        assert_eq!(renewals.count(), 2);
        clock.advance(Duration::from_secs(50));
        let lapsed = leases.lapsed("").await.unwrap();
        assert_eq!(
            lapsed.iter().map(|l| l.key.as_str()).collect::<Vec<_>>(),
            ["a", "b", "c"],
            "nothing renewed for 50 s"
        );
        let reapable: Vec<String> = renewals
            .lapsed("")
            .await
            .unwrap()
            .into_iter()
            .map(|l| l.key)
            .collect();
        assert_eq!(reapable, ["c"], "this replica never reaps what it still holds");
        // `a` is reaped while its holder still holds it: the next round says so.
        let reaped = lapsed.iter().find(|l| l.key == "a").unwrap();
        assert!(reap(&db, &leases, reaped).await);
        let lost = a.lost();
        assert!(!a.is_lost());
        renewals.renew_all().await;
        assert!(a.is_lost());
        tokio::time::timeout(Duration::from_secs(5), lost)
            .await
            .expect("the holder hears its lease was lost");
        assert!(!b.is_lost(), "b was late but not reaped: its renewal lands");
        assert_eq!(renewals.count(), 1, "a lost lease is no longer renewed");
    }
}
