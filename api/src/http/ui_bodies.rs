//! The JSON bodies of the routes the control UI reads that handlers used to
//! build with `json!`, as typed structs (same field names and shapes on the
//! wire). Under `cfg(test)` they, and the domain types they carry, derive
//! `ts_rs::TS`; `ts_types` checks that `frontend/src/lib/api/types/` holds
//! exactly the TypeScript ts-rs generates from them.

use serde::Serialize;

use crate::agents::AgentDef;
use crate::agents::registry::mode_name;
use crate::health::DependencyHealth;
use crate::observability::Counters;
use crate::plugins::PluginStatus;
use crate::providers::breaker::CircuitView;
use crate::providers::catalog::ModelEntry;
use crate::sessions::{LogMessage, SessionMeta};
use crate::tasks::store::{TaskRunStatus, TaskTrigger, Tokens};
use crate::tasks::{ContextMode, ScheduleType, Task, TaskKind, TaskRun, TaskStatus};

/// `{"object": "list", "data": [...]}`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[schemars(rename = "ListOf{T}")]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct List<T> {
    pub object: &'static str,
    pub data: Vec<T>,
}

impl<T> List<T> {
    pub fn new(data: Vec<T>) -> Self {
        Self { object: "list", data }
    }
}

/// `GET /v1/sessions`: one page, newest first.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct SessionPage {
    pub object: &'static str,
    pub data: Vec<SessionMeta>,
    pub next_cursor: Option<String>,
    pub has_more: bool,
}

/// `GET /v1/sessions/{id}`: the metadata and a page of its messages.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct SessionDetail {
    #[serde(flatten)]
    pub session: SessionMeta,
    pub object: &'static str,
    #[cfg_attr(test, ts(as = "Vec<crate::sessions::LogMessageShape>"))]
    pub messages: Vec<LogMessage>,
    pub total_messages: usize,
}

/// What a `DELETE` of a session or a task answers.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Deleted {
    pub id: String,
    pub object: &'static str,
    pub deleted: bool,
}

impl Deleted {
    pub fn new(id: String, object: &'static str) -> Self {
        Self {
            id,
            object,
            deleted: true,
        }
    }
}

/// `DELETE /v1/memory/files/{agent}/{path}`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct MemoryFileDeleted {
    pub agent: String,
    pub path: String,
    pub deleted: bool,
}

/// `DELETE /v1/keys/{id}`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct KeyRevoked {
    pub id: String,
    pub object: &'static str,
    pub revoked: bool,
}

/// `POST /v1/keys`: the stored key and, this once, the key itself.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct CreatedKey {
    #[serde(flatten)]
    pub stored: crate::auth::StoredKey,
    pub key: String,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ToolLists {
    pub allow: Vec<String>,
    pub deny: Vec<String>,
}

/// One agent in `/v1/agents`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct AgentView {
    pub id: String,
    pub object: &'static str,
    pub name: String,
    pub model: Option<String>,
    pub default: bool,
    pub enabled: bool,
    /// `safe`, `ask` or `allow-all`.
    pub permission_mode: &'static str,
    pub tools: ToolLists,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u32>,
    /// IANA name: the timezone of the agent's "today".
    pub timezone: &'static str,
    /// `config` or `api`.
    pub source: &'static str,
}

impl From<&AgentDef> for AgentView {
    fn from(agent: &AgentDef) -> Self {
        Self {
            id: agent.id.clone(),
            object: "agent",
            name: agent.name.clone(),
            model: agent.model.clone(),
            default: agent.default,
            enabled: agent.enabled,
            permission_mode: mode_name(agent.permission_mode),
            tools: ToolLists {
                allow: agent.tools_allow.clone(),
                deny: agent.tools_deny.clone(),
            },
            temperature: agent.temperature,
            max_tokens: agent.max_tokens,
            timezone: agent.timezone.name(),
            source: agent.source,
        }
    }
}

/// `GET /v1/agents/{id}`: the agent and its memory files.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct AgentDetail {
    #[serde(flatten)]
    pub agent: AgentView,
    pub files: Vec<String>,
}

/// `POST /v1/approvals/{id}`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ApprovalDecision {
    pub id: String,
    /// `approve` or `deny`.
    pub decision: String,
}

/// `GET /v1/status`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct GatewayStatus {
    pub version: &'static str,
    pub uptime_seconds: u64,
    pub counters: Counters,
    pub plugins: Vec<PluginStatus>,
}

/// `GET /health` without a key, the UI's session, or a key-less gateway: the
/// status alone (the UI, signed in, reads [`Health`]).
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct HealthSummary {
    /// `ok`, or `degraded` when a dependency is down.
    pub status: &'static str,
}

/// `GET /health`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Health {
    /// `ok`, or `degraded` when a dependency is down.
    pub status: &'static str,
    pub version: &'static str,
    #[serde(rename = "uptimeSeconds")]
    pub uptime_seconds: u64,
    pub dependencies: Vec<DependencyHealth>,
    /// Each provider's circuit breaker on this replica.
    pub circuits: Vec<CircuitView>,
    /// Whether the `exec` tool's commands are confined here.
    pub exec: ExecHealth,
    /// Each configured MCP server's client on this replica.
    pub mcp: Vec<crate::mcp_client::McpServerView>,
}

/// The `exec` sandbox, as `/health` reports it.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ExecHealth {
    /// Files (Landlock), sockets (seccomp) and descendants (PID namespace or cgroup) are held.
    pub confined: bool,
    /// Commands get no network (`tools.exec.network` is false and a network namespace can be made).
    #[serde(rename = "networkCut")]
    pub network_cut: bool,
    /// `tools.exec.requireSandbox`: unconfined commands are refused.
    #[serde(rename = "requireSandbox")]
    pub require_sandbox: bool,
    pub detail: String,
    /// Each part of the confinement, as the helper found it on this kernel.
    pub confinement: crate::sandbox::Support,
}

/// `GET /auth/me`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Me {
    pub authenticated: bool,
    pub auth_required: bool,
    pub password_configured: bool,
}

/// One entry of `GET /v1/models`: a provider's model, an alias, or an agent
/// as `onyx:{id}` (agents carry their `name`).
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ModelView {
    pub id: String,
    pub object: &'static str,
    pub created: u64,
    pub owned_by: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub name: Option<String>,
}

impl From<ModelEntry> for ModelView {
    fn from(model: ModelEntry) -> Self {
        Self {
            id: model.id,
            object: model.object,
            created: model.created,
            owned_by: model.owned_by,
            name: None,
        }
    }
}

/// A scheduled task as the API shows it (`running` instead of the lease).
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct TaskView {
    pub id: String,
    pub object: &'static str,
    pub agent: String,
    pub name: String,
    pub prompt: String,
    pub kind: TaskKind,
    pub schedule_type: ScheduleType,
    pub schedule_value: String,
    pub timezone: String,
    pub context_mode: ContextMode,
    pub deliver_to: Option<String>,
    pub status: TaskStatus,
    pub next_run: Option<String>,
    pub last_run: Option<String>,
    pub last_status: Option<String>,
    pub last_error: Option<String>,
    pub consecutive_failures: u32,
    pub running: bool,
    pub created_at: String,
    pub updated_at: String,
    pub created_by: String,
}

impl From<&Task> for TaskView {
    fn from(task: &Task) -> Self {
        Self {
            id: task.id.clone(),
            object: "task",
            agent: task.agent.clone(),
            name: task.name.clone(),
            prompt: task.prompt.clone(),
            kind: task.kind,
            schedule_type: task.schedule_type,
            schedule_value: task.schedule_value.clone(),
            timezone: task.timezone.clone(),
            context_mode: task.context_mode,
            deliver_to: task.deliver_to.clone(),
            status: task.status.clone(),
            next_run: task.next_run.clone(),
            last_run: task.last_run.clone(),
            last_status: task.last_status.clone(),
            last_error: task.last_error.clone(),
            consecutive_failures: task.consecutive_failures,
            running: task.lease_run.is_some(),
            created_at: task.created_at.clone(),
            updated_at: task.updated_at.clone(),
            created_by: task.created_by.clone(),
        }
    }
}

/// One run of a task.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct RunView {
    pub id: String,
    pub object: &'static str,
    pub task: String,
    pub agent: String,
    pub trigger: TaskTrigger,
    pub scheduled_for: Option<String>,
    pub started_at: String,
    pub finished_at: Option<String>,
    pub status: TaskRunStatus,
    pub result: Option<String>,
    pub error: Option<String>,
    pub tokens: Tokens,
    pub session_id: Option<String>,
    pub replica: String,
    pub delivered_to: Option<String>,
    pub delivery_error: Option<String>,
}

impl From<&TaskRun> for RunView {
    fn from(run: &TaskRun) -> Self {
        Self {
            id: run.id.clone(),
            object: "task.run",
            task: run.task.clone(),
            agent: run.agent.clone(),
            trigger: run.trigger,
            scheduled_for: run.scheduled_for.clone(),
            started_at: run.started_at.clone(),
            finished_at: run.finished_at.clone(),
            status: run.status.clone(),
            result: run.result.clone(),
            error: run.error.clone(),
            tokens: run.tokens.clone(),
            session_id: run.session_id.clone(),
            replica: run.replica.clone(),
            delivered_to: run.delivered_to.clone(),
            delivery_error: run.delivery_error.clone(),
        }
    }
}

/// `POST /v1/sessions/{id}/compact`: what compacting did.
#[derive(Debug, Default, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct CompactionReport {
    /// `false`: the session was too short to compact.
    pub compacted: bool,
    /// Older turns summarized (or dropped, with `fallback`).
    pub turns: usize,
    pub before_tokens: usize,
    pub after_tokens: usize,
    pub fallback: bool,
    pub notice: Option<String>,
}

/// What `x_onyx` in an agent's streamed chat chunk says about tool activity.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolActivity {
    ToolCallStarted {
        id: String,
        name: String,
        arguments: serde_json::Value,
    },
    ToolCallFinished {
        id: String,
        name: String,
        result_summary: String,
        is_error: bool,
    },
    ApprovalRequired {
        approval_id: String,
        name: String,
        arguments: serde_json::Value,
    },
    /// The conversation was compacted to fit the model's context window.
    Compacted {
        notice: String,
        before_tokens: usize,
        after_tokens: usize,
        /// Summarizing failed: the oldest turns were dropped instead.
        fallback: bool,
    },
}
