//! The runner: sleeps until the earliest due task (or until a task changes),
//! claims what is due with a lease, runs the agent unattended, records the
//! run and moves the schedule on. A run whose replica died is found by its
//! expired lease, recorded as failed, and the task goes on.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;

use crate::agents::{AgentError, Agents, Thread, Turn, TurnError};
use crate::channels::{ChannelError, Channels};
use crate::clock::{parse_stamp, stamp};
use crate::config::HeartbeatConfig;
use crate::memory::Memory;
use crate::providers::Attribution;
use crate::providers::types::Message;
use crate::sessions::{LogMessage, SessionError, Sessions};
use crate::storage::{DbError, StoreError};
use crate::tasks::schedule::Schedule;
use crate::tasks::store::{
    ContextMode, RunSettlement, TaskKind, TaskRun, TaskRunStatus, TaskTrigger, Tokens,
};
use crate::tasks::{Task, TaskError, TaskStatus, Tasks};

/// Even with nothing due, look again this often, in case a change made on
/// another replica was missed (its live notification is the usual wake-up).
const MAX_SLEEP: Duration = Duration::from_secs(60);
/// The longest wait between retries of a failing task.
const MAX_BACKOFF: Duration = Duration::from_secs(3600);
const MAX_RESULT_CHARS: usize = 8_000;

pub struct Runner {
    pub tasks: Arc<Tasks>,
    agents: Arc<Agents>,
    sessions: Arc<Sessions>,
    memory: Arc<Memory>,
    channels: Arc<Channels>,
    /// Who holds a lease: this process, on this host.
    replica: String,
}

/// Why a run failed or its result was not delivered. The run record keeps
/// `public_message` (the API shows it); the log gets the whole chain.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("agent {0:?} no longer exists")]
    AgentGone(String),
    #[error("agent {0:?} is disabled")]
    AgentDisabled(String),
    #[error("timed out after {}s", .0.as_secs())]
    TimedOut(Duration),
    #[error("could not open a session")]
    OpenSession(#[source] SessionError),
    #[error("could not add the result to the session")]
    DeliverToSession(#[source] SessionError),
    #[error(transparent)]
    Channel(#[from] ChannelError),
    #[error(transparent)]
    Agent(#[from] Arc<AgentError>),
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<TurnError> for RunError {
    fn from(err: TurnError) -> Self {
        match err {
            TurnError::AgentGone(id) => Self::AgentGone(id),
            TurnError::AgentDisabled(id) => Self::AgentDisabled(id),
            TurnError::Workspace(err) => Self::Store(err),
            TurnError::Session(err) => Self::OpenSession(err),
            TurnError::Storage(err) => Self::Db(err),
        }
    }
}

impl RunError {
    pub fn public_message(&self) -> String {
        match self {
            Self::Agent(err) => err.public_message(),
            Self::Db(_) | Self::Store(_) => "storage is unavailable".into(),
            Self::OpenSession(err) | Self::DeliverToSession(err) => match err {
                SessionError::Db(_) | SessionError::Store(_) => format!("{self}: storage is unavailable"),
                SessionError::NotFound(_) | SessionError::BadId(_) => format!("{self}: {err}"),
            },
            _ => self.to_string(),
        }
    }
}

/// How a run went, before it is recorded.
enum Performed {
    Answered { text: String, tokens: Tokens },
    Skipped(String),
}

impl Runner {
    pub fn new(
        tasks: Arc<Tasks>,
        agents: Arc<Agents>,
        sessions: Arc<Sessions>,
        memory: Arc<Memory>,
        channels: Arc<Channels>,
    ) -> Arc<Self> {
        let replica = crate::replica::id().to_string();
        Arc::new(Self {
            tasks,
            agents,
            sessions,
            memory,
            channels,
            replica,
        })
    }

    /// The scheduler's loops (a task for the app's `Background`): heartbeat
    /// tasks set up, then the run loop beside the feed of other replicas' changes.
    pub fn run(
        self: &Arc<Self>,
        heartbeats: Vec<(String, HeartbeatConfig)>,
    ) -> impl Future<Output = ()> + Send + 'static {
        let runner = self.clone();
        async move {
            while let Err(err) = crate::tasks::heartbeat::sync(&runner.tasks, &heartbeats).await {
                tracing::warn!(error = %err, "could not set up heartbeat tasks; retrying");
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            tokio::join!(runner.follow_other_replicas(), runner.clone().run_loop());
        }
    }

    /// Wakes this runner whenever any replica changes a task (a SurrealDB
    /// live query), so a task created on a replica that then goes away still
    /// runs on time here.
    async fn follow_other_replicas(&self) {
        let tasks = &self.tasks;
        loop {
            match tasks.store.changes().await {
                Ok(mut changes) => {
                    while changes.next().await.is_some() {
                        tasks.notify();
                    }
                    tracing::debug!("task change feed ended; subscribing again");
                }
                Err(err) => {
                    tracing::warn!(error = %err, "cannot follow task changes; relying on the periodic check")
                }
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }

    async fn run_loop(self: Arc<Self>) {
        loop {
            let wait = match self.tick().await {
                Ok(()) => self.until_next().await,
                Err(err) => {
                    tracing::warn!(error = %err, "scheduler could not read its tasks; retrying");
                    Duration::from_secs(2)
                }
            };
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = self.tasks.changed() => {}
            }
        }
    }

    async fn until_next(&self) -> Duration {
        match self.tasks.store.next_wake().await {
            Ok(Some(at)) => parse_stamp(&at)
                .and_then(|at| (at - Utc::now()).to_std().ok())
                .unwrap_or(Duration::ZERO)
                .min(MAX_SLEEP),
            Ok(None) => MAX_SLEEP,
            Err(_) => Duration::from_secs(2),
        }
    }

    /// Reaps runs whose replica died, then claims and starts what is due.
    async fn tick(self: &Arc<Self>) -> Result<(), DbError> {
        let now = self.tasks.store.leases().now();
        for task in self.tasks.store.expired().await? {
            self.reap(task, now).await?;
        }
        for task in self.tasks.store.due(&stamp(now), 32).await? {
            self.start_due(task, now).await?;
        }
        Ok(())
    }

    fn new_run(&self, task: &Task, trigger: TaskTrigger, now: DateTime<Utc>) -> TaskRun {
        TaskRun {
            id: uuid::Uuid::now_v7().hyphenated().to_string(),
            task: task.id.clone(),
            agent: task.agent.clone(),
            trigger,
            scheduled_for: (trigger != TaskTrigger::Manual)
                .then(|| task.next_run.clone())
                .flatten(),
            started_at: stamp(now),
            finished_at: None,
            status: TaskRunStatus::Running,
            result: None,
            error: None,
            tokens: Tokens::default(),
            session_id: None,
            replica: self.replica.clone(),
            delivered_to: None,
            delivery_error: None,
        }
    }

    async fn start_due(self: &Arc<Self>, task: Task, now: DateTime<Utc>) -> Result<(), DbError> {
        let Some(due) = task.next_run.as_deref().and_then(parse_stamp) else {
            return Ok(());
        };
        let missed_after = chrono::Duration::from_std(self.tasks.settings.missed_after).unwrap_or_default();
        let missed = now - due > missed_after;
        let skip = missed && self.tasks.settings.catch_up == crate::config::CatchUp::Skip;
        let trigger = if missed {
            TaskTrigger::CatchUp
        } else {
            TaskTrigger::Schedule
        };
        let run = self.new_run(&task, trigger, now);
        let Some(task) = self
            .tasks
            .store
            .claim(&task.id, task.next_run.as_deref(), &run)
            .await?
        else {
            return Ok(()); // another replica has it
        };
        if skip {
            tracing::info!(task = %task.id, name = %task.name, due = %stamp(due), "skipping a run missed while Onyx was down (catchUp: skip)");
            let outcome = Ok(Performed::Skipped(format!(
                "missed while Onyx was down (due {}); catchUp is \"skip\"",
                stamp(due)
            )));
            self.finish(&task, run, outcome, Some(due)).await;
            return Ok(());
        }
        tracing::info!(task = %task.id, name = %task.name, agent = %task.agent, ?trigger, "running scheduled task");
        tokio::spawn(self.clone().execute(task, run, Some(due)));
        Ok(())
    }

    /// `POST /v1/tasks/{id}/run`: runs it now, whatever its schedule or status;
    /// the schedule is left as it is.
    pub async fn run_now(self: &Arc<Self>, id: &str) -> Result<TaskRun, TaskError> {
        let task = self.tasks.get(id).await?;
        let busy = |task: &Task| {
            TaskError::Conflict(format!(
                "task {:?} is running now (run {}); try again when it finishes",
                task.id,
                task.lease_run.clone().unwrap_or_default()
            ))
        };
        if task.lease_run.is_some() {
            return Err(busy(&task));
        }
        let now = self.tasks.store.leases().now();
        let run = self.new_run(&task, TaskTrigger::Manual, now);
        match self.tasks.store.claim(id, None, &run).await? {
            Some(task) => {
                tokio::spawn(self.clone().execute(task, run.clone(), None));
                Ok(run)
            }
            None => Err(busy(&self.tasks.get(id).await?)),
        }
    }

    /// A claimed run whose replica stopped renewing its lease: failed.
    async fn reap(&self, task: Task, now: DateTime<Utc>) -> Result<(), DbError> {
        let (Some(run_id), Some(held)) = (task.lease_run.clone(), task.lease()) else {
            return Ok(());
        };
        let mut run = match self.tasks.store.run(&run_id).await? {
            Some(run) => run,
            None => self.new_run(&task, TaskTrigger::Schedule, now),
        };
        run.id = run_id;
        run.status = TaskRunStatus::Failed;
        run.finished_at = Some(stamp(now));
        run.error = Some(format!(
            "the replica running it ({}) stopped before it finished: its lease ran out at {}",
            task.lease_owner.as_deref().unwrap_or("unknown"),
            task.lease_until.as_deref().unwrap_or("?")
        ));
        let due = run.scheduled_for.as_deref().and_then(parse_stamp);
        let settle = (run.trigger != TaskTrigger::Manual)
            .then(|| self.settle_for(&task, &run, due.unwrap_or(now), now));
        if self
            .tasks
            .store
            .settle(&task.id, &run, settle.as_ref(), &held, true)
            .await?
        {
            tracing::warn!(task = %task.id, run = %run.id, "a run's replica died mid-run; recorded as failed");
        }
        Ok(())
    }

    async fn execute(self: Arc<Self>, task: Task, mut run: TaskRun, due: Option<DateTime<Utc>>) {
        let holding = task
            .lease()
            .map(|held| self.tasks.store.renewals().hold(&task.id, held));
        let lost = holding.as_ref().map(crate::lease::Holding::lost);
        let timeout = self.tasks.settings.run_timeout;
        let outcome = tokio::select! {
            outcome = self.perform(&task, &mut run) => outcome,
            () = async { match lost { Some(lost) => lost.await, None => std::future::pending().await } } => {
                tracing::warn!(task = %task.id, run = %run.id, "lost a run's lease (this replica stalled); another replica recorded it");
                return;
            }
            () = tokio::time::sleep(timeout) => Err(RunError::TimedOut(timeout)),
        };
        self.finish(&task, run, outcome, due).await;
        drop(holding);
    }

    /// Records how a run ended and moves the task on.
    async fn finish(
        &self,
        task: &Task,
        mut run: TaskRun,
        outcome: Result<Performed, RunError>,
        due: Option<DateTime<Utc>>,
    ) {
        let now = self.tasks.store.leases().now();
        run.finished_at = Some(stamp(now));
        match outcome {
            Ok(Performed::Answered { text, tokens }) => {
                run.status = TaskRunStatus::Succeeded;
                run.tokens = tokens;
                self.deliver(task, &mut run, &text).await;
                run.result = Some(crate::text::ellipsize(&text, MAX_RESULT_CHARS));
            }
            Ok(Performed::Skipped(reason)) => {
                run.status = TaskRunStatus::Skipped;
                run.result = Some(reason);
            }
            Err(err) => {
                tracing::warn!(task = %task.id, run = %run.id, error = %crate::error_chain::chain(&err), "task run failed");
                run.status = TaskRunStatus::Failed;
                run.error = Some(err.public_message());
            }
        }
        let settle = due.map(|due| self.settle_for(task, &run, due, now));
        let Some(held) = task.lease() else {
            tracing::error!(task = %task.id, run = %run.id, "a run ended without the lease it was claimed with");
            return;
        };
        match self
            .tasks
            .store
            .settle(&task.id, &run, settle.as_ref(), &held, false)
            .await
        {
            Ok(true) => {
                tracing::info!(task = %task.id, run = %run.id, status = ?run.status, error = run.error.as_deref().unwrap_or(""), "task run finished");
            }
            Ok(false) => {
                tracing::warn!(task = %task.id, run = %run.id, "a run finished after losing its lease; not recorded twice")
            }
            Err(err) => {
                tracing::error!(task = %task.id, run = %run.id, error = %err, "could not record a task run")
            }
        }
        self.tasks.notify();
    }

    /// The task's fields after a scheduled run: next occurrence, failure
    /// streak with backoff, and pausing after too many failures in a row.
    fn settle_for(
        &self,
        task: &Task,
        run: &TaskRun,
        due: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> RunSettlement {
        let tz = self.tasks.timezone_of(task);
        let schedule = match self.tasks.schedule_of(task) {
            Some(Schedule::Once(_)) | None => Schedule::Once(due),
            Some(schedule) => schedule,
        };
        let following = schedule.following(due, now, tz);
        if run.status != TaskRunStatus::Failed {
            return RunSettlement {
                last_status: run.status.clone(),
                last_error: None,
                status: following.is_none().then_some(TaskStatus::Completed),
                next_run: following.map(stamp),
                consecutive_failures: 0,
            };
        }
        let failures = task.consecutive_failures + 1;
        let settings = &self.tasks.settings;
        if failures >= settings.max_consecutive_failures {
            let status = if following.is_none() {
                TaskStatus::Failed
            } else {
                TaskStatus::Paused
            };
            tracing::warn!(task = %task.id, name = %task.name, failures, ?status, error = run.error.as_deref().unwrap_or(""), "task stopped after failing too many times in a row");
            return RunSettlement {
                last_status: TaskRunStatus::Failed,
                last_error: run.error.clone(),
                status: Some(status),
                next_run: following.map(stamp),
                consecutive_failures: failures,
            };
        }
        let backoff = settings
            .failure_backoff
            .saturating_mul(1u32 << (failures - 1).min(16))
            .min(MAX_BACKOFF);
        let retry = now + chrono::Duration::from_std(backoff).unwrap_or_default();
        let next = following.map_or(retry, |next| next.max(retry));
        RunSettlement {
            last_status: TaskRunStatus::Failed,
            last_error: run.error.clone(),
            status: None,
            next_run: Some(stamp(next)),
            consecutive_failures: failures,
        }
    }

    /// Runs the agent on the task's prompt, unattended.
    async fn perform(&self, task: &Task, run: &mut TaskRun) -> Result<Performed, RunError> {
        let agent = self.agents.turn_agent(&task.agent).await?;
        let prompt = match task.kind {
            TaskKind::Task => task.prompt.clone(),
            TaskKind::Heartbeat => match self.heartbeat_prompt(&agent.id).await {
                Some(prompt) => prompt,
                None => return Ok(Performed::Skipped("HEARTBEAT.md is empty".into())),
            },
        };
        let (thread, history) = match task.context_mode {
            ContextMode::Isolated => (Thread::New("task".into()), false),
            ContextMode::Main => (
                Thread::Named {
                    name: format!("{}/main", agent.id),
                    source: "main".into(),
                },
                true,
            ),
        };
        let note = format!(
            "The scheduler started this run (task {:?}, {} {:?}). Nobody is watching it live: do the work, then answer with the result itself.",
            task.name,
            task.schedule_type.as_str(),
            task.schedule_value
        );
        let turn = Turn {
            history,
            note: Some(note),
            who: Attribution {
                task: Some(task.id.clone()),
                ..Attribution::default()
            },
            ..Turn::of(thread, Message::user(prompt), "task")
        };
        let mut request = self.agents.open_turn(agent, turn, None).await?;
        run.session_id = request.session.as_ref().map(|s| s.id.clone());
        request.ask_in = task
            .deliver_to
            .clone()
            .filter(|target| !target.starts_with("session:"));
        let outcome = match self.agents.run_to_end(request).await {
            Ok(outcome) => outcome,
            // Over budget or limit: nothing was sent; the run is skipped, not failed.
            Err(err) => match refusal_of(&err) {
                Some(reason) => return Ok(Performed::Skipped(reason)),
                None => return Err(err.into()),
            },
        };
        Ok(Performed::Answered {
            text: outcome.content,
            tokens: Tokens {
                prompt: outcome.usage.prompt_tokens,
                completion: outcome.usage.completion_tokens,
                total: outcome.usage.total_tokens,
            },
        })
    }

    /// HEARTBEAT.md as a prompt; `None` when it has nothing to check.
    async fn heartbeat_prompt(&self, agent: &str) -> Option<String> {
        let file = self.memory.read_file(agent, "HEARTBEAT.md").await.ok()?;
        if !has_checklist(&file.content) {
            return None;
        }
        Some(format!(
            "Heartbeat. Go through your HEARTBEAT.md checklist now:\n\n{}\n\nIf nothing needs attention, answer exactly HEARTBEAT_OK.",
            file.content.trim()
        ))
    }

    /// Sends a successful result where the task says; the outcome goes on the run.
    async fn deliver(&self, task: &Task, run: &mut TaskRun, text: &str) {
        if crate::tasks::heartbeat::is_nothing_to_report(text) {
            return;
        }
        let Some(target) = task.deliver_to.as_deref() else {
            return crate::notifications::Notifier::new(self.sessions.db().clone())
                .task_result(&task.agent, &task.name, text)
                .await;
        };
        let result: Result<(), RunError> = if let Some(id) = target.strip_prefix("session:") {
            match self.sessions.get(id).await {
                Ok(session) => {
                    let line = LogMessage::plain(
                        crate::providers::types::Role::Assistant,
                        format!("**{}** (scheduled task)\n\n{text}", task.name),
                    );
                    self.sessions
                        .append(&session, vec![line])
                        .await
                        .map(|_| ())
                        .map_err(RunError::DeliverToSession)
                }
                Err(err) => Err(RunError::DeliverToSession(err)),
            }
        } else {
            self.channels.send(target, text).await.map_err(RunError::from)
        };
        match result {
            Ok(()) => run.delivered_to = Some(target.to_string()),
            Err(err) => {
                tracing::warn!(task = %task.id, target, error = %crate::error_chain::chain(&err), "could not deliver a task's result");
                run.delivery_error = Some(err.public_message());
            }
        }
    }
}

/// Why the run was refused by a budget or rate limit, if it was.
fn refusal_of(err: &AgentError) -> Option<String> {
    match err {
        AgentError::Provider(provider) => match provider.as_ref() {
            crate::providers::ProviderError::Refused(refusal) => {
                Some(format!("skipped: {}", refusal.message))
            }
            _ => None,
        },
        _ => None,
    }
}

/// Whether a HEARTBEAT.md has anything to do: more than headings, comments and blank lines.
fn has_checklist(content: &str) -> bool {
    let without_comments = {
        let mut out = String::new();
        let mut rest = content;
        while let Some(start) = rest.find("<!--") {
            out.push_str(&rest[..start]);
            rest = rest[start..]
                .find("-->")
                .map_or("", |end| &rest[start + end + 3..]);
        }
        out.push_str(rest);
        out
    };
    without_comments
        .lines()
        .map(str::trim)
        .any(|line| !line.is_empty() && !line.starts_with('#'))
}

#[cfg(test)]
mod tests {
    use super::has_checklist;

    #[test]
    fn an_empty_heartbeat_file_has_no_checklist() {
        assert!(!has_checklist(""));
        assert!(!has_checklist("# HEARTBEAT.md\n\n<!-- add checks here -->\n"));
        assert!(has_checklist("# HEARTBEAT.md\n- check the inbox\n"));
    }
}
