//! Agent runs in SurrealDB (`agent_run`): one row a run, written when it
//! starts and when it ends. A running row is held by the replica working on
//! it with a [`lease`](crate::lease) that replica keeps renewing, one small
//! write per run; a row whose lease lapsed belongs to a replica that died,
//! and is marked `interrupted` by whichever replica reaps it first (the
//! conditional update lets exactly one of them have it). A run's end and its
//! lease's renewal touch the same row: both retry on a write conflict.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::clock::stamp;
use crate::lease::{self, Lease, Leases, Renewals};
use crate::sessions::LogMessage;
use crate::storage::{Db, DbError};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "AgentRunStatus")]
#[cfg_attr(test, derive(ts_rs::TS), ts(rename = "AgentRunStatus"))]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Running,
    Succeeded,
    Failed,
    Cancelled,
    /// Its replica stopped (crash, kill, power) before it ended.
    Interrupted,
    /// A status this version does not know (a newer replica wrote it): read
    /// back and shown as stored, never rewritten. (Not in the UI's types:
    /// it shows any other status as it comes.)
    #[serde(untagged)]
    #[cfg_attr(test, ts(skip))]
    Unknown(String),
}

impl RunStatus {
    /// A status a client names (a filter): one this version knows.
    pub fn parse(text: &str) -> Option<Self> {
        serde_json::from_value(json!(text))
            .ok()
            .filter(|status| !matches!(status, Self::Unknown(_)))
    }

    pub fn as_str(&self) -> &str {
        match self {
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::Interrupted => "interrupted",
            Self::Unknown(status) => status,
        }
    }
}

/// One agent run as the API shows it.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
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

/// A cancel asked on another replica is heard at the next renewal: renewals
/// come at least this often, however long the lease.
const HEAR_CANCELS_WITHIN: Duration = Duration::from_secs(1);

#[derive(Clone)]
pub struct RunStore {
    db: Db,
    leases: Leases,
    /// Renews the leases of the runs going on this replica, hearing cancels.
    renewals: Arc<Renewals<Renewed>>,
}

impl RunStore {
    /// `leases` on their own connection ([`Db::dedicated`]), so renewals do
    /// not queue behind the replica's other queries.
    pub fn new(db: Db, leases: Leases) -> Self {
        Self {
            db,
            renewals: Renewals::every(leases.clone(), "cancel_requested", HEAR_CANCELS_WITHIN),
            leases,
        }
    }

    pub fn leases(&self) -> &Leases {
        &self.leases
    }

    /// The renewals of this replica's run leases (the loop is `Runs::upkeep`'s).
    pub fn renewals(&self) -> &Arc<Renewals<Renewed>> {
        &self.renewals
    }

    /// Records a run as started, leased to its replica; the lease it holds.
    pub async fn start(&self, run: &AgentRun, turn: &[LogMessage]) -> Result<Lease, DbError> {
        let _claim = self.leases.time_claim();
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

    /// Marks running rows whose lease lapsed (past the lease's grace) as
    /// interrupted and returns them; a row another replica marked first is not
    /// returned (the fencing token keeps a late holder from writing either way).
    pub async fn interrupt_expired(&self) -> Result<Vec<Orphan>, DbError> {
        let now = stamp(self.leases.now());
        let cutoff = self.leases.reap_cutoff();
        let mut orphans = Vec::new();
        for lapsed in self.renewals.lapsed("status = 'running'").await? {
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
    use crate::providers::types::Role;

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
    /// reaped, nor one this replica still holds; one whose replica stopped
    /// renewing is, once past the grace, and its late end is not recorded
    /// over the interruption.
    #[tokio::test]
    async fn a_run_is_interrupted_only_once_its_lease_lapses_by_the_clock() {
        let clock = ManualClock::at(crate::clock::parse_stamp("2026-11-27T09:00:00Z").unwrap());
        let store = store(clock.clone()).await;
        let run = AgentRun::starting("main", Some("s1"), "api", "openai/fake".into());
        let turn = [LogMessage::plain(Role::User, "hello")];
        let held = store.start(&run, &turn).await.unwrap();
        assert_eq!((held.token, held.owner.as_str()), (1, run.replica.as_str()));
        let heard = Arc::new(std::sync::Mutex::new(Vec::new()));
        let hearing = heard.clone();
        let holding = store
            .renewals()
            .hold_hearing(&run.id, held.clone(), move |heard| {
                if let lease::Heard::Renewed(renewed) = heard {
                    hearing.lock().unwrap().push(renewed.cancel_requested);
                }
            });

        for _ in 0..5 {
            clock.advance(Duration::from_secs(25));
            store.renewals().renew_all().await;
            assert!(
                store.interrupt_expired().await.unwrap().is_empty(),
                "renewed in time"
            );
        }
        assert!(store.request_cancel(&run.id).await.unwrap());
        store.renewals().renew_all().await;
        assert_eq!(
            heard.lock().unwrap().as_slice(),
            [[Some(false)].repeat(5), vec![Some(true)]].concat(),
            "a cancel is heard at renewal"
        );

        // A second run this replica holds but whose renewals do not land (a
        // busy database): lapsed far past the grace, it is still not reaped here.
        let other = AgentRun::starting("main", None, "api", "openai/fake".into());
        let other_held = store.start(&other, &[]).await.unwrap();
        let _other_holding = store.renewals().hold(&other.id, other_held);
        drop(holding);
        clock.advance(Duration::from_secs(31));
        assert!(
            store.interrupt_expired().await.unwrap().is_empty(),
            "lapsed, but within the half-lease grace"
        );
        clock.advance(Duration::from_secs(15));
        let orphans = store.interrupt_expired().await.unwrap();
        assert_eq!(orphans.len(), 1, "only the run no longer held here");
        assert_eq!(
            (orphans[0].id.as_str(), orphans[0].turn.len()),
            (run.id.as_str(), 1)
        );
        assert!(store.interrupt_expired().await.unwrap().is_empty(), "once");
        let late = store.renewals().hold(&run.id, held.clone());
        store.renewals().renew_all().await;
        assert!(late.is_lost(), "the lease is gone");
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
            let holding = store.renewals().hold(&run.id, held.clone());
            started.push((run, held, holding));
        }
        let succeeded = ending(RunStatus::Succeeded);
        let ends = started
            .iter()
            .step_by(2)
            .map(|(run, held, _)| store.finish(&run.id, held, &succeeded));
        let ((), ended) = tokio::join!(store.renewals().renew_all(), futures::future::join_all(ends));
        assert!(ended.into_iter().all(|e| e.unwrap()), "every end recorded");
        for (i, (_, _, holding)) in started.iter().enumerate() {
            if i % 2 == 1 {
                assert!(!holding.is_lost(), "run {i} still running and renewed");
            }
        }
        let filter = RunFilter {
            status: Some(RunStatus::Running),
            limit: 100,
            ..RunFilter::default()
        };
        assert_eq!(store.list(&filter).await.unwrap().len(), 20);
    }

    /// A status written by a newer version reads back as it was stored and is
    /// listed and shown as such; the sweep and the filters leave it alone.
    #[tokio::test]
    async fn an_unknown_stored_status_reads_back_as_stored() {
        let store = store(crate::clock::system()).await;
        let run = AgentRun::starting("main", None, "api", "openai/fake".into());
        store.start(&run, &[]).await.unwrap();
        store
            .db
            .execute_retrying(
                "UPDATE type::record('agent_run', $id) SET status = 'paused-by-v9'",
                json!({ "id": run.id }),
            )
            .await
            .unwrap();
        let record = store.get(&run.id).await.unwrap().unwrap();
        assert_eq!(record.status, RunStatus::Unknown("paused-by-v9".into()));
        assert_eq!(record.status.as_str(), "paused-by-v9");
        assert_eq!(serde_json::to_value(&record).unwrap()["status"], "paused-by-v9");
        let listed = store
            .list(&RunFilter {
                limit: 10,
                ..RunFilter::default()
            })
            .await
            .unwrap();
        assert_eq!(listed.len(), 1, "the list still reads");
        assert_eq!(RunStatus::parse("paused-by-v9"), None, "not a filter");
        assert_eq!(RunStatus::parse("running"), Some(RunStatus::Running));
        assert!(store.interrupt_expired().await.unwrap().is_empty());
        assert!(
            !store
                .finish(
                    &run.id,
                    &Lease {
                        owner: run.replica.clone(),
                        token: 1,
                        until: String::new()
                    },
                    &ending(RunStatus::Succeeded)
                )
                .await
                .unwrap(),
            "only a running row is finished"
        );
        assert_eq!(
            store.get(&run.id).await.unwrap().unwrap().status.as_str(),
            "paused-by-v9"
        );
    }
}
