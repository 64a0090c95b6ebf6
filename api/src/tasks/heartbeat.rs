//! Heartbeats: an agent with `heartbeat.every` gets one task, `heartbeat-{agent}`,
//! that runs it on its HEARTBEAT.md checklist in an isolated session, its
//! result delivered to `heartbeat.deliverTo` (unless it is `HEARTBEAT_OK`).
//! Being an ordinary task it is claimed, recorded and retried like any other;
//! this file keeps those tasks in step with the config at startup.

use chrono::Utc;

use super::schedule::ScheduleType;
use super::store::{ContextMode, Task, TaskKind, TaskStatus};
use super::{TaskError, Tasks};
use crate::clock::{now_stamp, stamp};
use crate::config::HeartbeatConfig;

pub fn task_id(agent: &str) -> String {
    format!("heartbeat-{agent}")
}

/// A heartbeat that answers this (alone, or with only punctuation around it)
/// had nothing to report: recorded, never delivered.
pub fn is_nothing_to_report(answer: &str) -> bool {
    let trimmed = answer.trim();
    trimmed.contains("HEARTBEAT_OK")
        && !trimmed
            .replace("HEARTBEAT_OK", "")
            .chars()
            .any(char::is_alphanumeric)
}

/// Creates, reschedules or removes heartbeat tasks to match `heartbeats`
/// (agent id, how often, where to).
pub async fn sync(tasks: &Tasks, heartbeats: &[(String, HeartbeatConfig)]) -> Result<(), TaskError> {
    let existing = tasks.store.list(None, None).await?;
    for (agent, heartbeat) in heartbeats {
        let every = heartbeat.every;
        let value = humantime::format_duration(every).to_string();
        let next = Utc::now() + chrono::Duration::from_std(every).unwrap_or_default();
        match existing.iter().find(|t| t.id == task_id(agent)) {
            Some(task) if task.schedule_value == value && task.deliver_to == heartbeat.deliver_to => {}
            Some(task) => {
                let mut task = task.clone();
                if task.schedule_value != value {
                    task.next_run = Some(stamp(next));
                }
                task.schedule_value = value;
                task.deliver_to = heartbeat.deliver_to.clone();
                task.updated_at = now_stamp();
                tasks.store.save(&task).await?;
            }
            None => {
                let now = now_stamp();
                let task = Task {
                    id: task_id(agent),
                    agent: agent.clone(),
                    name: "heartbeat".into(),
                    prompt: "(the agent's HEARTBEAT.md checklist)".into(),
                    kind: TaskKind::Heartbeat,
                    schedule_type: ScheduleType::Interval,
                    schedule_value: value,
                    timezone: tasks.settings.timezone.name().to_string(),
                    context_mode: ContextMode::Isolated,
                    deliver_to: heartbeat.deliver_to.clone(),
                    status: TaskStatus::Active,
                    next_run: Some(stamp(next)),
                    last_run: None,
                    last_status: None,
                    last_error: None,
                    consecutive_failures: 0,
                    created_at: now.clone(),
                    updated_at: now,
                    created_by: "config".into(),
                    lease_owner: None,
                    lease_until: None,
                    lease_run: None,
                    lease_token: None,
                };
                // Another replica starting at the same moment may win; fine.
                if let Err(err) = tasks.store.create(&task).await
                    && tasks.store.get(&task.id).await?.is_none()
                {
                    return Err(err.into());
                }
            }
        }
    }
    for task in existing.iter().filter(|t| t.kind == TaskKind::Heartbeat) {
        if !heartbeats.iter().any(|(agent, _)| task_id(agent) == task.id) {
            tasks.store.delete(&task.id).await?;
            tracing::info!(agent = %task.agent, "heartbeat turned off in config; its task is removed");
        }
    }
    tasks.notify();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_bare_heartbeat_ok_is_nothing_to_report() {
        assert!(is_nothing_to_report("HEARTBEAT_OK"));
        assert!(is_nothing_to_report("  HEARTBEAT_OK.\n"));
        assert!(!is_nothing_to_report("Water the plants. Otherwise HEARTBEAT_OK"));
        assert!(!is_nothing_to_report("All quiet"));
    }
}
