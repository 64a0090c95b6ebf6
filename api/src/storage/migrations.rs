//! Versioned schema migrations, run at startup. Each step is idempotent
//! (`IF NOT EXISTS`), the applied version lives in `onyx_meta:schema`, and a
//! database newer than this binary is refused rather than guessed at.

use serde::Deserialize;
use serde_json::json;

use super::db::{Db, DbError};

/// Index = version - 1. Append; never edit a shipped step.
const MIGRATIONS: &[&str] = &[
    // 1: session metadata, turns parked while the object store is down, API keys.
    "DEFINE TABLE IF NOT EXISTS session SCHEMALESS;
     DEFINE INDEX IF NOT EXISTS session_updated ON session FIELDS updated_at;
     DEFINE INDEX IF NOT EXISTS session_agent ON session FIELDS agent_id, updated_at;
     DEFINE TABLE IF NOT EXISTS api_key SCHEMALESS;
     DEFINE INDEX IF NOT EXISTS api_key_digest ON api_key FIELDS digest UNIQUE;
     DEFINE TABLE IF NOT EXISTS pending_append SCHEMALESS;",
];

pub const LATEST: u32 = MIGRATIONS.len() as u32;

#[derive(Deserialize)]
struct SchemaRow {
    version: u32,
}

pub async fn current_version(db: &Db) -> Result<u32, DbError> {
    // SurrealDB 3 refuses to read a table that was never defined.
    db.execute("DEFINE TABLE IF NOT EXISTS onyx_meta SCHEMALESS", json!({}))
        .await?;
    let rows: Vec<SchemaRow> = db
        .rows("SELECT version FROM onyx_meta:schema", json!({}), 0)
        .await?;
    Ok(rows.first().map(|r| r.version).unwrap_or(0))
}

pub async fn run(db: &Db) -> Result<(), DbError> {
    let found = current_version(db).await?;
    if found > LATEST {
        return Err(DbError::SchemaTooNew { found, known: LATEST });
    }
    for (index, statements) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        let version = index as u32 + 1;
        db.execute(statements, json!({})).await?;
        db.execute(
            "UPSERT onyx_meta:schema SET version = $version",
            json!({"version": version}),
        )
        .await?;
        tracing::info!(version, "applied database migration");
    }
    Ok(())
}
