//! Scheduled tasks: agents' own cron / interval / once tasks and heartbeats,
//! as data. The agents' task tools and the HTTP API edit them here; the
//! `scheduler` runs them (it imports this module, never the other way round).
//!
//! - `schedule`: parsing schedules and computing occurrences in a timezone
//! - `store`: tasks and run records in SurrealDB, claimed with leases
//! - this file: creating, editing and listing tasks, with validation
//! - `heartbeat`: one task per agent with `heartbeat.every`, kept in step with config

pub mod heartbeat;
pub mod schedule;
#[cfg(test)]
mod schedule_fuzz;
pub mod store;

use std::sync::Arc;

use chrono::Utc;
use chrono_tz::Tz;
use serde::Deserialize;

pub use schedule::{Schedule, ScheduleType};
pub use store::{ContextMode, Task, TaskKind, TaskRun, TaskStatus};

use crate::clock::now_stamp;
use crate::config::SchedulerConfig;
use crate::storage::{Db, DbError};

/// Prompts longer than this are refused (they are sent on every run).
pub const MAX_PROMPT_CHARS: usize = 16_000;
const MAX_NAME_CHARS: usize = 200;

#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    #[error("{message}")]
    Invalid { message: String, param: &'static str },
    #[error("no task {0:?}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Db(#[from] DbError),
}

impl From<schedule::ScheduleError> for TaskError {
    fn from(err: schedule::ScheduleError) -> Self {
        invalid(err.param(), err.to_string())
    }
}

fn invalid(param: &'static str, message: impl Into<String>) -> TaskError {
    TaskError::Invalid {
        message: message.into(),
        param,
    }
}

/// What a new task is made from (the API's body, or `schedule_task`'s arguments).
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(optional_fields))]
#[serde(deny_unknown_fields)]
pub struct NewTask {
    #[serde(default)]
    pub agent: String,
    pub name: Option<String>,
    pub prompt: String,
    pub schedule_type: String,
    pub schedule_value: String,
    pub timezone: Option<String>,
    pub context_mode: Option<String>,
    pub deliver_to: Option<String>,
}

/// A change to a task; absent fields stay as they are.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(optional_fields))]
#[serde(deny_unknown_fields)]
pub struct TaskPatch {
    pub name: Option<String>,
    pub prompt: Option<String>,
    pub schedule_type: Option<String>,
    pub schedule_value: Option<String>,
    pub timezone: Option<String>,
    pub context_mode: Option<String>,
    /// `""` clears it.
    pub deliver_to: Option<String>,
    /// `active` (resume) or `paused`.
    pub status: Option<String>,
}

impl TaskPatch {
    fn changes_more_than_status(&self) -> bool {
        self.name.is_some()
            || self.prompt.is_some()
            || self.schedule_type.is_some()
            || self.schedule_value.is_some()
            || self.timezone.is_some()
            || self.context_mode.is_some()
            || self.deliver_to.is_some()
    }
}

pub struct Tasks {
    pub(crate) store: store::TaskStore,
    pub(crate) settings: SchedulerConfig,
    /// Wakes this replica's runner when tasks change.
    changed: tokio::sync::Notify,
}

fn timezone(name: Option<&str>, default: Tz) -> Result<Tz, TaskError> {
    match name.map(str::trim).filter(|n| !n.is_empty()) {
        None => Ok(default),
        Some(name) => name.parse().map_err(|_| {
            invalid(
                "timezone",
                format!(
                    "timezone: {name:?} is not an IANA timezone name (like \"Europe/Berlin\" or \"UTC\")"
                ),
            )
        }),
    }
}

fn context_mode(text: Option<&str>) -> Result<ContextMode, TaskError> {
    match text.unwrap_or("isolated") {
        "isolated" => Ok(ContextMode::Isolated),
        "main" => Ok(ContextMode::Main),
        other => Err(invalid(
            "context_mode",
            format!("context_mode: {other:?} is not \"isolated\" or \"main\""),
        )),
    }
}

fn prompt(text: &str) -> Result<String, TaskError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(invalid("prompt", "prompt: must say what the agent should do"));
    }
    let chars = text.chars().count();
    if chars > MAX_PROMPT_CHARS {
        return Err(invalid(
            "prompt",
            format!("prompt: {chars} characters is over the limit of {MAX_PROMPT_CHARS}"),
        ));
    }
    Ok(text.to_string())
}

fn name(text: Option<&str>, prompt: &str) -> Result<String, TaskError> {
    match text.map(str::trim).filter(|n| !n.is_empty()) {
        Some(name) if name.chars().count() > MAX_NAME_CHARS => Err(invalid(
            "name",
            format!("name: longer than {MAX_NAME_CHARS} characters"),
        )),
        Some(name) => Ok(name.to_string()),
        None => Ok(crate::text::ellipsize(
            prompt.lines().next().unwrap_or_default(),
            60,
        )),
    }
}

/// `session:<uuid>` or `telegram:<chat_id>` / `discord:<channel_id>`.
fn deliver_to(text: Option<&str>) -> Result<Option<String>, TaskError> {
    let Some(target) = text.map(str::trim).filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    if let Some(id) = target.strip_prefix("session:") {
        let id =
            crate::sessions::parse_id(id).map_err(|e| invalid("deliver_to", format!("deliver_to: {e}")))?;
        return Ok(Some(format!("session:{id}")));
    }
    crate::channels::parse_target(target)
        .map_err(|e| invalid("deliver_to", format!("deliver_to: {e}, or \"session:<id>\"")))?;
    Ok(Some(target.to_string()))
}

impl Tasks {
    /// `lease_db`: where run leases are renewed and lapsed ones found (its
    /// own connection to a server, [`Db::dedicated`]).
    pub fn new(db: Db, lease_db: Db, settings: SchedulerConfig) -> Arc<Self> {
        Arc::new(Self {
            store: store::TaskStore::new(
                db,
                crate::lease::Leases::new(lease_db, "task", settings.lease, crate::clock::system()),
            ),
            settings,
            changed: tokio::sync::Notify::new(),
        })
    }

    /// Renews the leases of task runs going on this replica (a future for
    /// the app's `Background`).
    pub fn lease_upkeep(&self) -> impl Future<Output = ()> + Send + 'static {
        self.store.renewals().run()
    }

    /// Tells the runner to look again (a task was added, edited or finished).
    pub fn notify(&self) {
        self.changed.notify_one();
    }

    pub(crate) async fn changed(&self) {
        self.changed.notified().await;
    }

    pub fn timezone_of(&self, task: &Task) -> Tz {
        task.timezone.parse().unwrap_or(self.settings.timezone)
    }

    /// The task's stored schedule. A once-task's time is its `next_run` (its
    /// value may be relative, like `+10m`, or long past).
    pub fn schedule_of(&self, task: &Task) -> Option<Schedule> {
        if task.schedule_type == ScheduleType::Once {
            let at = task.next_run.as_deref().and_then(crate::clock::parse_stamp);
            return Some(Schedule::Once(at.unwrap_or_else(Utc::now)));
        }
        Schedule::parse(
            task.schedule_type,
            &task.schedule_value,
            self.timezone_of(task),
            Utc::now(),
        )
        .ok()
    }

    pub async fn create(&self, new: NewTask, created_by: &str) -> Result<Task, TaskError> {
        let prompt = prompt(&new.prompt)?;
        let kind = ScheduleType::parse(new.schedule_type.trim())?;
        let tz = timezone(new.timezone.as_deref(), self.settings.timezone)?;
        let now = Utc::now();
        let schedule = Schedule::parse(kind, &new.schedule_value, tz, now)?;
        let next_run = schedule
            .first(now, tz)
            .ok_or_else(|| invalid("schedule_value", "schedule_value: it never fires"))?;
        let stamp = now_stamp();
        let task = Task {
            id: uuid::Uuid::now_v7().hyphenated().to_string(),
            agent: new.agent,
            name: name(new.name.as_deref(), &prompt)?,
            prompt,
            kind: TaskKind::Task,
            schedule_type: kind,
            schedule_value: new.schedule_value.trim().to_string(),
            timezone: tz.name().to_string(),
            context_mode: context_mode(new.context_mode.as_deref())?,
            deliver_to: deliver_to(new.deliver_to.as_deref())?,
            status: TaskStatus::Active,
            next_run: Some(crate::clock::stamp(next_run)),
            last_run: None,
            last_status: None,
            last_error: None,
            consecutive_failures: 0,
            created_at: stamp.clone(),
            updated_at: stamp,
            created_by: created_by.to_string(),
            lease_owner: None,
            lease_until: None,
            lease_run: None,
            lease_token: None,
        };
        self.store.create(&task).await?;
        self.notify();
        Ok(task)
    }

    pub async fn get(&self, id: &str) -> Result<Task, TaskError> {
        self.store
            .get(id)
            .await?
            .ok_or_else(|| TaskError::NotFound(id.to_string()))
    }

    pub async fn list(
        &self,
        agent: Option<&str>,
        status: Option<TaskStatus>,
    ) -> Result<Vec<Task>, TaskError> {
        Ok(self.store.list(agent, status).await?)
    }

    pub async fn runs(&self, id: &str, limit: usize) -> Result<Vec<TaskRun>, TaskError> {
        self.get(id).await?;
        Ok(self.store.runs(id, limit).await?)
    }

    /// Applies a change; a new schedule (or a resume) computes `next_run` afresh.
    pub async fn update(&self, id: &str, patch: TaskPatch) -> Result<Task, TaskError> {
        let mut task = self.get(id).await?;
        if task.kind == TaskKind::Heartbeat && patch.changes_more_than_status() {
            return Err(TaskError::Conflict(
                "a heartbeat's schedule comes from config (agents.list[].heartbeat.every); only its status can change"
                    .into(),
            ));
        }
        let mut reschedule = false;
        let mut new_schedule = false;
        if let Some(text) = &patch.prompt {
            task.prompt = prompt(text)?;
        }
        if let Some(text) = &patch.name {
            task.name = name(Some(text), &task.prompt)?;
        }
        if let Some(text) = &patch.schedule_type {
            task.schedule_type = ScheduleType::parse(text.trim())?;
            new_schedule = true;
        }
        if let Some(text) = &patch.schedule_value {
            task.schedule_value = text.trim().to_string();
            new_schedule = true;
        }
        if patch.timezone.is_some() {
            task.timezone = timezone(patch.timezone.as_deref(), self.settings.timezone)?
                .name()
                .to_string();
            new_schedule = true;
        }
        if let Some(text) = &patch.context_mode {
            task.context_mode = context_mode(Some(text))?;
        }
        if let Some(text) = &patch.deliver_to {
            task.deliver_to = deliver_to(Some(text))?;
        }
        match patch.status.as_deref() {
            None => {}
            Some("paused") => task.status = TaskStatus::Paused,
            Some("active") => {
                if task.status != TaskStatus::Active {
                    reschedule = true;
                    task.consecutive_failures = 0;
                }
                task.status = TaskStatus::Active;
            }
            Some(other) => {
                return Err(invalid(
                    "status",
                    format!("status: {other:?} is not \"active\" or \"paused\""),
                ));
            }
        }
        if reschedule || new_schedule {
            let tz = self.timezone_of(&task);
            let now = Utc::now();
            let schedule = if new_schedule {
                Schedule::parse(task.schedule_type, &task.schedule_value, tz, now)?
            } else {
                self.schedule_of(&task).ok_or_else(|| {
                    invalid("schedule_value", "schedule_value: no longer valid; set a new one")
                })?
            };
            let next = schedule.first(now, tz);
            if next.is_none() && task.status == TaskStatus::Active {
                return Err(invalid("schedule_value", "schedule_value: it never fires"));
            }
            task.next_run = next.map(crate::clock::stamp);
        }
        task.updated_at = now_stamp();
        let saved = self
            .store
            .save(&task)
            .await?
            .ok_or_else(|| TaskError::NotFound(id.to_string()))?;
        self.notify();
        Ok(saved)
    }

    pub async fn cancel(&self, id: &str) -> Result<(), TaskError> {
        if self.get(id).await?.kind == TaskKind::Heartbeat {
            return Err(TaskError::Conflict(
                "a heartbeat comes from config (agents.list[].heartbeat); remove it there, or pause it"
                    .into(),
            ));
        }
        if self.store.delete(id).await? {
            self.notify();
            Ok(())
        } else {
            Err(TaskError::NotFound(id.to_string()))
        }
    }
}
