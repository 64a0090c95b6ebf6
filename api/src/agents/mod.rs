//! Agents: what turns the proxy into an assistant. `"model": "onyx:main"`
//! runs an agent with its workspace files, memory and tools.
//!
//! - `registry`: which agents exist (config `agents.list` + API changes)
//! - `workspace`: their files in the object store, seeded from `config/workspace/`
//! - `prompt`: composing the system prompt from those files, memory and the inbox
//! - `conversation`: where every turn starts (agent, session, history, settings)
//! - `run_contract`: what goes into a run and the events that come out
//! - `runtime`: starting a run in its own task and recording how it ended
//! - `run_loop`: the tool-calling loop, emitting events as it goes
//! - `runs/`: durable runs (records, leases, re-attaching, cancelling)
//! - `tools/`: the built-in tools, one file per group
//! - `approvals`: dangerous calls waiting for a person in `ask` mode
//! - `context`, `compaction`: keeping a conversation within the model's window
//! - `last_chats`: where the owner last talked to each agent

pub mod approvals;
mod cli_runs;
mod compaction;
pub mod context;
pub mod conversation;
pub mod coordination;
mod error;
pub mod last_chats;
pub mod prompt;
pub mod registry;
mod run_contract;
mod run_loop;
pub mod runs;
pub mod runtime;
pub mod tools;
pub mod workspace;

use std::sync::Arc;

pub use compaction::Compacted;
pub use conversation::{Thread, Turn, TurnError};
pub use error::AgentError;
pub use registry::{AgentDef, AgentPatch, MAIN, Registry};
pub use run_contract::{Outcome, RunEvent, RunRequest};
pub use runs::{LiveRun, Runs};
pub use runtime::outcome;

use crate::background::Background;
use crate::channels::Channels;
use crate::config::{CompactionConfig, Config, ContextWindows, ToolsConfig};
use crate::inbox::Inbox;
use crate::memory::Memory;
use crate::providers::Router;
use crate::providers::types::Message;
use crate::sessions::Sessions;
use crate::storage::{Db, DbError, ObjectStore};
use crate::tasks::Tasks;

pub struct Agents {
    pub registry: Registry,
    pub approvals: approvals::Approvals,
    pub inbox: Inbox,
    pub runs: Arc<Runs>,
    pub last_chats: last_chats::LastChats,
    /// Skill folders, listed in the prompt and loaded by the `skill` tool.
    pub skills: Arc<crate::skills::Skills>,
    /// The background commands of agents on this replica (stopped on shutdown).
    pub processes: Arc<tools::Processes>,
    channels: Arc<Channels>,
    router: Arc<Router>,
    memory: Arc<Memory>,
    sessions: Arc<Sessions>,
    objects: Arc<dyn ObjectStore>,
    tools: Arc<ToolsConfig>,
    tasks: Arc<Tasks>,
    max_iterations: u32,
    context_windows: ContextWindows,
    compaction: CompactionConfig,
    wake: tokio::sync::mpsc::UnboundedSender<tools::Wake>,
    mcp: Arc<crate::mcp_client::McpClients>,
    /// Where `send_message` writes without asking in `ask` mode.
    owner_chats: Arc<tools::OwnerChats>,
    /// menos, for `menos_search` (`None` without `knowledge.menos`).
    menos: Option<Arc<crate::knowledge::Menos>>,
    /// The orchestration loop, plugged in once it exists (it runs agents).
    coordination: std::sync::OnceLock<Arc<dyn coordination::Coordination>>,
    /// Mints the tokens a subscription model's CLI calls `/mcp` with.
    run_tokens: Arc<crate::auth::RunTokens>,
    /// The runs whose CLI holds one.
    cli_runs: cli_runs::CliRuns,
}

pub struct Parts {
    pub router: Arc<Router>,
    pub memory: Arc<Memory>,
    pub sessions: Arc<Sessions>,
    pub objects: Arc<dyn ObjectStore>,
    pub db: Db,
    /// Where agent runs renew their leases ([`Db::dedicated`]).
    pub lease_db: Db,
    pub tasks: Arc<Tasks>,
    pub channels: Arc<Channels>,
    pub mcp: Arc<crate::mcp_client::McpClients>,
    pub menos: Option<Arc<crate::knowledge::Menos>>,
    pub run_tokens: Arc<crate::auth::RunTokens>,
}

impl Agents {
    /// Plugs in the orchestration loop for the mission tools (once).
    pub fn set_coordination(&self, coordination: Arc<dyn coordination::Coordination>) {
        let _ = self.coordination.set(coordination);
    }

    /// The tools' settings (`tools.*`), as configured.
    pub fn tool_settings(&self) -> &ToolsConfig {
        &self.tools
    }

    /// Builds the service and starts, in `background`, the loop that runs
    /// agents woken by messages.
    pub fn start(config: &Config, parts: Parts, background: &Background) -> Arc<Self> {
        let (wake, mut woken) = tokio::sync::mpsc::unbounded_channel();
        let inbox = Inbox::new(parts.db.clone());
        let runs = Runs::new(
            parts.db.clone(),
            parts.lease_db,
            config.agents.run_lease,
            crate::clock::system(),
            inbox.clone(),
            parts.sessions.clone(),
        );
        background.spawn("agents: run leases and interrupted runs", runs.upkeep());
        let agents = Arc::new(Self {
            registry: Registry::new(config, parts.db.clone()),
            last_chats: last_chats::LastChats::new(parts.db.clone()),
            skills: Arc::new(crate::skills::Skills::new(parts.objects.clone())),
            processes: Arc::default(),
            approvals: approvals::Approvals::new(parts.db),
            channels: parts.channels,
            inbox,
            runs,
            router: parts.router,
            memory: parts.memory,
            sessions: parts.sessions,
            objects: parts.objects,
            tools: Arc::new(config.tools.clone()),
            tasks: parts.tasks,
            max_iterations: config.agents.max_iterations.max(1),
            context_windows: config.context_windows.clone(),
            compaction: config.agents.compaction,
            wake,
            mcp: parts.mcp,
            owner_chats: Arc::new(tools::OwnerChats::from_config(config)),
            menos: parts.menos,
            coordination: std::sync::OnceLock::new(),
            run_tokens: parts.run_tokens,
            cli_runs: cli_runs::CliRuns::default(),
        });
        let weak = Arc::downgrade(&agents);
        background.spawn("agents: woken runs", async move {
            while let Some(request) = woken.recv().await {
                let Some(agents) = weak.upgrade() else { break };
                tokio::spawn(async move { agents.run_woken(request).await });
            }
        });
        agents
    }

    /// What the tools of agent `id` work with, outside a run (Onyx's MCP
    /// server); `None` for an unknown agent.
    pub async fn tools_for(&self, id: &str) -> Result<Option<tools::ToolContext>, DbError> {
        let Some(agent) = self.registry.get(id).await? else {
            return Ok(None);
        };
        if let Err(err) = self.prepare(&agent).await {
            tracing::warn!(agent = %agent.id, error = %err, "could not seed the agent's workspace");
        }
        Ok(Some(self.tool_context(&agent).await))
    }

    /// The agent, with its workspace seeded on first use.
    pub async fn prepare(&self, agent: &AgentDef) -> Result<(), crate::storage::StoreError> {
        workspace::seed_if_new(self.objects.as_ref(), &agent.id)
            .await
            .map(|_| ())
    }

    /// A run nobody watches: `send_to_agent` with `wake: true` or
    /// `sessions_send`, under the
    /// stricter of the sender's and the woken agent's permission modes.
    async fn run_woken(self: Arc<Self>, wake: tools::Wake) {
        let agent = match self.turn_agent(&wake.agent).await {
            Ok(agent) => agent,
            Err(err @ (TurnError::AgentGone(_) | TurnError::AgentDisabled(_))) => {
                tracing::debug!(agent = %wake.agent, error = %err, "not woken");
                return;
            }
            Err(err) => {
                tracing::warn!(agent = %wake.agent, error = %err, "cannot wake the agent");
                return;
            }
        };
        let turn = match wake.into {
            // `sessions_send`: the conversation goes on where it was.
            Some(note) => Turn::of(
                Thread::Open(note.session),
                Message::user(format!(
                    "{} wrote into this conversation:\n{}",
                    wake.from, note.text
                )),
                "session",
            ),
            None => Turn {
                history: false,
                ..Turn::of(
                    Thread::New("inbox".into()),
                    Message::user(format!(
                        "{} sent you a message (see Inbox). Act on it.",
                        wake.from
                    )),
                    "inbox",
                )
            },
        };
        let request = match self.open_turn(agent, turn, Some(wake.mode)).await {
            Ok(request) => request,
            Err(err) => {
                tracing::warn!(agent = %wake.agent, error = %err, "cannot wake the agent");
                return;
            }
        };
        // A failure is logged where the run ends.
        let _ = self.run_to_end(request).await;
    }
}
