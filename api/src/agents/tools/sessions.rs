//! `sessions_list`, `sessions_history`: the agent's earlier conversations;
//! `sessions_send`: a message into a conversation it may reach.

use serde_json::{Value, json};

use super::tool::{Needs, Tool};
use super::{SessionNote, ToolContext, ToolError, ToolKind, Wake, fail, number, text};
use crate::providers::types::Content;
use crate::sessions::{ListFilter, SessionError, parse_id};

pub const LIST: Tool = Tool {
    name: "sessions_list",
    description: "List your recent conversations (newest first), optionally matching some words.",
    parameters: || {
        json!({"type": "object", "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer", "description": "default 10"}
        }})
    },
    kind: ToolKind::Read,
    needs: Needs::Nothing,
    over_mcp: true,
    asks_first: None,
    call: |ctx, args| Box::pin(list(ctx, args)),
};

pub const HISTORY: Tool = Tool {
    name: "sessions_history",
    description: "Read the messages of one conversation by its id.",
    parameters: || {
        json!({"type": "object", "properties": {
            "session_id": {"type": "string"},
            "limit": {"type": "integer", "description": "last N messages, default 20"}
        }, "required": ["session_id"]})
    },
    kind: ToolKind::Read,
    needs: Needs::Nothing,
    over_mcp: true,
    asks_first: None,
    call: |ctx, args| Box::pin(history(ctx, args)),
};

pub const SEND: Tool = Tool {
    name: "sessions_send",
    description: "Write a message into a conversation (one of yours, or another agent's, by its id): that conversation's agent starts working on it there now.",
    parameters: || {
        json!({"type": "object", "properties": {
            "session_id": {"type": "string"},
            "message": {"type": "string"}
        }, "required": ["session_id", "message"]})
    },
    kind: ToolKind::Write,
    needs: Needs::Nothing,
    over_mcp: false,
    asks_first: None,
    call: |ctx, args| Box::pin(send(ctx, args)),
};

pub const TOOLS: &[Tool] = &[LIST, HISTORY, SEND];

async fn list(ctx: &ToolContext, args: &Value) -> Result<String, ToolError> {
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
    Ok(sessions
        .iter()
        .map(|s| {
            format!(
                "{} {} ({} messages, updated {})",
                s.id, s.title, s.message_count, s.updated_at
            )
        })
        .collect::<Vec<_>>()
        .join("\n"))
}

async fn history(ctx: &ToolContext, args: &Value) -> Result<String, ToolError> {
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
            let text = match &m.message.content {
                Some(Content::Text(text)) => text.clone(),
                Some(parts) => serde_json::to_string(parts).unwrap_or_default(),
                // `null`, or content kept as the log stored it.
                None => serde_json::to_string(&m.message.extra.get("content")).unwrap_or_default(),
            };
            format!("[{} {}] {}", m.ts, m.role_name(), text)
        })
        .collect::<Vec<_>>()
        .join("\n"))
}

/// `sessions_send`: reaches the agent's own sessions and those of agents it
/// may message (as `send_to_agent` does: the agents of this gateway; not
/// one that is turned off, which would never answer), and
/// wakes the session's agent there under the stricter of the two
/// permission modes.
async fn send(ctx: &ToolContext, args: &Value) -> Result<String, ToolError> {
    let given = text(args, "session_id")?;
    let message = text(args, "message")?;
    if message.trim().is_empty() {
        return Err("the message is empty".into());
    }
    let unknown = || fail!("there is no conversation {given:?}");
    let id = parse_id(given).map_err(|_| unknown())?;
    let session = match ctx.sessions.get(&id).await {
        Ok(session) => session,
        Err(SessionError::NotFound(_)) => return Err(unknown()),
        Err(err) => return Err(err.into()),
    };
    let owner = session.agent_id.clone();
    if owner != ctx.agent.id && !ctx.known_agents.contains(&owner) {
        return Err(fail!(
            "conversation {given} belongs to {owner:?}, which you cannot message (you can reach: {})",
            ctx.known_agents.join(", ")
        ));
    }
    if ctx.disabled_agents.contains(&owner) {
        return Err(fail!(
            "conversation {given} belongs to {owner:?}, which is turned off"
        ));
    }
    let wake = Wake {
        agent: owner.clone(),
        from: ctx.agent.id.clone(),
        mode: ctx.agent.permission_mode,
        into: Some(SessionNote {
            session,
            text: message.to_string(),
        }),
    };
    ctx.wake
        .send(wake)
        .map_err(|_| fail!("the gateway is shutting down; try again later"))?;
    Ok(format!(
        "written into conversation {given}; {owner} is starting on it now"
    ))
}
