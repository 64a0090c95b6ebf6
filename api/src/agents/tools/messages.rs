//! `send_message`: the agent speaks first. To `telegram:<chat>`,
//! `discord:<channel>` or `session:<id>`; without `to`, where the owner last
//! talked to it.

use std::borrow::Cow;

use serde_json::{Value, json};

use super::{ToolContext, ToolError, ToolKind, ToolSpec, fail, text};
use crate::sessions::LogMessage;

pub fn specs() -> Vec<ToolSpec> {
    vec![ToolSpec {
        name: Cow::Borrowed("send_message"),
        description: Cow::Borrowed(
            "Send a message to your owner now. Without `to` it goes to the chat where they last talked to you.",
        ),
        parameters: json!({"type": "object", "properties": {
            "to": {"type": "string", "description": "telegram:<chat_id>, discord:<channel_id> or session:<id>"},
            "text": {"type": "string"}
        }, "required": ["text"]}),
        kind: ToolKind::Write,
    }]
}

pub async fn call(ctx: &ToolContext, args: &Value) -> Result<String, ToolError> {
    let message = text(args, "text")?;
    if message.trim().is_empty() {
        return Err("the text is empty".into());
    }
    let target =
        match args["to"].as_str().map(str::trim).filter(|t| !t.is_empty()) {
            Some(to) => to.to_string(),
            None => ctx.reach.last(&ctx.agent.id).await?.ok_or_else(|| {
                fail!("nobody has talked to you on a chat platform yet; say where with `to`")
            })?,
        };
    if let Some(id) = target.strip_prefix("session:") {
        let session = ctx.sessions.get(id).await?;
        if session.agent_id != ctx.agent.id {
            return Err(fail!("session {id:?} is not one of yours"));
        }
        ctx.sessions
            .append(&session, vec![LogMessage::plain("assistant", message)])
            .await?;
    } else {
        ctx.channels.send(&target, message).await?;
    }
    Ok(format!("sent to {target}"))
}
