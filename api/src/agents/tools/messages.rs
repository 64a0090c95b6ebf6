//! `send_message`: the agent speaks first. To `telegram:<chat>`,
//! `discord:<channel>` or `session:<id>`; without `to`, where the owner last
//! talked to it.
//!
//! A model that read a poisoned page could be told to send what it knows
//! anywhere. So in `ask` mode a chat the owner did not set up for the agent
//! needs approval first ([`asks_first`]): the owner's chats are where the
//! owner last talked to it, the chats its bindings name, the users the
//! plugin's `allowFrom` lists (a private chat's id is its user's) and its
//! heartbeat's `deliverTo`. Its own sessions are inside Onyx and never ask.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::tool::{Needs, Tool};
use super::{ToolContext, ToolError, ToolKind, fail, text};
use crate::config::Config;
use crate::providers::types::Role;
use crate::sessions::LogMessage;

pub const SEND_MESSAGE: Tool = Tool {
    name: "send_message",
    description: "Send a message to your owner now. Without `to` it goes to the chat where they last talked to you.",
    parameters: || {
        json!({"type": "object", "properties": {
            "to": {"type": "string", "description": "telegram:<chat_id>, discord:<channel_id> or session:<id>"},
            "text": {"type": "string"}
        }, "required": ["text"]})
    },
    kind: ToolKind::Write,
    needs: Needs::Nothing,
    over_mcp: false,
    asks_first: Some(|ctx, args| Box::pin(asks_first(ctx, args))),
    call: |ctx, args| Box::pin(call(ctx, args)),
};

pub const TOOLS: &[Tool] = &[SEND_MESSAGE];

/// The chats the config sets up for each agent (see the module docs).
#[derive(Debug, Default)]
pub struct OwnerChats {
    /// Chats of one agent: its bindings and heartbeat.
    by_agent: HashMap<String, Vec<String>>,
    /// Chats of every agent: the plugins' allowed users.
    every_agent: Vec<String>,
}

impl OwnerChats {
    pub fn from_config(config: &Config) -> Self {
        let mut by_agent: HashMap<String, Vec<String>> = HashMap::new();
        for binding in &config.bindings {
            let chats = by_agent.entry(binding.agent_id.clone()).or_default();
            let ids = binding
                .chat_id
                .iter()
                .chain(binding.peer.as_ref().map(|(_, id)| id));
            chats.extend(ids.map(|id| format!("{}:{id}", binding.channel)));
        }
        for agent in &config.agents.list {
            if let Some(target) = agent.heartbeat.as_ref().and_then(|h| h.deliver_to.clone()) {
                by_agent.entry(agent.id.clone()).or_default().push(target);
            }
        }
        let every_agent = config
            .plugins
            .enabled
            .iter()
            .flat_map(|plugin| {
                allowed_users(config.plugins.settings.get(plugin))
                    .into_iter()
                    .map(move |user| format!("{plugin}:{user}"))
            })
            .collect();
        Self {
            by_agent,
            every_agent,
        }
    }

    fn contains(&self, agent: &str, target: &str) -> bool {
        self.every_agent.iter().any(|t| t == target)
            || self
                .by_agent
                .get(agent)
                .is_some_and(|chats| chats.iter().any(|t| t == target))
    }
}

/// A plugin's `allowFrom` user ids (strings or numbers); `"*"` names nobody in particular.
fn allowed_users(settings: Option<&Value>) -> Vec<String> {
    let Some(Value::Array(users)) = settings.and_then(|s| s.get("allowFrom")) else {
        return Vec::new();
    };
    users
        .iter()
        .filter_map(|user| match user {
            Value::String(text) => Some(text.trim().to_string()),
            Value::Number(number) => Some(number.to_string()),
            _ => None,
        })
        .filter(|user| !user.is_empty() && user != "*")
        .collect()
}

/// The `to` of a call, as given.
fn given_target(args: &Value) -> Option<&str> {
    args["to"].as_str().map(str::trim).filter(|t| !t.is_empty())
}

/// Whether a call writes to a chat the owner did not set up for the agent
/// (in `ask` mode such a call waits for approval).
pub async fn asks_first(ctx: &ToolContext, args: &Value) -> bool {
    let Some(target) = given_target(args) else {
        // Where the owner last talked to it.
        return false;
    };
    if target.starts_with("session:") || ctx.owner_chats.contains(&ctx.agent.id, target) {
        return false;
    }
    match ctx.last_chats.last(&ctx.agent.id).await {
        Ok(last) => last.as_deref() != Some(target),
        // Cannot tell: ask.
        Err(_) => true,
    }
}

async fn call(ctx: &ToolContext, args: &Value) -> Result<String, ToolError> {
    let message = text(args, "text")?;
    if message.trim().is_empty() {
        return Err("the text is empty".into());
    }
    let target =
        match given_target(args) {
            Some(to) => to.to_string(),
            None => ctx.last_chats.last(&ctx.agent.id).await?.ok_or_else(|| {
                fail!("nobody has talked to you on a chat platform yet; say where with `to`")
            })?,
        };
    if let Some(id) = target.strip_prefix("session:") {
        let session = ctx.sessions.get(id).await?;
        if session.agent_id != ctx.agent.id {
            return Err(fail!("session {id:?} is not one of yours"));
        }
        ctx.sessions
            .append(&session, vec![LogMessage::plain(Role::Assistant, message)])
            .await?;
        crate::notifications::Notifier::new(ctx.sessions.db().clone())
            .message(&ctx.agent.id, id, message)
            .await;
    } else {
        ctx.channels.send(&target, message).await?;
    }
    Ok(format!("sent to {target}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owner_chats_come_from_bindings_allow_lists_and_heartbeats() {
        let config = crate::config::parse(
            Some(
                r#"{
                agents: { list: [
                    { id: "main", default: true },
                    { id: "ops", heartbeat: { every: "1h", deliverTo: "discord:777" } },
                ] },
                bindings: [
                    { agentId: "ops", match: { channel: "telegram", peer: { kind: "group", id: "-100" } } },
                ],
                plugins: { enabled: ["telegram"], telegram: { token: "t", allowFrom: [42, "43", "*"] } },
            }"#,
            ),
            None,
            &|_| None,
        )
        .unwrap();
        let chats = OwnerChats::from_config(&config);
        for (agent, target) in [
            ("main", "telegram:42"),
            ("ops", "telegram:43"),
            ("ops", "telegram:-100"),
            ("ops", "discord:777"),
        ] {
            assert!(chats.contains(agent, target), "{agent} {target}");
        }
        for (agent, target) in [
            ("main", "telegram:-100"),
            ("main", "discord:777"),
            ("ops", "telegram:*"),
            ("ops", "telegram:666"),
            ("ops", "discord:42"),
        ] {
            assert!(!chats.contains(agent, target), "{agent} {target}");
        }
    }
}
