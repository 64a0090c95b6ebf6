//! Versioned schema migrations, run by `onyx serve` and `onyx reindex` before
//! they use the database (`Db::migrate`; connecting alone never migrates).
//! Each step is idempotent (`IF NOT EXISTS`), the applied version lives in
//! `onyx_meta:schema`, and a database newer than this binary is refused rather
//! than guessed at. The steps a database lacks run as one transaction with
//! the version update: a step that fails leaves the database as it was, and
//! the error says which versions and why. One log line says what was applied.

use serde::Deserialize;
use serde_json::json;

use super::db::Db;
use super::error::{DbError, retry_lost_races};
use std::time::Duration;

/// Index = version - 1. Append; never edit a shipped step.
const MIGRATIONS: &[&str] = &[
    // 1: session metadata, turns parked while the object store is down, API keys.
    "DEFINE TABLE IF NOT EXISTS session SCHEMALESS;
     DEFINE INDEX IF NOT EXISTS session_updated ON session FIELDS updated_at;
     DEFINE INDEX IF NOT EXISTS session_agent ON session FIELDS agent_id, updated_at;
     DEFINE TABLE IF NOT EXISTS api_key SCHEMALESS;
     DEFINE INDEX IF NOT EXISTS api_key_digest ON api_key FIELDS digest UNIQUE;
     DEFINE TABLE IF NOT EXISTS pending_append SCHEMALESS;",
    // 2: the memory index. The HNSW index on memory_chunk.embedding is defined
    // at runtime, once the embedder's dimension is known.
    "DEFINE TABLE IF NOT EXISTS memory_chunk SCHEMALESS;
     DEFINE ANALYZER IF NOT EXISTS memory_az TOKENIZERS blank, class, punct FILTERS lowercase, ascii, snowball(english);
     DEFINE INDEX IF NOT EXISTS memory_chunk_body ON memory_chunk FIELDS body FULLTEXT ANALYZER memory_az BM25(1.2,0.75) HIGHLIGHTS;
     DEFINE INDEX IF NOT EXISTS memory_chunk_file ON memory_chunk FIELDS agent, path;
     DEFINE INDEX IF NOT EXISTS memory_chunk_pending ON memory_chunk FIELDS pending;
     DEFINE TABLE IF NOT EXISTS memory_file SCHEMALESS;
     DEFINE TABLE IF NOT EXISTS embedding_cache SCHEMALESS;
     DEFINE INDEX IF NOT EXISTS embedding_cache_key ON embedding_cache FIELDS key UNIQUE;",
    // 3: agents created or changed through the API, agent-to-agent messages,
    // and tool calls waiting for a human's approval.
    "DEFINE TABLE IF NOT EXISTS agent SCHEMALESS;
     DEFINE TABLE IF NOT EXISTS inbox_message SCHEMALESS;
     DEFINE INDEX IF NOT EXISTS inbox_recipient ON inbox_message FIELDS recipient, status;
     DEFINE INDEX IF NOT EXISTS inbox_key ON inbox_message FIELDS key UNIQUE;
     DEFINE TABLE IF NOT EXISTS approval SCHEMALESS;
     DEFINE INDEX IF NOT EXISTS approval_status ON approval FIELDS status;",
    // 4: scheduled tasks (claimed with leases) and the record of every run.
    "DEFINE TABLE IF NOT EXISTS task SCHEMALESS;
     DEFINE INDEX IF NOT EXISTS task_due ON task FIELDS status, next_run;
     DEFINE INDEX IF NOT EXISTS task_agent ON task FIELDS agent;
     DEFINE TABLE IF NOT EXISTS task_run SCHEMALESS;
     DEFINE INDEX IF NOT EXISTS task_run_task ON task_run FIELDS task, started_at;",
    // 5: which session each chat on a chat platform is in (`/new` moves it on),
    // and the control UI's login sessions (tower-sessions).
    "DEFINE TABLE IF NOT EXISTS chat_session SCHEMALESS;
     DEFINE TABLE IF NOT EXISTS ui_session SCHEMALESS;",
    // 6: SurrealDB's own memory search indexes move off `memory_chunk` (the
    // rows every write commits) onto `memory_search`, which catches up behind
    // the writes (`memory::surreal_search`); every indexed file is queued once
    // so the new table fills from the existing chunks.
    "DEFINE TABLE IF NOT EXISTS memory_search SCHEMALESS;
     DEFINE INDEX IF NOT EXISTS memory_search_body ON memory_search FIELDS body FULLTEXT ANALYZER memory_az BM25(1.2,0.75);
     DEFINE INDEX IF NOT EXISTS memory_search_file ON memory_search FIELDS agent, path;
     DEFINE TABLE IF NOT EXISTS memory_search_queue SCHEMALESS;
     REMOVE INDEX IF EXISTS memory_chunk_body ON memory_chunk;
     REMOVE INDEX IF EXISTS memory_chunk_embedding ON memory_chunk;
     FOR $file IN (SELECT agent, path FROM memory_file) {
         UPSERT type::record('memory_search_queue', $file.agent + '/' + $file.path)
             SET agent = $file.agent, path = $file.path, version = <string> rand::uuid();
     };",
    // 7: failed UI logins, counted across replicas.
    "DEFINE TABLE IF NOT EXISTS login_failure SCHEMALESS;
     DEFINE INDEX IF NOT EXISTS login_failure_ip ON login_failure FIELDS ip, at;
     DEFINE INDEX IF NOT EXISTS login_failure_at ON login_failure FIELDS at;",
    // 8: every agent run, held by its replica with a lease (`agents::runs`),
    // and inbox messages claimed by a run until it ends.
    "DEFINE TABLE IF NOT EXISTS agent_run SCHEMALESS;
     DEFINE INDEX IF NOT EXISTS agent_run_key ON agent_run FIELDS key UNIQUE;
     DEFINE INDEX IF NOT EXISTS agent_run_status ON agent_run FIELDS status, lease_until;
     DEFINE INDEX IF NOT EXISTS agent_run_started ON agent_run FIELDS started_at;
     DEFINE INDEX IF NOT EXISTS inbox_claimed_by ON inbox_message FIELDS claimed_by;",
    // 9: where the owner last talked to each agent (`send_message`'s default target).
    "DEFINE TABLE IF NOT EXISTS owner_chat SCHEMALESS;",
    // 10: Responses API responses kept for `previous_response_id` and retrieval.
    "DEFINE TABLE IF NOT EXISTS stored_response SCHEMALESS;",
    // 11: usage (`usage`): one record per upstream call, and the budget and
    // rate-limit windows with their reservations.
    "DEFINE TABLE IF NOT EXISTS usage_record SCHEMALESS;
     DEFINE INDEX IF NOT EXISTS usage_record_at ON usage_record FIELDS at;
     DEFINE INDEX IF NOT EXISTS usage_record_key_at ON usage_record FIELDS key_id, at;
     DEFINE TABLE IF NOT EXISTS usage_window SCHEMALESS;
     DEFINE INDEX IF NOT EXISTS usage_window_expires ON usage_window FIELDS expires_at;
     DEFINE TABLE IF NOT EXISTS usage_reservation SCHEMALESS;
     DEFINE INDEX IF NOT EXISTS usage_reservation_expires ON usage_reservation FIELDS expires_at;",
    // 12: usage records summed per minute and caller (`requests` calls each),
    // and budget holds per replica and window (`usage_lease`) instead of per
    // call: per-call reservations still held are given back.
    "DEFINE TABLE IF NOT EXISTS usage_lease SCHEMALESS;
     DEFINE INDEX IF NOT EXISTS usage_lease_expires ON usage_lease FIELDS expires_at;
     UPDATE usage_record SET requests = 1, priced_requests = IF priced { 1 } ELSE { 0 } WHERE requests IS NONE;
     FOR $r IN (SELECT windows, usd, tokens FROM usage_reservation) {
         FOR $w IN $r.windows {
             UPDATE type::record('usage_window', $w) SET reserved_usd -= $r.usd, reserved_tokens -= $r.tokens;
         };
     };
     DELETE usage_reservation;",
    // 13: memory search is the resident index alone: SurrealDB's copy of the
    // chunks for its own HNSW and BM25 indexes, its catch-up queue and the
    // analyzer go; every file gets a version (what a restarted replica checks
    // its snapshot against). Chunk ids become content-derived at each file's
    // next write.
    "REMOVE TABLE IF EXISTS memory_search;
     REMOVE TABLE IF EXISTS memory_search_queue;
     REMOVE INDEX IF EXISTS memory_chunk_body ON memory_chunk;
     REMOVE ANALYZER IF EXISTS memory_az;
     UPDATE memory_file SET version = <string> rand::uuid() WHERE version IS NONE;",
    // 14: the audit log of admin actions, read newest first.
    "DEFINE TABLE IF NOT EXISTS audit_event SCHEMALESS;
     DEFINE INDEX IF NOT EXISTS audit_event_at ON audit_event FIELDS at;",
    // 15: providers and aliases added through the API (`provider:{name}`,
    // `model_alias:{name}`); a provider's spec is JSON with its key and header
    // values sealed under the master key.
    "DEFINE TABLE IF NOT EXISTS provider SCHEMALESS;
     DEFINE TABLE IF NOT EXISTS model_alias SCHEMALESS;",
    // 16: orchestration (`orchestration`): proposals, missions and their
    // steps (claimed with leases), the event trail, policies as data,
    // triggers, reactions, agents' trust levels and their reviews.
    "DEFINE TABLE IF NOT EXISTS proposal SCHEMALESS;
     DEFINE INDEX IF NOT EXISTS proposal_created ON proposal FIELDS created_at;
     DEFINE TABLE IF NOT EXISTS mission SCHEMALESS;
     DEFINE INDEX IF NOT EXISTS mission_status ON mission FIELDS status;
     DEFINE TABLE IF NOT EXISTS step SCHEMALESS;
     DEFINE TABLE IF NOT EXISTS step_claim SCHEMALESS;
     DEFINE INDEX IF NOT EXISTS step_status ON step FIELDS status;
     DEFINE INDEX IF NOT EXISTS step_mission ON step FIELDS mission;
     DEFINE INDEX IF NOT EXISTS step_kind_created ON step FIELDS kind, created_at;
     DEFINE TABLE IF NOT EXISTS event SCHEMALESS;
     DEFINE INDEX IF NOT EXISTS event_key ON event FIELDS key;
     DEFINE TABLE IF NOT EXISTS policy SCHEMALESS;
     DEFINE TABLE IF NOT EXISTS trigger SCHEMALESS;
     DEFINE TABLE IF NOT EXISTS reaction SCHEMALESS;
     DEFINE INDEX IF NOT EXISTS reaction_status ON reaction FIELDS status;
     DEFINE TABLE IF NOT EXISTS agent_trust SCHEMALESS;
     DEFINE TABLE IF NOT EXISTS agent_review SCHEMALESS;
     DEFINE INDEX IF NOT EXISTS agent_review_agent ON agent_review FIELDS agent;",
    // 17: one lease for runs, tasks and steps (`lease`): every leased row has
    // an owner and a fencing token; runs started before kept their owner as
    // `replica`.
    "UPDATE agent_run SET lease_owner = replica, lease_token = 1 WHERE status = 'running' AND !lease_owner;
     UPDATE task SET lease_token = 1 WHERE lease_run AND !lease_token;
     UPDATE step SET lease_token = attempts ?? 1 WHERE status = 'running' AND !lease_token;",
    // 18: notifications for the owner's browser (`notifications`), newest kept.
    "DEFINE TABLE IF NOT EXISTS notification SCHEMALESS;
     DEFINE INDEX IF NOT EXISTS notification_read ON notification FIELDS read;",
    // 19: MCP servers added through the API (`mcp_server:{name}`); a server's
    // spec is JSON with its env and header values sealed under the master key.
    "DEFINE TABLE IF NOT EXISTS mcp_server SCHEMALESS;",
    // 20: OAuth sign-ins of remote MCP servers (`mcp_client::oauth`): each
    // server's sealed tokens, and the sign-ins under way by hashed state.
    "DEFINE TABLE IF NOT EXISTS mcp_oauth SCHEMALESS;
     DEFINE TABLE IF NOT EXISTS mcp_oauth_state SCHEMALESS;",
    // 21: reactions read through indexes as they pile up: the pending ones
    // in order (the reactive loop polls them every second) and a target's
    // latest of a kind (each event's cooldown check).
    "DEFINE INDEX IF NOT EXISTS reaction_status_created ON reaction FIELDS status, created_at;
     DEFINE INDEX IF NOT EXISTS reaction_target ON reaction FIELDS target, `type`, created_at;",
];

pub const LATEST: u32 = MIGRATIONS.len() as u32;

#[derive(Deserialize)]
struct SchemaRow {
    version: u32,
}

async fn current_version(db: &Db) -> Result<u32, DbError> {
    // SurrealDB 3 refuses to read a table that was never defined.
    db.execute("DEFINE TABLE IF NOT EXISTS onyx_meta SCHEMALESS", json!({}))
        .await?;
    stored_version(db).await
}

async fn stored_version(db: &Db) -> Result<u32, DbError> {
    let rows: Vec<SchemaRow> = db
        .rows("SELECT version FROM onyx_meta:schema", json!({}), 0)
        .await?;
    Ok(rows.first().map(|r| r.version).unwrap_or(0))
}

impl Db {
    /// The schema version applied so far, 0 for a database never migrated;
    /// reads only (unlike [`migrate`](Self::migrate), it defines nothing).
    pub async fn schema_version(&self) -> Result<u32, DbError> {
        let info: Vec<serde_json::Value> = self.rows("INFO FOR DB", json!({}), 0).await?;
        let defined = info
            .first()
            .is_some_and(|info| info["tables"].get("onyx_meta").is_some());
        if !defined {
            return Ok(0);
        }
        stored_version(self).await
    }

    /// Brings the schema up to date (idempotent; refuses a newer schema).
    pub async fn migrate(&self) -> Result<(), DbError> {
        run(self).await
    }

    /// A fresh in-memory database, migrated, for unit tests.
    #[cfg(test)]
    pub async fn scratch() -> Self {
        let db = match Self::connect(&scratch_config()).await {
            Ok(db) => db,
            Err(err) => panic!("in-memory SurrealDB: {err}"),
        };
        if let Err(err) = db.migrate().await {
            panic!("migrating the in-memory SurrealDB: {err}");
        }
        db
    }
}

/// An in-memory database, for unit tests.
#[cfg(test)]
pub(super) fn scratch_config() -> crate::config::SurrealConfig {
    crate::config::SurrealConfig::at("mem://", "test")
}

async fn run(db: &Db) -> Result<(), DbError> {
    let started = std::time::Instant::now();
    let applied = apply(db, MIGRATIONS).await?;
    if applied > 0 {
        let elapsed_ms = started.elapsed().as_millis() as u64;
        tracing::info!(
            applied,
            elapsed_ms,
            schema_version = LATEST,
            "applied {applied} migrations in {elapsed_ms} ms"
        );
    }
    Ok(())
}

/// How many times migrating starts over after losing to another writer.
const MIGRATION_ATTEMPTS: u32 = 20;

/// Applies the `steps` the database lacks; how many. Replicas started
/// together migrate one database at once: the one that loses a conflict
/// reads the version again and goes on from there (often: nothing left).
async fn apply(db: &Db, steps: &[&str]) -> Result<u32, DbError> {
    retry_lost_races(
        MIGRATION_ATTEMPTS,
        Duration::from_millis(20),
        lost_to_another_migration,
        || apply_once(db, steps),
    )
    .await
}

/// Applies the `steps` the database lacks, all in one transaction.
///
/// SurrealDB 3.3 cannot commit a transaction that both defines and removes
/// one full-text index (it conflicts with itself): steps 2 and 6 do that, so
/// a database older than version 2 gets a conflict here and then migrates
/// one step per transaction instead (each step still all or nothing).
async fn apply_once(db: &Db, steps: &[&str]) -> Result<u32, DbError> {
    let found = current_version(db).await?;
    let latest = steps.len() as u32;
    if found > latest {
        return Err(DbError::SchemaTooNew { found, known: latest });
    }
    if found == latest {
        return Ok(0);
    }
    match run_steps(db, steps, found, latest).await {
        Ok(()) => {}
        Err(err) if err.is_conflict() => {
            for version in found + 1..=latest {
                run_steps(db, steps, version - 1, version).await?;
            }
        }
        Err(err) => return Err(err),
    }
    Ok(latest - found)
}

/// What a migration step throws when the stored version is no longer the
/// one it starts from: another replica migrated in between.
const VERSION_MOVED_ON: &str = "the schema version moved on while migrating";

fn lost_to_another_migration(err: &DbError) -> bool {
    err.is_conflict() || matches!(err, DbError::Surreal(reason) if reason.contains(VERSION_MOVED_ON))
}

/// Runs steps `from + 1 ..= to` and records version `to`, as one
/// transaction, only while the stored version is still `from` (a replica
/// that read an older version never applies its steps over newer ones).
async fn run_steps(db: &Db, steps: &[&str], from: u32, to: u32) -> Result<(), DbError> {
    let mut transaction = format!(
        "BEGIN TRANSACTION;
         IF ((SELECT VALUE version FROM onyx_meta:schema)[0] ?? 0) != $from {{ THROW \"{VERSION_MOVED_ON}\"; }};\n"
    );
    for statements in &steps[from as usize..to as usize] {
        let statements = statements.trim_end();
        transaction.push_str(statements);
        transaction.push_str(if statements.ends_with(';') { "\n" } else { ";\n" });
    }
    transaction.push_str("UPSERT onyx_meta:schema SET version = $version;\nCOMMIT TRANSACTION;");
    db.execute(&transaction, json!({ "version": to, "from": from }))
        .await
        .map_err(|err| match err {
            DbError::Surreal(reason)
                if !super::error::is_conflict(&reason) && !reason.contains(VERSION_MOVED_ON) =>
            {
                DbError::Migration { from, to, reason }
            }
            other => other,
        })
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn connecting_does_not_migrate_and_reading_the_version_defines_nothing() {
        let db = Db::connect(&scratch_config()).await.unwrap();
        assert_eq!(db.schema_version().await.unwrap(), 0);
        assert_eq!(db.schema_version().await.unwrap(), 0, "still not migrated");
        db.migrate().await.unwrap();
        assert_eq!(db.schema_version().await.unwrap(), LATEST);
    }

    #[tokio::test]
    async fn replicas_migrating_one_database_at_once_all_start() {
        let db = Db::connect(&scratch_config()).await.unwrap();
        let all = futures::future::join_all((0..4).map(|_| db.migrate())).await;
        for result in all {
            result.unwrap();
        }
        assert_eq!(db.schema_version().await.unwrap(), LATEST);
    }

    #[tokio::test]
    async fn a_failing_migration_leaves_the_database_as_it_was_and_says_why() {
        let db = Db::connect(&scratch_config()).await.unwrap();
        let steps: &[&str] = &[
            "DEFINE TABLE IF NOT EXISTS note SCHEMALESS;",
            "DEFINE TABLE IF NOT EXISTS label SCHEMALESS; UPDATE note SET seen = true;",
            "UPDATE note SET version = 3; THROW 'deliberately broken step';",
        ];
        assert_eq!(apply(&db, &steps[..1]).await.unwrap(), 1);
        db.execute(
            "CREATE note:kept SET text = 'stored before the upgrade'",
            json!({}),
        )
        .await
        .unwrap();
        let err = apply(&db, steps).await.unwrap_err();
        let message = err.to_string();
        assert!(message.contains("deliberately broken step"), "{message}");
        assert!(
            message.contains("from schema version 1 to 3") && message.contains("nothing was changed"),
            "{message}"
        );
        assert_eq!(db.schema_version().await.unwrap(), 1, "the version did not move");
        let notes: Vec<serde_json::Value> = db.rows("SELECT * FROM note", json!({}), 0).await.unwrap();
        assert_eq!(notes.len(), 1);
        assert_eq!(notes[0]["text"], "stored before the upgrade");
        assert!(notes[0].get("seen").is_none(), "step 2 rolled back: {notes:?}");
        assert!(notes[0].get("version").is_none(), "{notes:?}");
        let tables: Vec<serde_json::Value> = db.rows("INFO FOR DB", json!({}), 0).await.unwrap();
        assert!(
            tables[0]["tables"].get("label").is_none(),
            "step 2's table rolled back: {tables:?}"
        );
        // Fixed, the same steps apply, and applying again does nothing.
        let fixed: &[&str] = &[steps[0], steps[1], "UPDATE note SET version = 3;"];
        assert_eq!(apply(&db, fixed).await.unwrap(), 2);
        assert_eq!(apply(&db, fixed).await.unwrap(), 0);
        let notes: Vec<serde_json::Value> = db.rows("SELECT * FROM note", json!({}), 0).await.unwrap();
        assert_eq!(
            (notes[0]["seen"].clone(), notes[0]["version"].clone()),
            (json!(true), json!(3))
        );
    }

    #[tokio::test]
    async fn steps_that_conflict_in_one_transaction_apply_one_by_one() {
        let db = Db::connect(&scratch_config()).await.unwrap();
        let steps: &[&str] = &[
            "DEFINE ANALYZER IF NOT EXISTS az TOKENIZERS blank FILTERS lowercase;
             DEFINE TABLE IF NOT EXISTS doc SCHEMALESS;
             DEFINE INDEX IF NOT EXISTS doc_body ON doc FIELDS body FULLTEXT ANALYZER az BM25(1.2,0.75);",
            "REMOVE INDEX IF EXISTS doc_body ON doc; DEFINE TABLE IF NOT EXISTS kept SCHEMALESS;",
        ];
        assert_eq!(apply(&db, steps).await.unwrap(), 2);
        assert_eq!(db.schema_version().await.unwrap(), 2);
        assert_eq!(apply(&db, steps).await.unwrap(), 0);
    }

    #[tokio::test]
    async fn version_12_counts_old_usage_records_and_gives_back_old_reservations() {
        let db = Db::connect(&scratch_config()).await.unwrap();
        db.execute("DEFINE TABLE IF NOT EXISTS onyx_meta SCHEMALESS", json!({}))
            .await
            .unwrap();
        for (index, statements) in MIGRATIONS.iter().enumerate().take(11) {
            db.execute(statements, json!({})).await.unwrap();
            db.execute(
                "UPSERT onyx_meta:schema SET version = $v",
                json!({"v": index + 1}),
            )
            .await
            .unwrap();
        }
        db.execute(
            "CREATE usage_record SET priced = true, priced_usd = 0.5;
             CREATE usage_record SET priced = false, priced_usd = 0;
             CREATE usage_window:w SET usd = 1.0, reserved_usd = 0.25, tokens = 0, reserved_tokens = 30;
             CREATE usage_reservation:r SET windows = ['w'], usd = 0.25, tokens = 30;",
            json!({}),
        )
        .await
        .unwrap();
        db.migrate().await.unwrap();
        let sums: Vec<serde_json::Value> = db
            .rows(
                "SELECT math::sum(requests) AS requests, math::sum(priced_requests) AS priced FROM usage_record GROUP ALL",
                json!({}),
                0,
            )
            .await
            .unwrap();
        assert_eq!(sums[0]["requests"], 2, "{sums:?}");
        assert_eq!(sums[0]["priced"], 1, "{sums:?}");
        let window: Vec<serde_json::Value> = db
            .rows(
                "SELECT reserved_usd, reserved_tokens FROM usage_window:w",
                json!({}),
                0,
            )
            .await
            .unwrap();
        assert_eq!(window[0]["reserved_usd"], 0.0, "{window:?}");
        assert_eq!(window[0]["reserved_tokens"], 0, "{window:?}");
        let left: Vec<serde_json::Value> = db
            .rows("SELECT * FROM usage_reservation", json!({}), 0)
            .await
            .unwrap();
        assert!(left.is_empty());
    }
}
