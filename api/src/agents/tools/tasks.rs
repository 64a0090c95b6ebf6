//! `schedule_task`, `list_tasks`, `pause_task`, `resume_task`, `cancel_task`:
//! an agent managing its own scheduled work. Each answer gives the next run
//! time, so the agent can tell the user when it will happen.

use serde_json::{Value, json};

use super::tool::{Needs, Tool};
use super::{ToolContext, ToolError, ToolKind, fail, text};
use crate::tasks::{NewTask, Task, TaskError, TaskKind, TaskPatch};

fn task_id() -> Value {
    json!({"type": "object", "properties": {
        "task_id": {"type": "string", "description": "The id from schedule_task or list_tasks"}
    }, "required": ["task_id"]})
}

pub const SCHEDULE: Tool = Tool {
    name: "schedule_task",
    description: "Schedule a recurring or one-time task for yourself. CONTEXT MODE: \"isolated\" runs in a fresh session (put all the context the task needs in the prompt); \"main\" runs in your main session with its history. SCHEDULE TYPE: \"cron\" takes a crontab expression in the task's timezone (\"0 9 * * *\" is every day at 9:00; 6 fields put seconds first); \"interval\" takes milliseconds (\"3600000\") or a duration (\"30m\"); \"once\" takes an ISO time (\"2026-02-03T15:30:00Z\", or without offset in the timezone) or a delay (\"+10m\"). Returns the task id and its next run time.",
    parameters: || {
        json!({"type": "object", "properties": {
            "prompt": {"type": "string", "description": "What to do when it runs"},
            "schedule_type": {"type": "string", "enum": ["cron", "interval", "once"]},
            "schedule_value": {"type": "string"},
            "context_mode": {"type": "string", "enum": ["isolated", "main"]},
            "name": {"type": "string", "description": "A short name for the task list"},
            "timezone": {"type": "string", "description": "IANA name, e.g. Europe/Berlin (default: the configured one)"},
            "deliver_to": {"type": "string", "description": "Where the result goes: \"telegram:<chat_id>\", \"discord:<channel_id>\" or \"session:<id>\""}
        }, "required": ["prompt", "schedule_type", "schedule_value"]})
    },
    kind: ToolKind::Write,
    needs: Needs::Nothing,
    over_mcp: true,
    asks_first: None,
    call: |ctx, args| Box::pin(schedule(ctx, args)),
};

pub const LIST: Tool = Tool {
    name: "list_tasks",
    description: "List your scheduled tasks with their status and next run time.",
    parameters: || json!({"type": "object", "properties": {}}),
    kind: ToolKind::Read,
    needs: Needs::Nothing,
    over_mcp: true,
    asks_first: None,
    call: |ctx, _| Box::pin(list(ctx)),
};

pub const PAUSE: Tool = Tool {
    name: "pause_task",
    description: "Pause one of your tasks; it keeps its schedule until resumed.",
    parameters: task_id,
    kind: ToolKind::Write,
    needs: Needs::Nothing,
    over_mcp: false,
    asks_first: None,
    call: |ctx, args| Box::pin(set_status(ctx, args, "paused")),
};

pub const RESUME: Tool = Tool {
    name: "resume_task",
    description: "Resume a paused task; returns its next run time.",
    parameters: task_id,
    kind: ToolKind::Write,
    needs: Needs::Nothing,
    over_mcp: false,
    asks_first: None,
    call: |ctx, args| Box::pin(set_status(ctx, args, "active")),
};

pub const CANCEL: Tool = Tool {
    name: "cancel_task",
    description: "Cancel (delete) one of your tasks for good.",
    parameters: task_id,
    kind: ToolKind::Write,
    needs: Needs::Nothing,
    over_mcp: false,
    asks_first: None,
    call: |ctx, args| Box::pin(cancel(ctx, args)),
};

pub const TOOLS: &[Tool] = &[SCHEDULE, LIST, PAUSE, RESUME, CANCEL];

fn line(task: &Task) -> String {
    format!(
        "{} \"{}\" ({} {}, {}): {} — next run {}",
        task.id,
        task.name,
        task.schedule_type.as_str(),
        task.schedule_value,
        task.timezone,
        task.status.as_str(),
        task.next_run.as_deref().unwrap_or("none"),
    )
}

/// One of this agent's own tasks (another agent's is "not found").
async fn own(ctx: &ToolContext, args: &Value) -> Result<Task, ToolError> {
    let id = text(args, "task_id")?;
    match ctx.tasks.get(id).await {
        Ok(task) if task.agent == ctx.agent.id => Ok(task),
        Ok(_) | Err(TaskError::NotFound(_)) => Err(fail!("you have no task {id:?}; list_tasks shows yours")),
        Err(err) => Err(err.into()),
    }
}

async fn schedule(ctx: &ToolContext, args: &Value) -> Result<String, ToolError> {
    let mut new: NewTask = serde_json::from_value(args.clone()).map_err(|e| format!("bad arguments: {e}"))?;
    new.agent = ctx.agent.id.clone();
    let task = ctx.tasks.create(new, &format!("agent:{}", ctx.agent.id)).await?;
    Ok(format!(
        "Task scheduled (ID: {}), next run: {}",
        task.id,
        task.next_run.as_deref().unwrap_or("none")
    ))
}

async fn list(ctx: &ToolContext) -> Result<String, ToolError> {
    let tasks = ctx.tasks.list(Some(&ctx.agent.id), None).await?;
    if tasks.is_empty() {
        return Ok("You have no scheduled tasks.".into());
    }
    Ok(tasks.iter().map(line).collect::<Vec<_>>().join("\n"))
}

/// Pauses (`paused`) or resumes (`active`) one of the agent's tasks.
async fn set_status(ctx: &ToolContext, args: &Value, status: &str) -> Result<String, ToolError> {
    let task = own(ctx, args).await?;
    let patch = TaskPatch {
        status: Some(status.into()),
        ..TaskPatch::default()
    };
    let task = ctx.tasks.update(&task.id, patch).await?;
    Ok(line(&task))
}

async fn cancel(ctx: &ToolContext, args: &Value) -> Result<String, ToolError> {
    let task = own(ctx, args).await?;
    if task.kind == TaskKind::Heartbeat {
        return Err("the heartbeat comes from config (agents.list[].heartbeat); pause it instead".into());
    }
    ctx.tasks.cancel(&task.id).await?;
    Ok(format!("Task {} cancelled.", task.id))
}
