//! Failed-login throttling: five attempts per minute from one address that
//! were not right, then 429 until the fifth most recent is a minute old.
//!
//! An attempt is counted before its password is checked ([`reserve`]), in
//! one transaction on the address's record, so parallel guesses cannot all
//! slip past the count: the sixth of N at once is refused without hashing. A
//! right password forgets the address's attempts; a wrong one leaves its
//! reservation counted as a failure. The record lives in SurrealDB
//! (`login_failure:⟨ip⟩`), so replicas behind one load balancer count
//! together (two writers of one record conflict and the loser retries), and
//! SurrealDB's clock is the only one consulted.
//!
//! [`reserve`]: LoginThrottle::reserve

use std::net::IpAddr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::json;

use crate::storage::{Db, DbError};

const WINDOW: Duration = Duration::from_secs(60);
const MAX_FAILURES: usize = 5;

/// What the throttle says to one login attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// Counted: check the password.
    Reserved,
    /// Too many recent failures: try again after this long.
    Refused(Duration),
}

pub struct LoginThrottle {
    db: Db,
    /// One reservation at a time on this replica: parallel attempts queue
    /// here instead of conflicting in the database (other replicas still do,
    /// and retry).
    reserving: tokio::sync::Mutex<()>,
}

#[derive(Deserialize)]
struct Decision {
    reserved: bool,
    /// The attempts of the last minute, oldest first, before this one.
    recent: Vec<DateTime<Utc>>,
    now: DateTime<Utc>,
}

impl LoginThrottle {
    pub fn new(db: Db) -> Self {
        Self {
            db,
            reserving: tokio::sync::Mutex::new(()),
        }
    }

    /// Counts an attempt from `ip`, or refuses it (see the module docs).
    pub async fn reserve(&self, ip: IpAddr) -> Result<Attempt, DbError> {
        let _one_at_a_time = self.reserving.lock().await;
        let sql = format!(
            "BEGIN TRANSACTION;
             LET $now = time::now();
             LET $record = type::record('login_failure', $ip);
             LET $recent = array::sort(array::filter($record.attempts ?? [], |$at| $at > $now - 1m));
             LET $reserved = array::len($recent) < {MAX_FAILURES};
             IF $reserved {{
                 UPSERT $record SET ip = $ip, at = $now, attempts = array::append($recent, $now);
             }};
             RETURN {{ reserved: $reserved, recent: $recent, now: $now }};
             COMMIT TRANSACTION;"
        );
        let mut response = self
            .db
            .execute_retrying(&sql, json!({"ip": ip.to_string()}))
            .await?;
        // BEGIN is statement 0, so the RETURN is statement 6.
        let answer: Vec<Decision> = Db::take_rows(&mut response, 6)?;
        let Some(decision) = answer.into_iter().next() else {
            return Err(DbError::Decode("the throttle's decision is missing".into()));
        };
        if decision.reserved {
            return Ok(Attempt::Reserved);
        }
        // The oldest of the last MAX_FAILURES attempts frees a slot when it turns a minute old.
        let oldest = decision
            .recent
            .len()
            .checked_sub(MAX_FAILURES)
            .and_then(|at| decision.recent.get(at))
            .copied()
            .unwrap_or(decision.now);
        let age = (decision.now - oldest).to_std().unwrap_or_default();
        Ok(Attempt::Refused(
            WINDOW.saturating_sub(age).max(Duration::from_secs(1)),
        ))
    }

    /// The attempt was wrong: its reservation stays counted. Forgets the
    /// records nobody tried from for a minute.
    pub async fn failed(&self) -> Result<(), DbError> {
        self.db
            .execute("DELETE login_failure WHERE at < time::now() - 1m", json!({}))
            .await?;
        Ok(())
    }

    /// The attempt was right: the address starts afresh.
    pub async fn succeeded(&self, ip: IpAddr) -> Result<(), DbError> {
        self.db
            .execute_retrying(
                "DELETE type::record('login_failure', $ip)",
                json!({"ip": ip.to_string()}),
            )
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reserved(attempts: &[Attempt]) -> usize {
        attempts.iter().filter(|a| **a == Attempt::Reserved).count()
    }

    #[tokio::test]
    async fn five_attempts_block_the_address_on_every_replica_and_only_that_one() {
        let db = Db::scratch().await;
        // Two replicas of one deployment: the same database, separate throttles.
        let (one, other) = (LoginThrottle::new(db.clone()), LoginThrottle::new(db));
        let (a, b): (IpAddr, IpAddr) = ([10, 0, 0, 1].into(), [10, 0, 0, 2].into());
        for throttle in [&one, &other, &one, &other, &one] {
            assert_eq!(throttle.reserve(a).await.unwrap(), Attempt::Reserved);
        }
        for throttle in [&one, &other] {
            let Attempt::Refused(wait) = throttle.reserve(a).await.unwrap() else {
                panic!("a sixth attempt within the minute is refused");
            };
            assert!(wait > Duration::from_secs(50) && wait <= WINDOW, "{wait:?}");
        }
        assert_eq!(one.reserve(b).await.unwrap(), Attempt::Reserved);
        other.succeeded(a).await.unwrap();
        assert_eq!(one.reserve(a).await.unwrap(), Attempt::Reserved);
    }

    #[tokio::test]
    async fn parallel_attempts_on_two_replicas_reserve_five_in_all() {
        let db = Db::scratch().await;
        let (one, other) = (LoginThrottle::new(db.clone()), LoginThrottle::new(db));
        let ip: IpAddr = [10, 0, 0, 3].into();
        let attempts = futures::future::join_all((0..24).map(|n| {
            if n % 2 == 0 {
                one.reserve(ip)
            } else {
                other.reserve(ip)
            }
        }))
        .await;
        let attempts: Vec<Attempt> = attempts.into_iter().map(Result::unwrap).collect();
        assert_eq!(reserved(&attempts), MAX_FAILURES, "{attempts:?}");
    }

    #[tokio::test]
    async fn attempts_older_than_a_minute_do_not_count() {
        let db = Db::scratch().await;
        let throttle = LoginThrottle::new(db.clone());
        let a: IpAddr = "2001:db8::1".parse().unwrap();
        db.execute(
            "UPSERT type::record('login_failure', $ip) SET ip = $ip, at = time::now() - 61s,
                 attempts = [time::now() - 65s, time::now() - 64s, time::now() - 63s, time::now() - 62s, time::now() - 61s];
             CREATE login_failure SET ip = '10.9.9.9', at = time::now() - 90s;",
            json!({"ip": a.to_string()}),
        )
        .await
        .unwrap();
        assert_eq!(throttle.reserve(a).await.unwrap(), Attempt::Reserved);
        throttle.failed().await.unwrap();
        let left: Vec<serde_json::Value> = db
            .rows("SELECT ip, attempts FROM login_failure", json!({}), 0)
            .await
            .unwrap();
        assert_eq!(left.len(), 1, "stale records are forgotten: {left:?}");
        assert_eq!(left[0]["attempts"].as_array().unwrap().len(), 1, "{left:?}");
    }
}
