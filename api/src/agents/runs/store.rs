//! Agent runs in SurrealDB (`agent_run`): one row a run, written when it
//! starts and when it ends. A running row carries the replica working on it
//! and a lease that replica keeps renewing; a row whose lease ran out belongs
//! to a replica that died, and is marked `interrupted` by whichever replica
//! sweeps first (the conditional update lets exactly one of them have it).
//! The writes retry on SurrealDB's write conflicts: a run's end and its
//! replica's lease renewal touch the same row, and a lost end would leave
//! the run to be swept as interrupted.

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::clock::{now_stamp, stamp};
use crate::sessions::LogMessage;
use crate::storage::{Db, DbError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS), ts(rename = "AgentRunStatus"))]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Running,
    Succeeded,
    Failed,
    Cancelled,
    /// Its replica stopped (crash, kill, power) before it ended.
    Interrupted,
}

impl RunStatus {
    pub fn parse(text: &str) -> Option<Self> {
        serde_json::from_value(json!(text)).ok()
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::Interrupted => "interrupted",
        }
    }
}

/// One agent run as the API shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct AgentRun {
    pub id: String,
    pub agent: String,
    pub session: Option<String>,
    /// Where it was started: `api`, `ui`, `telegram:…`, `discord:…`, `task`, `inbox`.
    pub source: String,
    pub model: String,
    pub status: RunStatus,
    pub started_at: String,
    pub finished_at: Option<String>,
    #[serde(default)]
    pub prompt_tokens: u64,
    #[serde(default)]
    pub completion_tokens: u64,
    #[serde(default)]
    pub tools_used: Vec<String>,
    #[serde(default)]
    pub iterations: u32,
    /// Why it failed, as a client may see it.
    pub error: Option<String>,
    /// The replica that ran (or runs) it.
    pub replica: String,
}

impl AgentRun {
    /// A run starting now on this replica, with a new id.
    pub fn starting(agent: &str, session: Option<&str>, source: &str, model: String) -> Self {
        Self {
            id: uuid::Uuid::now_v7().hyphenated().to_string(),
            agent: agent.into(),
            session: session.map(String::from),
            source: source.into(),
            model,
            status: RunStatus::Running,
            started_at: crate::clock::now_stamp(),
            finished_at: None,
            prompt_tokens: 0,
            completion_tokens: 0,
            tools_used: Vec::new(),
            iterations: 0,
            error: None,
            replica: crate::replica::id().to_string(),
        }
    }
}

const FIELDS: &str = "key AS id, agent, session, source, model, status, started_at, finished_at, \
                      prompt_tokens, completion_tokens, tools_used, iterations, error, replica";

/// What a finished run reports.
pub struct Ending<'a> {
    pub status: RunStatus,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub tools_used: &'a [String],
    pub iterations: u32,
    pub error: Option<String>,
}

/// A run found with its lease run out, and what its session needs to show it.
#[derive(Debug, Deserialize)]
pub struct Orphan {
    pub id: String,
    pub agent: String,
    pub session: Option<String>,
    /// The client's messages of the turn it was answering.
    #[serde(default)]
    pub turn: Vec<LogMessage>,
}

/// Filters of `GET /v1/runs`.
#[derive(Debug, Default)]
pub struct RunFilter {
    pub agent: Option<String>,
    pub status: Option<RunStatus>,
    pub session: Option<String>,
    pub limit: usize,
}

#[derive(Clone)]
pub struct RunStore {
    db: Db,
}

impl RunStore {
    pub fn new(db: Db) -> Self {
        Self { db }
    }

    /// Records a run as started, leased to this replica until `lease_until`.
    pub async fn start(&self, run: &AgentRun, turn: &[LogMessage], lease_until: &str) -> Result<(), DbError> {
        self.db
            .execute_retrying(
                "CREATE type::record('agent_run', $run.id) CONTENT {
                     key: $run.id, agent: $run.agent, session: $run.session, source: $run.source,
                     model: $run.model, status: 'running', started_at: $run.started_at,
                     finished_at: NONE, prompt_tokens: 0, completion_tokens: 0, tools_used: [],
                     iterations: 0, error: NONE, replica: $run.replica, lease_until: $until,
                     cancel_requested: false, turn: $turn
                 }",
                json!({ "run": run, "turn": turn, "until": lease_until }),
            )
            .await?;
        Ok(())
    }

    /// Records how a run ended, unless another replica already marked it
    /// interrupted. `false` when the row was no longer running.
    pub async fn finish(&self, id: &str, ending: &Ending<'_>) -> Result<bool, DbError> {
        let rows: Vec<serde_json::Value> = self
            .db
            .rows_retrying(
                "UPDATE type::record('agent_run', $id) SET status = $status, finished_at = $now,
                     prompt_tokens = $prompt, completion_tokens = $completion, tools_used = $tools,
                     iterations = $iterations, error = $error, lease_until = NONE, turn = NONE
                 WHERE status = 'running' RETURN key",
                json!({
                    "id": id, "status": ending.status, "now": now_stamp(),
                    "prompt": ending.prompt_tokens, "completion": ending.completion_tokens,
                    "tools": ending.tools_used, "iterations": ending.iterations, "error": ending.error,
                }),
                0,
            )
            .await?;
        Ok(!rows.is_empty())
    }

    pub async fn get(&self, id: &str) -> Result<Option<AgentRun>, DbError> {
        let sql = format!("SELECT {FIELDS} FROM type::record('agent_run', $id)");
        Ok(self
            .db
            .rows(&sql, json!({ "id": id }), 0)
            .await?
            .into_iter()
            .next())
    }

    /// Newest first.
    pub async fn list(&self, filter: &RunFilter) -> Result<Vec<AgentRun>, DbError> {
        let mut conditions = Vec::new();
        if filter.agent.is_some() {
            conditions.push("agent = $agent");
        }
        if filter.status.is_some() {
            conditions.push("status = $status");
        }
        if filter.session.is_some() {
            // `$session` is reserved in SurrealQL.
            conditions.push("session = $session_id");
        }
        let filter_sql = if conditions.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", conditions.join(" AND "))
        };
        let sql =
            format!("SELECT {FIELDS} FROM agent_run {filter_sql} ORDER BY started_at DESC LIMIT $limit");
        self.db
            .rows_retrying(
                &sql,
                json!({
                    "agent": filter.agent, "status": filter.status, "session_id": filter.session,
                    "limit": filter.limit,
                }),
                0,
            )
            .await
    }

    /// Asks the replica running `id` to stop it (it looks at every lease
    /// renewal). `false` when the run is not running.
    pub async fn request_cancel(&self, id: &str) -> Result<bool, DbError> {
        let rows: Vec<serde_json::Value> = self
            .db
            .rows_retrying(
                "UPDATE type::record('agent_run', $id) SET cancel_requested = true
                 WHERE status = 'running' RETURN key",
                json!({ "id": id }),
                0,
            )
            .await?;
        Ok(!rows.is_empty())
    }

    /// Extends the leases of this replica's running runs; returns the ids of
    /// those someone asked to cancel.
    pub async fn renew(
        &self,
        ids: &[String],
        replica: &str,
        lease_until: &str,
    ) -> Result<Vec<String>, DbError> {
        #[derive(Deserialize)]
        struct Row {
            key: String,
            cancel_requested: Option<bool>,
        }
        let rows: Vec<Row> = self
            .db
            .rows(
                "UPDATE agent_run SET lease_until = $until
                 WHERE key IN $ids AND replica = $replica AND status = 'running'
                 RETURN key, cancel_requested",
                json!({ "ids": ids, "replica": replica, "until": lease_until }),
                0,
            )
            .await?;
        Ok(rows
            .into_iter()
            .filter(|r| r.cancel_requested == Some(true))
            .map(|r| r.key)
            .collect())
    }

    /// Marks running rows whose lease ran out before `now` as interrupted and
    /// returns them; a row another replica marked first is not returned.
    pub async fn interrupt_expired(
        &self,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<Orphan>, DbError> {
        #[derive(Deserialize)]
        struct Key {
            key: String,
        }
        let now = stamp(now);
        let expired: Vec<Key> = self
            .db
            .rows(
                "SELECT key FROM agent_run WHERE status = 'running' AND lease_until < $now",
                json!({ "now": now }),
                0,
            )
            .await?;
        let mut orphans = Vec::new();
        for Key { key } in expired {
            let rows: Vec<Orphan> = self
                .db
                .rows_retrying(
                    "UPDATE type::record('agent_run', $id) SET status = 'interrupted', finished_at = $now,
                         error = 'the replica running it stopped before it ended', lease_until = NONE
                     WHERE status = 'running' AND lease_until < $now
                     RETURN key AS id, agent, session, turn",
                    json!({ "id": key, "now": now }),
                    0,
                )
                .await?;
            orphans.extend(rows);
        }
        Ok(orphans)
    }
}
