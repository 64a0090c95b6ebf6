//! What can go wrong with the database, and which failures are a lost
//! race that trying again may win (shared by the handle, its connection
//! pool and the migrations), and the one way a lost race is run again.

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("database: {0}")]
    Surreal(String),
    #[error(
        "database schema version {found} is newer than this onyx understands (up to {known}); upgrade onyx"
    )]
    SchemaTooNew { found: u32, known: u32 },
    #[error("database returned data Onyx could not read: {0}")]
    Decode(String),
    #[error(
        "migrating the database from schema version {from} to {to} failed, and nothing was changed (still version {from}): {reason}"
    )]
    Migration { from: u32, to: u32, reason: String },
    #[error("database dump: {0}")]
    Dump(String),
}

impl From<surrealdb::Error> for DbError {
    fn from(err: surrealdb::Error) -> Self {
        Self::Surreal(err.to_string())
    }
}

/// Whether SurrealDB's message says a transaction lost to a concurrent one.
pub(super) fn is_conflict(message: &str) -> bool {
    message.contains("can be retried") || message.contains("onflict")
}

impl DbError {
    /// A transaction that lost to a concurrent one: trying again may succeed.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Surreal(message) if is_conflict(message))
    }
}

/// Runs `op` until it succeeds, fails otherwise, or has lost `attempts`
/// races (`lost` says which failures are a lost race). Each retry waits
/// `step` longer than the last, plus up to `step` of jitter, so that the
/// racers spread out.
pub(super) async fn retry_lost_races<T, Op, Fut>(
    attempts: u32,
    step: Duration,
    lost: impl Fn(&DbError) -> bool,
    mut op: Op,
) -> Result<T, DbError>
where
    Op: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, DbError>>,
{
    let mut attempt: u32 = 1;
    loop {
        match op().await {
            Err(err) if lost(&err) && attempt < attempts => {
                let jitter = step.mul_f64(f64::from(uuid::Uuid::now_v7().as_bytes()[15]) / 256.0);
                tokio::time::sleep(step * attempt + jitter).await;
                attempt += 1;
            }
            other => return other,
        }
    }
}
