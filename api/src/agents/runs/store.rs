//! Agent runs in SurrealDB (`agent_run`): one row a run, written when it
//! starts and when it ends. A running row is held by the replica working on
//! it with a [`lease`](crate::lease) that replica keeps renewing, one small
//! write per run; a row whose lease lapsed belongs to a replica that died,
//! and is marked `interrupted` by whichever replica reaps it first (the
//! conditional update lets exactly one of them have it). A run's end and its
//! lease's renewal touch the same row: both retry on a write conflict.

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::clock::stamp;
use crate::lease::{self, Lease, Leases};
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

/// What a renewal hears back: whether someone asked to cancel the run.
#[derive(Debug, Deserialize)]
pub struct Renewed {
    #[serde(default)]
    pub cancel_requested: Option<bool>,
}

#[derive(Clone)]
pub struct RunStore {
    db: Db,
    leases: Leases,
}

impl RunStore {
    pub fn new(db: Db, leases: Leases) -> Self {
        Self { db, leases }
    }

    pub fn leases(&self) -> &Leases {
        &self.leases
    }

    /// Records a run as started, leased to its replica; the lease it holds.
    pub async fn start(&self, run: &AgentRun, turn: &[LogMessage]) -> Result<Lease, DbError> {
        let rows: Vec<Lease> = self
            .db
            .rows_retrying(
                &format!(
                    "CREATE type::record('agent_run', $run.id) SET
                         key = $run.id, agent = $run.agent, session = $run.session, source = $run.source,
                         model = $run.model, status = 'running', started_at = $run.started_at,
                         finished_at = NONE, prompt_tokens = 0, completion_tokens = 0, tools_used = [],
                         iterations = 0, error = NONE, replica = $run.replica,
                         cancel_requested = false, turn = $turn, {}
                     RETURN {}",
                    lease::CLAIM,
                    lease::FIELDS
                ),
                json!({ "run": run, "turn": turn, "lease": self.leases.offer(&run.replica) }),
                0,
            )
            .await?;
        rows.into_iter()
            .next()
            .ok_or_else(|| DbError::Decode("the new run's lease was not returned".into()))
    }

    /// Records how a run ended, unless another replica already marked it
    /// interrupted (its lease lapsed). `false` when the row was no longer running.
    pub async fn finish(&self, id: &str, held: &Lease, ending: &Ending<'_>) -> Result<bool, DbError> {
        let rows: Vec<serde_json::Value> = self
            .db
            .rows_retrying(
                &format!(
                    "UPDATE type::record('agent_run', $id) SET status = $status, finished_at = $now,
                         prompt_tokens = $prompt, completion_tokens = $completion, tools_used = $tools,
                         iterations = $iterations, error = $error, turn = NONE, {}
                     WHERE status = 'running' AND {} RETURN key",
                    lease::RELEASE,
                    lease::HELD
                ),
                json!({
                    "id": id, "status": ending.status, "now": stamp(self.leases.now()), "held": held,
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

    /// Extends one running run's lease (one small write, retried on a
    /// conflict); `None` when it no longer holds it.
    pub async fn renew(&self, id: &str, held: &Lease) -> Result<Option<Renewed>, DbError> {
        self.leases.renew(id, held, "cancel_requested").await
    }

    /// Marks running rows whose lease lapsed more than half a lease ago as
    /// interrupted and returns them; a row another replica marked first is not
    /// returned. The half-lease grace absorbs clocks that differ between
    /// replicas and a renewal delayed on a busy machine (the fencing token
    /// keeps a late holder from writing either way).
    pub async fn interrupt_expired(&self) -> Result<Vec<Orphan>, DbError> {
        let now = stamp(self.leases.now());
        let grace = self.leases.term() / 2;
        let cutoff = self.leases.cutoff(grace);
        let mut orphans = Vec::new();
        for lapsed in self.leases.lapsed_by(grace, "status = 'running'").await? {
            let rows: Vec<Orphan> = self
                .db
                .rows_retrying(
                    &format!(
                        "UPDATE type::record('agent_run', $id) SET status = 'interrupted', finished_at = $finished,
                             error = 'the replica running it stopped before it ended', {}
                         WHERE status = 'running' AND {}
                         RETURN key AS id, agent, session, turn",
                        lease::RELEASE,
                        lease::LAPSED
                    ),
                    // `LAPSED` compares with `$now`: the cutoff, for the grace.
                    json!({ "id": lapsed.key, "finished": now, "now": cutoff, "held": lapsed.lease }),
                    0,
                )
                .await?;
            orphans.extend(rows);
        }
        Ok(orphans)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::clock::{ManualClock, SharedClock};

    async fn store(clock: SharedClock) -> RunStore {
        let db = Db::scratch().await;
        RunStore::new(
            db.clone(),
            Leases::new(db, "agent_run", Duration::from_secs(30), clock),
        )
    }

    fn ending(status: RunStatus) -> Ending<'static> {
        Ending {
            status,
            prompt_tokens: 1,
            completion_tokens: 2,
            tools_used: &[],
            iterations: 1,
            error: None,
        }
    }

    /// Time moves by the clock, not by sleeping: a renewed run is never
    /// reaped; one whose replica stopped renewing is, once, and its late end
    /// is not recorded over the interruption.
    #[tokio::test]
    async fn a_run_is_interrupted_only_once_its_lease_lapses_by_the_clock() {
        let clock = ManualClock::at(crate::clock::parse_stamp("2026-11-27T09:00:00Z").unwrap());
        let store = store(clock.clone()).await;
        let run = AgentRun::starting("main", Some("s1"), "api", "openai/fake".into());
        let turn = [LogMessage::plain("user", "hello")];
        let held = store.start(&run, &turn).await.unwrap();
        assert_eq!((held.token, held.owner.as_str()), (1, run.replica.as_str()));

        for _ in 0..5 {
            clock.advance(Duration::from_secs(25));
            let renewed = store.renew(&run.id, &held).await.unwrap().unwrap();
            assert_eq!(renewed.cancel_requested, Some(false));
            assert!(
                store.interrupt_expired().await.unwrap().is_empty(),
                "renewed in time"
            );
        }
        assert!(store.request_cancel(&run.id).await.unwrap());
        let renewed = store.renew(&run.id, &held).await.unwrap().unwrap();
        assert_eq!(
            renewed.cancel_requested,
            Some(true),
            "a cancel is heard at renewal"
        );

        clock.advance(Duration::from_secs(31));
        assert!(
            store.interrupt_expired().await.unwrap().is_empty(),
            "lapsed, but within the half-lease grace"
        );
        clock.advance(Duration::from_secs(15));
        let orphans = store.interrupt_expired().await.unwrap();
        assert_eq!(orphans.len(), 1);
        assert_eq!(
            (orphans[0].id.as_str(), orphans[0].turn.len()),
            (run.id.as_str(), 1)
        );
        assert!(store.interrupt_expired().await.unwrap().is_empty(), "once");
        assert!(
            store.renew(&run.id, &held).await.unwrap().is_none(),
            "the lease is gone"
        );
        assert!(
            !store
                .finish(&run.id, &held, &ending(RunStatus::Succeeded))
                .await
                .unwrap()
        );
        let record = store.get(&run.id).await.unwrap().unwrap();
        assert_eq!(record.status, RunStatus::Interrupted);
    }

    /// Many runs renewed at once while half of them end: every renewal is its
    /// own write, so none fails on another's conflict, and every end lands.
    #[tokio::test]
    async fn renewals_of_many_runs_never_lose_to_runs_ending() {
        let store = store(crate::clock::system()).await;
        let mut started = Vec::new();
        for i in 0..40 {
            let run = AgentRun::starting("main", None, "api", format!("m{i}"));
            let held = store.start(&run, &[]).await.unwrap();
            started.push((run, held));
        }
        let renewals = started.iter().map(|(run, held)| store.renew(&run.id, held));
        let succeeded = ending(RunStatus::Succeeded);
        let ends = started
            .iter()
            .step_by(2)
            .map(|(run, held)| store.finish(&run.id, held, &succeeded));
        let (renewed, ended) = tokio::join!(
            futures::future::join_all(renewals),
            futures::future::join_all(ends)
        );
        assert!(ended.into_iter().all(|e| e.unwrap()), "every end recorded");
        for (i, result) in renewed.into_iter().enumerate() {
            let renewed = result.unwrap();
            if i % 2 == 1 {
                assert!(renewed.is_some(), "run {i} still running and renewed");
            }
        }
        let filter = RunFilter {
            status: Some(RunStatus::Running),
            limit: 100,
            ..RunFilter::default()
        };
        assert_eq!(store.list(&filter).await.unwrap().len(), 20);
    }
}
