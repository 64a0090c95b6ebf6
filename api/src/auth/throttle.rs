//! Failed-login throttling: five failures per minute from one address, then
//! 429 until the fifth most recent is a minute old. The failures live in
//! SurrealDB (`login_failure`), so replicas behind one load balancer count
//! them together, and SurrealDB's clock is the only one consulted.

use std::net::IpAddr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::json;

use crate::storage::{Db, DbError};

const WINDOW: Duration = Duration::from_secs(60);
const MAX_FAILURES: usize = 5;

pub struct LoginThrottle {
    db: Db,
}

impl LoginThrottle {
    pub fn new(db: Db) -> Self {
        Self { db }
    }

    /// `Some(wait)` when this address must wait before trying again.
    pub async fn blocked(&self, ip: IpAddr) -> Result<Option<Duration>, DbError> {
        let mut response = self
            .db
            .execute(
                &format!(
                    "LET $now = time::now();
                     SELECT VALUE at FROM login_failure WHERE ip = $ip AND at > $now - 1m
                         ORDER BY at DESC LIMIT {MAX_FAILURES};
                     RETURN $now;"
                ),
                json!({"ip": ip.to_string()}),
            )
            .await?;
        let recent: Vec<DateTime<Utc>> = Db::take_rows(&mut response, 1)?;
        let now: Vec<DateTime<Utc>> = Db::take_rows(&mut response, 2)?;
        let (Some(fifth), Some(now)) = (recent.get(MAX_FAILURES - 1), now.first()) else {
            return Ok(None);
        };
        let age = (*now - *fifth).to_std().unwrap_or_default();
        Ok(Some(WINDOW.saturating_sub(age).max(Duration::from_secs(1))))
    }

    /// Records a failure (and forgets failures older than the window).
    pub async fn failed(&self, ip: IpAddr) -> Result<(), DbError> {
        self.db
            .execute(
                "CREATE login_failure SET ip = $ip, at = time::now();
                 DELETE login_failure WHERE at < time::now() - 1m;",
                json!({"ip": ip.to_string()}),
            )
            .await?;
        Ok(())
    }

    pub async fn succeeded(&self, ip: IpAddr) -> Result<(), DbError> {
        self.db
            .execute(
                "DELETE login_failure WHERE ip = $ip",
                json!({"ip": ip.to_string()}),
            )
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn five_failures_block_the_address_on_every_replica_and_only_that_one() {
        let db = Db::scratch().await;
        // Two replicas of one deployment: the same database, separate throttles.
        let (one, other) = (LoginThrottle::new(db.clone()), LoginThrottle::new(db));
        let (a, b): (IpAddr, IpAddr) = ([10, 0, 0, 1].into(), [10, 0, 0, 2].into());
        for throttle in [&one, &other, &one, &other] {
            throttle.failed(a).await.unwrap();
        }
        assert_eq!(other.blocked(a).await.unwrap(), None);
        one.failed(a).await.unwrap();
        for throttle in [&one, &other] {
            let wait = throttle.blocked(a).await.unwrap();
            assert!(
                wait.is_some_and(|w| w > Duration::from_secs(50) && w <= WINDOW),
                "{wait:?}"
            );
        }
        assert_eq!(one.blocked(b).await.unwrap(), None);
        other.succeeded(a).await.unwrap();
        assert_eq!(one.blocked(a).await.unwrap(), None);
    }

    #[tokio::test]
    async fn failures_older_than_a_minute_do_not_count() {
        let db = Db::scratch().await;
        let throttle = LoginThrottle::new(db.clone());
        let a: IpAddr = "2001:db8::1".parse().unwrap();
        db.execute(
            "FOR $i IN 0..5 { CREATE login_failure SET ip = $ip, at = time::now() - 61s };",
            json!({"ip": a.to_string()}),
        )
        .await
        .unwrap();
        assert_eq!(throttle.blocked(a).await.unwrap(), None);
        throttle.failed(a).await.unwrap();
        let left: Vec<serde_json::Value> = db
            .rows("SELECT * FROM login_failure", json!({}), 0)
            .await
            .unwrap();
        assert_eq!(left.len(), 1, "old failures are forgotten: {left:?}");
    }
}
