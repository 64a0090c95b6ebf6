//! `sessions_list`, `sessions_history`: the agent's earlier conversations.

use std::borrow::Cow;

use serde_json::{Value, json};

use super::{ToolContext, ToolError, ToolKind, ToolSpec, number, text};
use crate::sessions::{ListFilter, parse_id};

pub fn specs() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: Cow::Borrowed("sessions_list"),
            description: Cow::Borrowed(
                "List your recent conversations (newest first), optionally matching some words.",
            ),
            parameters: json!({"type": "object", "properties": {
                "query": {"type": "string"},
                "limit": {"type": "integer", "description": "default 10"}
            }}),
            kind: ToolKind::Read,
        },
        ToolSpec {
            name: Cow::Borrowed("sessions_history"),
            description: Cow::Borrowed("Read the messages of one conversation by its id."),
            parameters: json!({"type": "object", "properties": {
                "session_id": {"type": "string"},
                "limit": {"type": "integer", "description": "last N messages, default 20"}
            }, "required": ["session_id"]}),
            kind: ToolKind::Read,
        },
    ]
}

pub async fn call(ctx: &ToolContext, name: &str, args: &Value) -> Result<String, ToolError> {
    if name == "sessions_list" {
        let filter = ListFilter {
            agent: Some(ctx.agent.id.clone()),
            query: args["query"].as_str().filter(|q| !q.is_empty()).map(String::from),
            limit: number(args, "limit", 10, 50).max(1) as usize,
            ..ListFilter::default()
        };
        let (sessions, _) = ctx.sessions.list(&filter).await?;
        if sessions.is_empty() {
            return Ok("no conversations".into());
        }
        return Ok(sessions
            .iter()
            .map(|s| {
                format!(
                    "{} {} ({} messages, updated {})",
                    s.id, s.title, s.message_count, s.updated_at
                )
            })
            .collect::<Vec<_>>()
            .join("\n"));
    }
    let id = parse_id(text(args, "session_id")?)?;
    let meta = ctx.sessions.get(&id).await?;
    if meta.agent_id != ctx.agent.id {
        return Err("that conversation belongs to another agent".into());
    }
    let messages = ctx.sessions.messages(&meta).await?;
    let limit = number(args, "limit", 20, 200) as usize;
    let skip = messages.len().saturating_sub(limit);
    Ok(messages[skip..]
        .iter()
        .map(|m| {
            let text = match &m.content {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            format!("[{} {}] {}", m.ts, m.role, text)
        })
        .collect::<Vec<_>>()
        .join("\n"))
}
