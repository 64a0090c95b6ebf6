//! The built-in tools an agent can call, one file per group, each an OpenAI
//! function schema plus its implementation. A tool is `Read` (always
//! allowed), `Write` (changes only the agent's own memory, tasks and
//! messages: runs without a prompt in `ask` mode, wherever the run came from,
//! except `send_message` to a chat the owner did not set up for the agent)
//! or `Dangerous` (files, the shell, the web: waits for approval in `ask`
//! mode). `safe` mode offers only `Read` tools ([`asks_first`] decides). The tools of outside MCP
//! servers (`mcp__{server}__{tool}`) are offered beside them, of the kind
//! their server's `trust` says.

mod agents;
mod exec;
mod fs;
mod fs_search;
mod knowledge;
mod memory;
mod messages;
mod missions;
#[cfg(test)]
mod offered_snapshot;
mod process;
pub mod registry;
mod sandboxed;
mod sessions;
mod skill;
mod tasks;
pub mod tool;
pub mod web;

pub use memory::WRITE as MEMORY_WRITE;
pub use messages::OwnerChats;
pub use process::Processes;
pub use skill::SKILL;

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::Value;

use super::last_chats::LastChats;
use super::registry::AgentDef;
use crate::channels::Channels;
use crate::config::{PermissionMode, ToolTrust, ToolsConfig};
use crate::inbox::Inbox;
use crate::mcp_client::{McpClients, McpTool};
use crate::memory::{Memory, MemoryError};
use crate::providers::types::ToolDef;
use crate::sessions::{SessionError, Sessions};
use crate::storage::{DbError, StoreError};
use crate::tasks::TaskError;

/// Why a tool call failed. The model sees `for_model`: its own mistakes and
/// what a command, file or fetch said, in full; storage failures without
/// their internals (the log gets the whole chain).
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// What went wrong, in words for the model (bad arguments, a refused
    /// path, a command that failed).
    #[error("{0}")]
    Message(String),
    #[error(transparent)]
    Memory(#[from] MemoryError),
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error(transparent)]
    Task(#[from] TaskError),
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Channel(#[from] crate::channels::ChannelError),
}

impl ToolError {
    /// A dependency failed (storage, the embedder): not the model's mistake.
    fn is_internal(&self) -> bool {
        matches!(
            self,
            Self::Memory(
                MemoryError::Db(_)
                    | MemoryError::Store(StoreError::Unavailable(_))
                    | MemoryError::EmbedderUnavailable(_)
                    | MemoryError::EmbedderTimeout(_),
            ) | Self::Session(SessionError::Db(_) | SessionError::Store(_))
                | Self::Task(TaskError::Db(_))
                | Self::Db(_)
        )
    }

    /// What the model is told. (The embedder variants' own text is already
    /// free of detail; their sources hold it.)
    pub fn for_model(&self) -> String {
        match self {
            Self::Memory(MemoryError::EmbedderUnavailable(_) | MemoryError::EmbedderTimeout(_)) => {
                self.to_string()
            }
            _ if self.is_internal() => "storage is unavailable right now; try again later".into(),
            _ => self.to_string(),
        }
    }
}

impl From<String> for ToolError {
    fn from(message: String) -> Self {
        Self::Message(message)
    }
}

impl From<&str> for ToolError {
    fn from(message: &str) -> Self {
        Self::Message(message.into())
    }
}

/// A `ToolError::Message` with a formatted message.
macro_rules! fail {
    ($($message:tt)*) => {
        $crate::agents::tools::ToolError::Message(format!($($message)*))
    };
}
use fail;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolKind {
    Read,
    Write,
    Dangerous,
}

#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub name: Cow<'static, str>,
    pub description: Cow<'static, str>,
    pub parameters: Value,
    pub kind: ToolKind,
}

impl ToolSpec {
    /// The OpenAI `tools[]` entry.
    pub fn function(&self) -> ToolDef {
        ToolDef::function(
            self.name.as_ref(),
            self.description.as_ref(),
            self.parameters.clone(),
        )
    }
}

impl From<&tool::Tool> for ToolSpec {
    fn from(tool: &tool::Tool) -> Self {
        Self {
            name: Cow::Borrowed(tool.name),
            description: Cow::Borrowed(tool.description),
            parameters: (tool.parameters)(),
            kind: tool.kind,
        }
    }
}

impl From<McpTool> for ToolSpec {
    fn from(tool: McpTool) -> Self {
        Self {
            name: Cow::Owned(tool.name),
            description: Cow::Owned(tool.description),
            parameters: tool.input_schema,
            kind: match tool.trust {
                ToolTrust::Read => ToolKind::Read,
                ToolTrust::Write => ToolKind::Write,
                ToolTrust::Dangerous => ToolKind::Dangerous,
            },
        }
    }
}

/// A request to start a run of an agent now (`send_to_agent` with `wake`,
/// `sessions_send`).
#[derive(Debug, Clone)]
pub struct Wake {
    pub agent: String,
    pub from: String,
    /// The sender's permission mode: the woken run works under the stricter
    /// of it and the woken agent's own.
    pub mode: PermissionMode,
    /// `sessions_send`: the run continues this session, told this text.
    /// `None`: a new session that reads the inbox.
    pub into: Option<SessionNote>,
}

/// What `sessions_send` writes into a session.
#[derive(Debug, Clone)]
pub struct SessionNote {
    pub session: crate::sessions::SessionMeta,
    pub text: String,
}

/// Everything a tool may touch, for one run of one agent.
pub struct ToolContext {
    pub agent: AgentDef,
    pub memory: Arc<Memory>,
    pub sessions: Arc<Sessions>,
    pub inbox: Inbox,
    pub tasks: Arc<crate::tasks::Tasks>,
    pub settings: Arc<ToolsConfig>,
    pub known_agents: Vec<String>,
    /// Of those, the ones that are turned off (no run starts for them).
    pub disabled_agents: Vec<String>,
    pub wake: tokio::sync::mpsc::UnboundedSender<Wake>,
    pub channels: Arc<Channels>,
    pub last_chats: LastChats,
    /// The chats the config sets up for each agent (`send_message` asks before others).
    pub owner_chats: Arc<OwnerChats>,
    pub skills: Arc<crate::skills::Skills>,
    pub mcp: Arc<McpClients>,
    /// The orchestration loop, for the mission tools (`None` when it is off).
    pub coordination: Option<Arc<dyn super::coordination::Coordination>>,
    /// menos, for `menos_search` (`None` without `knowledge.menos`).
    pub menos: Option<Arc<crate::knowledge::Menos>>,
    /// This replica's background processes (`exec` with `background`, `process`).
    pub processes: Arc<Processes>,
}

/// A tool's answer: what the model sees, and whether it is an error.
#[derive(Debug, Clone)]
pub struct ToolOutput {
    pub content: String,
    pub is_error: bool,
}

impl ToolOutput {
    pub fn ok(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: false,
        }
    }

    pub fn error(content: impl Into<String>) -> Self {
        Self {
            content: format!("error: {}", content.into()),
            is_error: true,
        }
    }

    /// A one-line summary for tool activity events.
    pub fn summary(&self) -> String {
        crate::text::one_line(&self.content, 200)
    }
}

/// Every built-in tool this gateway offers (`web_search` only with a SearXNG
/// URL, `menos_search` only with `knowledge.menos`, the mission tools only
/// with the orchestration loop, `missions`).
pub fn all(settings: &ToolsConfig, missions: bool) -> Vec<ToolSpec> {
    registry::every()
        .filter(|t| t.needs.met(settings, missions))
        .map(ToolSpec::from)
        .collect()
}

/// The built-in tools Onyx's own `/mcp` endpoint serves.
pub fn over_mcp(settings: &ToolsConfig) -> Vec<ToolSpec> {
    registry::every()
        .filter(|t| t.over_mcp && t.needs.met(settings, false))
        .map(ToolSpec::from)
        .collect()
}

/// Whether `/mcp` serves the built-in tool `name`.
pub fn is_over_mcp(name: &str) -> bool {
    registry::find(name).is_some_and(|t| t.over_mcp)
}

/// The tools an agent is offered: the built-in ones and those of its MCP
/// servers that are up, through the global and the agent's allow/deny lists
/// (tool names or groups), then its permission mode (`safe` keeps read-only
/// tools). The mission tools only with the orchestration loop (`missions`).
pub fn offered(
    agent: &AgentDef,
    mode: PermissionMode,
    settings: &ToolsConfig,
    mcp: &McpClients,
    missions: bool,
) -> Vec<ToolSpec> {
    let covers = registry::covers;
    let allowed = |list: &[String], tool: &str| list.is_empty() || list.iter().any(|e| covers(e, tool));
    let denied = |list: &[String], tool: &str| list.iter().any(|e| covers(e, tool));
    let outside = mcp.tools(agent.mcp.as_deref()).into_iter().map(ToolSpec::from);
    all(settings, missions)
        .into_iter()
        .chain(outside)
        .filter(|t| allowed(&settings.allow, &t.name) && allowed(&agent.tools_allow, &t.name))
        .filter(|t| !denied(&settings.deny, &t.name) && !denied(&agent.tools_deny, &t.name))
        .filter(|t| mode != PermissionMode::Safe || t.kind == ToolKind::Read)
        .collect()
}

/// Whether a call of `spec` waits for a person's approval first: in `ask`
/// mode, a `Dangerous` tool, or one whose declaration says so for these
/// arguments (a message to a chat the owner did not set up).
pub async fn asks_first(ctx: &ToolContext, spec: &ToolSpec, mode: PermissionMode, arguments: &Value) -> bool {
    if mode != PermissionMode::Ask {
        return false;
    }
    if spec.kind == ToolKind::Dangerous {
        return true;
    }
    match registry::find(&spec.name).and_then(|t| t.asks_first) {
        Some(asks) => asks(ctx, arguments).await,
        None => false,
    }
}

/// Runs one tool call; unknown tools and bad arguments are errors the model sees.
pub async fn call(ctx: &ToolContext, name: &str, arguments: &Value) -> ToolOutput {
    if name.starts_with(crate::config::MCP_PREFIX) {
        let outcome = ctx.mcp.call(name, arguments).await;
        return if outcome.is_error {
            tracing::debug!(agent = %ctx.agent.id, tool = name, error = %outcome.text, "MCP tool call failed");
            ToolOutput::error(outcome.text)
        } else {
            ToolOutput::ok(outcome.text)
        };
    }
    let result = match registry::find(name) {
        Some(tool) => (tool.call)(ctx, arguments).await,
        None => Err(fail!("there is no tool named {name:?}")),
    };
    match result {
        Ok(content) => ToolOutput::ok(content),
        Err(err) => {
            let chain = crate::error_chain::chain(&err);
            if err.is_internal() {
                tracing::warn!(agent = %ctx.agent.id, tool = name, error = %chain, "tool call failed");
            } else {
                tracing::debug!(agent = %ctx.agent.id, tool = name, error = %chain, "tool call refused");
            }
            ToolOutput::error(err.for_model())
        }
    }
}

/// A required string argument.
pub(super) fn text<'a>(arguments: &'a Value, name: &str) -> Result<&'a str, ToolError> {
    arguments[name]
        .as_str()
        .ok_or_else(|| fail!("argument {name:?} is required and must be a string"))
}

pub(super) fn number(arguments: &Value, name: &str, default: u64, max: u64) -> u64 {
    arguments[name].as_u64().unwrap_or(default).min(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ask_mode_runs_own_memory_task_and_message_tools_and_asks_for_the_rest() {
        let specs = all(&ToolsConfig::default(), true);
        let write: Vec<&str> = specs
            .iter()
            .filter(|t| t.kind == ToolKind::Write)
            .map(|t| t.name.as_ref())
            .collect();
        for name in [
            "memory_write",
            "schedule_task",
            "pause_task",
            "resume_task",
            "cancel_task",
            "send_to_agent",
            "send_message",
        ] {
            assert!(write.contains(&name), "{name}: {write:?}");
        }
        let dangerous: Vec<&str> = specs
            .iter()
            .filter(|t| t.kind == ToolKind::Dangerous)
            .map(|t| t.name.as_ref())
            .collect();
        assert_eq!(dangerous, ["web_fetch", "fs_write", "fs_edit", "exec", "process"]);
    }
}
