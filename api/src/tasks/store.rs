//! Tasks and their run records in SurrealDB. A run holds its task with a
//! [`lease`](crate::lease): claiming is one conditional `UPDATE` per task
//! (plus the run record, in the same transaction), so when several replicas
//! race for a due task exactly one of them gets it; the run's end is written
//! only under the lease it claimed (its fencing token). While it runs, the
//! lease module's [`Renewals`] keep the lease alive.

use std::sync::Arc;

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::schedule::ScheduleType;
use crate::lease::{self, Lease, Leases, Renewals};
use crate::storage::{Db, DbError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum ContextMode {
    /// A fresh session per run.
    Isolated,
    /// The agent's main session, history included.
    Main,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum TaskStatus {
    Active,
    Paused,
    Completed,
    Failed,
    /// A status this version does not know (a newer replica wrote it): read
    /// back and shown as stored, never rewritten. (Not in the UI's types:
    /// it shows any other status as it comes.)
    #[serde(untagged)]
    #[cfg_attr(test, ts(skip))]
    Unknown(String),
}

impl TaskStatus {
    /// A status a client names (a filter): one this version knows.
    pub fn parse(text: &str) -> Option<Self> {
        serde_json::from_value(json!(text))
            .ok()
            .filter(|status| !matches!(status, Self::Unknown(_)))
    }

    pub fn as_str(&self) -> &str {
        match self {
            Self::Active => "active",
            Self::Paused => "paused",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Unknown(status) => status,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum TaskKind {
    /// Made through the API or an agent's `schedule_task`.
    Task,
    /// An agent's `heartbeat.every` from config.
    Heartbeat,
}

/// A scheduled task as stored (`key` is its id).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Task {
    #[serde(rename = "key")]
    pub id: String,
    pub agent: String,
    pub name: String,
    pub prompt: String,
    pub kind: TaskKind,
    pub schedule_type: ScheduleType,
    pub schedule_value: String,
    pub timezone: String,
    pub context_mode: ContextMode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deliver_to: Option<String>,
    pub status: TaskStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_run: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(default)]
    pub consecutive_failures: u32,
    pub created_at: String,
    pub updated_at: String,
    pub created_by: String,
    /// The replica running it now, until when, and which run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_until: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_run: Option<String>,
    /// The lease's fencing token (one higher at every claim).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_token: Option<u64>,
}

impl Task {
    /// The lease a run holds on this task, when one does.
    pub fn lease(&self) -> Option<Lease> {
        Some(Lease {
            owner: self.lease_owner.clone()?,
            token: self.lease_token?,
            until: self.lease_until.clone()?,
        })
    }
}

const TASK_FIELDS: &str = "key, agent, name, prompt, kind, schedule_type, schedule_value, timezone, context_mode, \
    deliver_to, status, next_run, last_run, last_status, last_error, consecutive_failures, created_at, updated_at, \
    created_by, lease_owner, lease_until, lease_run, lease_token";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "RunStatus")]
#[cfg_attr(test, derive(ts_rs::TS), ts(rename = "RunStatus"))]
#[serde(rename_all = "lowercase")]
pub enum TaskRunStatus {
    Running,
    Succeeded,
    Failed,
    Skipped,
    /// A status this version does not know (a newer replica wrote it): read
    /// back and shown as stored, never rewritten. (Not in the UI's types:
    /// it shows any other status as it comes.)
    #[serde(untagged)]
    #[cfg_attr(test, ts(skip))]
    Unknown(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "Trigger")]
#[cfg_attr(test, derive(ts_rs::TS), ts(rename = "Trigger"))]
#[serde(rename_all = "kebab-case")]
pub enum TaskTrigger {
    Schedule,
    /// `POST /v1/tasks/{id}/run`.
    Manual,
    /// The one run made up for occurrences missed while no replica was up.
    CatchUp,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Tokens {
    pub prompt: u64,
    pub completion: u64,
    pub total: u64,
}

/// One run of a task (`key` is its id).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskRun {
    #[serde(rename = "key")]
    pub id: String,
    pub task: String,
    pub agent: String,
    pub trigger: TaskTrigger,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_for: Option<String>,
    pub started_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    pub status: TaskRunStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default)]
    pub tokens: Tokens,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub replica: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_error: Option<String>,
}

const RUN_FIELDS: &str = "key, task, agent, trigger, scheduled_for, started_at, finished_at, status, result, error, \
    tokens, session_id, replica, delivered_to, delivery_error";

/// How a claimed run ended, for the task's own fields.
pub struct RunSettlement {
    pub last_status: TaskRunStatus,
    pub last_error: Option<String>,
    pub next_run: Option<String>,
    /// A new status (completed, paused, failed); `None` keeps the current one,
    /// so a pause made while the run was going is not undone.
    pub status: Option<TaskStatus>,
    pub consecutive_failures: u32,
}

#[derive(Clone)]
pub struct TaskStore {
    db: Db,
    leases: Leases,
    /// Renews the leases of the runs going on this replica.
    renewals: Arc<Renewals<IgnoredAny>>,
}

fn first<T>(rows: Vec<T>) -> Option<T> {
    rows.into_iter().next()
}

/// Where a `BEGIN; …; RETURN $x; COMMIT;` query's `RETURN` result is: the
/// statement before `COMMIT`.
fn returned(response: &surrealdb::IndexedResults) -> usize {
    response.num_statements().saturating_sub(2)
}

/// A statement's result as rows (`NONE` is no rows, one object is one row).
fn decode<T: serde::de::DeserializeOwned>(value: surrealdb::types::Value) -> Result<Vec<T>, DbError> {
    let rows = match value.into_json_value() {
        Value::Null => Value::Array(Vec::new()),
        Value::Array(rows) => Value::Array(rows),
        other => Value::Array(vec![other]),
    };
    serde_json::from_value(rows).map_err(|e| DbError::Decode(e.to_string()))
}

impl TaskStore {
    /// `leases` on their own connection ([`Db::dedicated`]), so renewals do
    /// not queue behind the replica's other queries.
    pub fn new(db: Db, leases: Leases) -> Self {
        Self {
            db,
            renewals: Renewals::new(leases.clone(), "key"),
            leases,
        }
    }

    pub fn leases(&self) -> &Leases {
        &self.leases
    }

    /// The renewals of this replica's task-run leases (a run holds its lease
    /// there while it runs; the loop is the app's to spawn).
    pub fn renewals(&self) -> &Arc<Renewals<IgnoredAny>> {
        &self.renewals
    }

    pub async fn create(&self, task: &Task) -> Result<(), DbError> {
        self.db
            .execute_retrying(
                "CREATE type::record('task', $task.key) CONTENT $task",
                json!({ "task": task }),
            )
            .await?;
        Ok(())
    }

    /// Writes a task's editable fields; its lease and run bookkeeping stay.
    pub async fn save(&self, task: &Task) -> Result<Option<Task>, DbError> {
        let rows = self
            .db
            .rows(
                &format!(
                    "UPDATE type::record('task', $t.key) SET name = $t.name, prompt = $t.prompt,
                     schedule_type = $t.schedule_type, schedule_value = $t.schedule_value,
                     timezone = $t.timezone, context_mode = $t.context_mode, deliver_to = $t.deliver_to,
                     status = $t.status, next_run = $t.next_run, consecutive_failures = $t.consecutive_failures,
                     updated_at = $t.updated_at
                     RETURN {TASK_FIELDS}"
                ),
                json!({ "t": task }),
                0,
            )
            .await?;
        Ok(first(rows))
    }

    pub async fn get(&self, id: &str) -> Result<Option<Task>, DbError> {
        let rows = self
            .db
            .rows(
                &format!("SELECT {TASK_FIELDS} FROM type::record('task', $id)"),
                json!({ "id": id }),
                0,
            )
            .await?;
        Ok(first(rows))
    }

    pub async fn list(&self, agent: Option<&str>, status: Option<TaskStatus>) -> Result<Vec<Task>, DbError> {
        let mut filters = Vec::new();
        if agent.is_some() {
            filters.push("agent = $agent");
        }
        if status.is_some() {
            filters.push("status = $status");
        }
        let filter = if filters.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", filters.join(" AND "))
        };
        self.db
            .rows(
                &format!("SELECT {TASK_FIELDS} FROM task {filter} ORDER BY created_at"),
                json!({ "agent": agent, "status": status }),
                0,
            )
            .await
    }

    /// Deletes a task and its run history.
    pub async fn delete(&self, id: &str) -> Result<bool, DbError> {
        let rows: Vec<Value> = self
            .db
            .rows(
                "DELETE type::record('task', $id) RETURN BEFORE; DELETE task_run WHERE task = $id;",
                json!({ "id": id }),
                0,
            )
            .await?;
        Ok(!rows.is_empty())
    }

    /// Active, unclaimed tasks due at `now`, earliest first.
    pub async fn due(&self, now: &str, limit: usize) -> Result<Vec<Task>, DbError> {
        self.db
            .rows(
                &format!(
                    "SELECT {TASK_FIELDS} FROM task WHERE status = 'active' AND next_run AND next_run <= $now AND !lease_run
                     ORDER BY next_run LIMIT $limit"
                ),
                json!({ "now": now, "limit": limit }),
                0,
            )
            .await
    }

    /// Claimed tasks whose lease lapsed (past its grace) by the clock: their
    /// replica died mid-run.
    pub async fn expired(&self) -> Result<Vec<Task>, DbError> {
        let mut tasks = Vec::new();
        for lapsed in self.renewals.lapsed("lease_run").await? {
            tasks.extend(self.get(&lapsed.key).await?);
        }
        Ok(tasks)
    }

    /// When the runner next has something to do: the earliest due time, or
    /// when the earliest lease end's grace runs out (it can be reaped then).
    pub async fn next_wake(&self) -> Result<Option<String>, DbError> {
        #[derive(Deserialize)]
        struct At {
            at: Option<String>,
        }
        let mut response = self
            .db
            .execute(
                "SELECT next_run AS at FROM task WHERE status = 'active' AND !lease_run AND next_run
                     ORDER BY at LIMIT 1;
                 SELECT lease_until AS at FROM task WHERE lease_run ORDER BY at LIMIT 1;",
                json!({}),
            )
            .await?;
        let due: Vec<At> = decode(response.take(0)?)?;
        let leased: Vec<At> = decode(response.take(1)?)?;
        let grace = chrono::Duration::from_std(self.leases.grace()).unwrap_or_default();
        let reapable = leased
            .into_iter()
            .filter_map(|r| crate::clock::parse_stamp(&r.at?))
            .map(|until| crate::clock::stamp(until + grace));
        Ok(due.into_iter().filter_map(|r| r.at).chain(reapable).min())
    }

    /// Takes a task for one run: only if nobody holds it and (for scheduled
    /// runs) it is still due at the time we saw. Creates the run record in the
    /// same transaction. `None`: another replica got there first.
    pub async fn claim(
        &self,
        task_id: &str,
        expected_next: Option<&str>,
        run: &TaskRun,
    ) -> Result<Option<Task>, DbError> {
        let due_check = if expected_next.is_some() {
            "AND status = 'active' AND next_run = $expected"
        } else {
            ""
        };
        let sql = format!(
            "BEGIN TRANSACTION;
             LET $claimed = (UPDATE type::record('task', $id)
                 SET lease_run = $run.key, {claim}
                 WHERE !lease_run {due_check} RETURN {TASK_FIELDS});
             IF array::len($claimed) > 0 {{ CREATE type::record('task_run', $run.key) CONTENT $run; }};
             RETURN $claimed;
             COMMIT TRANSACTION;",
            claim = lease::CLAIM
        );
        let _claim = self.leases.time_claim();
        let mut response = self
            .db
            .execute_retrying(
                &sql,
                json!({ "id": task_id, "expected": expected_next, "run": run, "lease": self.leases.offer(&run.replica) }),
            )
            .await?;
        Ok(first(decode(response.take(returned(&response))?)?))
    }

    /// Ends a claimed run: the run record and the task's bookkeeping together,
    /// and only while `held` (the run's lease) is still the task's. `false`:
    /// it was not. With `reaping`, only if that lease lapsed past its grace
    /// (by the clock).
    pub async fn settle(
        &self,
        task_id: &str,
        run: &TaskRun,
        settle: Option<&RunSettlement>,
        held: &Lease,
        reaping: bool,
    ) -> Result<bool, DbError> {
        let task_update = match settle {
            Some(_) => {
                "SET last_run = $run.started_at, last_status = $s.last_status, last_error = $s.last_error,
                 next_run = $s.next_run, status = $s.status ?? status, consecutive_failures = $s.failures,
                 lease_run = NONE, updated_at = $at, "
            }
            // A manual run leaves the schedule alone.
            None => {
                "SET last_run = $run.started_at, last_status = $run.status, last_error = $run.error,
                 lease_run = NONE, "
            }
        };
        let holder = if reaping { lease::LAPSED } else { lease::HELD };
        let sql = format!(
            "BEGIN TRANSACTION;
             LET $held = (UPDATE type::record('task', $id) {task_update}{release}
                 WHERE lease_run = $run.key AND {holder} RETURN key);
             IF array::len($held) > 0 {{ UPSERT type::record('task_run', $run.key) CONTENT $run; }};
             RETURN $held;
             COMMIT TRANSACTION;",
            release = lease::RELEASE
        );
        let vars = json!({
            "id": task_id,
            "run": run,
            "held": held,
            "at": crate::clock::stamp(self.leases.now()),
            // What `LAPSED` compares the lease's end with.
            "now": self.leases.reap_cutoff(),
            "s": settle.map(|s| json!({
                "last_status": s.last_status,
                "last_error": s.last_error,
                "next_run": s.next_run,
                "status": s.status,
                "failures": s.consecutive_failures,
            })),
        });
        let mut response = self.db.execute_retrying(&sql, vars).await?;
        let held: Vec<Value> = decode(response.take(returned(&response))?)?;
        Ok(!held.is_empty())
    }

    /// Every change to any task, from any replica.
    pub async fn changes(&self) -> Result<futures::stream::BoxStream<'static, ()>, DbError> {
        self.db.changes("task").await
    }

    pub async fn run(&self, id: &str) -> Result<Option<TaskRun>, DbError> {
        let rows = self
            .db
            .rows(
                &format!("SELECT {RUN_FIELDS} FROM type::record('task_run', $id)"),
                json!({ "id": id }),
                0,
            )
            .await?;
        Ok(first(rows))
    }

    /// A task's runs, newest first.
    pub async fn runs(&self, task_id: &str, limit: usize) -> Result<Vec<TaskRun>, DbError> {
        self.db
            .rows(
                &format!(
                    "SELECT {RUN_FIELDS} FROM task_run WHERE task = $task ORDER BY started_at DESC LIMIT $limit"
                ),
                json!({ "task": task_id, "limit": limit }),
                0,
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    async fn store() -> TaskStore {
        store_at(crate::clock::system()).await
    }

    async fn store_at(clock: crate::clock::SharedClock) -> TaskStore {
        let db = Db::scratch().await;
        TaskStore::new(
            db.clone(),
            Leases::new(db, "task", std::time::Duration::from_secs(60), clock),
        )
    }

    fn task(id: &str) -> Task {
        Task {
            id: id.into(),
            agent: "main".into(),
            name: "t".into(),
            prompt: "p".into(),
            kind: TaskKind::Task,
            schedule_type: ScheduleType::Interval,
            schedule_value: "1s".into(),
            timezone: "UTC".into(),
            context_mode: ContextMode::Isolated,
            deliver_to: None,
            status: TaskStatus::Active,
            next_run: Some("2026-01-01T00:00:00.000000Z".into()),
            last_run: None,
            last_status: None,
            last_error: None,
            consecutive_failures: 0,
            created_at: "2026-01-01T00:00:00.000000Z".into(),
            updated_at: "2026-01-01T00:00:00.000000Z".into(),
            created_by: "test".into(),
            lease_owner: None,
            lease_until: None,
            lease_run: None,
            lease_token: None,
        }
    }

    fn run(id: &str, replica: &str) -> TaskRun {
        TaskRun {
            id: id.into(),
            task: "t1".into(),
            agent: "main".into(),
            trigger: TaskTrigger::Schedule,
            scheduled_for: Some("2026-01-01T00:00:00.000000Z".into()),
            started_at: "2026-01-01T00:00:01.000000Z".into(),
            finished_at: None,
            status: TaskRunStatus::Running,
            result: None,
            error: None,
            tokens: Tokens::default(),
            session_id: None,
            replica: replica.into(),
            delivered_to: None,
            delivery_error: None,
        }
    }

    #[tokio::test]
    async fn racing_claims_give_a_due_task_to_exactly_one_replica() {
        let store = store().await;
        store.create(&task("t1")).await.unwrap();
        let due = store.due("2026-01-01T00:00:05.000000Z", 10).await.unwrap();
        assert_eq!(due.len(), 1);
        let claims = (0..8).map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .claim(
                        "t1",
                        Some("2026-01-01T00:00:00.000000Z"),
                        &run(&format!("r{i}"), &format!("replica{i}")),
                    )
                    .await
                    .unwrap()
            })
        });
        let won: Vec<Task> = futures::future::join_all(claims)
            .await
            .into_iter()
            .filter_map(|r| r.unwrap())
            .collect();
        assert_eq!(won.len(), 1, "{won:?}");
        let winner = won[0].lease_run.clone().unwrap();
        let held = won[0].lease().unwrap();
        assert_eq!(held.token, 1);
        assert_eq!(store.runs("t1", 10).await.unwrap().len(), 1);
        assert!(
            store
                .due("2026-01-01T00:00:05.000000Z", 10)
                .await
                .unwrap()
                .is_empty()
        );

        let holding = store.renewals().hold("t1", held.clone());
        store.renewals().renew_all().await;
        assert!(!holding.is_lost(), "renewed");
        let stranger = Lease {
            token: 7,
            ..held.clone()
        };
        let refused: Option<IgnoredAny> = store.leases().renew("t1", &stranger, "key").await.unwrap();
        assert!(refused.is_none(), "the token fences");
        drop(holding);
        let mut finished = store.run(&winner).await.unwrap().unwrap();
        finished.status = TaskRunStatus::Succeeded;
        let settle = RunSettlement {
            last_status: TaskRunStatus::Succeeded,
            last_error: None,
            next_run: Some("2026-01-01T00:00:10.000000Z".into()),
            status: None,
            consecutive_failures: 0,
        };
        assert!(
            !store
                .settle("t1", &run("stranger", "x"), Some(&settle), &held, false)
                .await
                .unwrap()
        );
        assert!(
            !store
                .settle("t1", &finished, Some(&settle), &held, true)
                .await
                .unwrap(),
            "a live lease is not reaped"
        );
        assert!(
            store
                .settle("t1", &finished, Some(&settle), &held, false)
                .await
                .unwrap()
        );
        let task = store.get("t1").await.unwrap().unwrap();
        assert_eq!((task.lease_run, task.status), (None, TaskStatus::Active));
        assert_eq!(task.next_run.as_deref(), Some("2026-01-01T00:00:10.000000Z"));
        assert_eq!(
            store.run(&winner).await.unwrap().unwrap().status,
            TaskRunStatus::Succeeded
        );
        assert_eq!(
            store.next_wake().await.unwrap().as_deref(),
            Some("2026-01-01T00:00:10.000000Z")
        );
    }

    /// A run's replica stops renewing: when the clock passes its lease the
    /// task is reaped once, and the next claim's token fences the old run out.
    #[tokio::test]
    async fn a_lapsed_task_lease_is_reaped_once_and_the_old_run_cannot_settle() {
        let clock = crate::clock::ManualClock::at(crate::clock::parse_stamp("2026-01-01T00:00:01Z").unwrap());
        let store = store_at(clock.clone()).await;
        store.create(&task("t1")).await.unwrap();
        let first = run("r1", "replica1");
        let claimed = store
            .claim("t1", Some("2026-01-01T00:00:00.000000Z"), &first)
            .await
            .unwrap()
            .unwrap();
        let held = claimed.lease().unwrap();
        assert_eq!(
            store.next_wake().await.unwrap().as_deref(),
            Some("2026-01-01T00:01:31.000000Z"),
            "the runner wakes when the lease can be reaped: its end and half a lease"
        );
        clock.advance(std::time::Duration::from_secs(59));
        assert!(store.expired().await.unwrap().is_empty(), "not yet lapsed");
        clock.advance(std::time::Duration::from_secs(2));
        assert!(
            store.expired().await.unwrap().is_empty(),
            "lapsed, within the grace"
        );
        assert!(
            !store.settle("t1", &first, None, &held, true).await.unwrap(),
            "not reaped within the grace"
        );
        clock.advance(std::time::Duration::from_secs(30));
        let expired = store.expired().await.unwrap();
        assert_eq!(expired.len(), 1);
        let mut failed = first.clone();
        failed.status = TaskRunStatus::Failed;
        assert!(store.settle("t1", &failed, None, &held, true).await.unwrap());
        assert!(
            !store.settle("t1", &failed, None, &held, true).await.unwrap(),
            "reaped once"
        );

        let second = store
            .claim("t1", None, &run("r2", "replica2"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(second.lease().unwrap().token, 2);
        // The first run wakes up late: its renewal and its end are refused.
        let late_holding = store.renewals().hold("t1", held.clone());
        store.renewals().renew_all().await;
        assert!(late_holding.is_lost());
        let mut late = first.clone();
        late.status = TaskRunStatus::Succeeded;
        assert!(!store.settle("t1", &late, None, &held, false).await.unwrap());
        assert_eq!(
            store.run("r1").await.unwrap().unwrap().status,
            TaskRunStatus::Failed
        );
    }
}
