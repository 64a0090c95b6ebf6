//! `agents`: OpenClaw's block of shared defaults (model, permission mode,
//! timezone, iterations, the run lease, compaction) and the agent list. An
//! agent's heartbeat is checked in `scheduling.rs`, its workspace in
//! `workspace.rs`, its limits in `usage.rs` and its MCP servers in `mcp.rs`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::ConfigError;
use super::fields::check_name;
use super::mcp::McpServerConfig;
use super::scheduling::HeartbeatConfig;

/// OpenClaw's `agents` block: shared defaults plus the agent list.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawAgents {
    pub defaults: Option<RawAgentDefaults>,
    #[serde(default)]
    pub list: Vec<RawAgent>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawAgentDefaults {
    pub model: Option<String>,
    pub permission_mode: Option<String>,
    pub timezone: Option<String>,
    pub max_iterations: Option<u32>,
    /// How long a run stays `running` after its replica stops renewing it.
    pub run_lease_seconds: Option<u64>,
    #[serde(default)]
    pub compaction: RawCompaction,
}

/// When a conversation nears the model's context window, older turns become a summary.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawCompaction {
    pub enabled: Option<bool>,
    /// The share of the context window a request may fill before compacting.
    pub threshold: Option<f64>,
    pub timeout_seconds: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawAgent {
    pub id: String,
    pub name: Option<String>,
    #[serde(default)]
    pub default: bool,
    pub model: Option<String>,
    pub workspace: Option<String>,
    pub tools: Option<RawToolPolicy>,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u32>,
    pub permission_mode: Option<String>,
    pub heartbeat: Option<Value>,
    /// IANA name; default `agents.defaults.timezone`.
    pub timezone: Option<String>,
    /// Budgets and rate limits of this agent's model calls.
    pub limits: Option<crate::limits::Limits>,
    /// The MCP servers whose tools this agent is offered (default: all).
    pub mcp: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawToolPolicy {
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub deny: Vec<String>,
}

/// Serialized as the config spells it (`safe`, `ask`, `allow-all`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PermissionMode {
    Safe,
    Ask,
    AllowAll,
}

impl PermissionMode {
    /// The stricter of the two (`safe` over `ask` over `allow-all`).
    pub fn stricter(self, other: Self) -> Self {
        let rank = |mode| match mode {
            Self::Safe => 0,
            Self::Ask => 1,
            Self::AllowAll => 2,
        };
        if rank(other) < rank(self) { other } else { self }
    }
}

#[derive(Debug)]
pub struct AgentsConfig {
    pub default_model: Option<String>,
    pub default_permission_mode: PermissionMode,
    /// `agents.defaults.timezone`, else the host's: agents without their own
    /// and tasks without their own use it.
    pub timezone: chrono_tz::Tz,
    pub max_iterations: u32,
    /// A run whose replica has not renewed it for this long is `interrupted`.
    pub run_lease: Duration,
    pub compaction: CompactionConfig,
    pub list: Vec<AgentConfig>,
}

#[derive(Debug)]
pub struct AgentConfig {
    pub id: String,
    pub name: Option<String>,
    pub default: bool,
    pub model: Option<String>,
    /// OpenClaw's workspace path; Onyx keeps workspaces in the object store and
    /// uses this only as the agent's local work dir for file tools.
    pub workspace: Option<String>,
    pub tools_allow: Vec<String>,
    pub tools_deny: Vec<String>,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u32>,
    pub permission_mode: Option<PermissionMode>,
    /// How often the agent wakes for its HEARTBEAT.md checklist (off when `None`).
    pub heartbeat: Option<HeartbeatConfig>,
    /// Decides the agent's "today" (daily-log names, the prompt's date and time).
    pub timezone: chrono_tz::Tz,
    pub limits: Option<crate::limits::Limits>,
    /// MCP servers whose tools the agent is offered; `None`: all of them.
    pub mcp: Option<Vec<String>>,
}

/// Compacting a conversation that nears the model's context window.
#[derive(Debug, Clone, Copy)]
pub struct CompactionConfig {
    pub enabled: bool,
    /// The share of the window a request may fill (0.75: three quarters).
    pub threshold: f64,
    /// The memory flush and the summary together; past it, the oldest turns are dropped instead.
    pub timeout: Duration,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            threshold: 0.75,
            timeout: Duration::from_secs(120),
        }
    }
}

fn permission_mode(text: &str, path: &str) -> Result<PermissionMode, ConfigError> {
    match text {
        "safe" => Ok(PermissionMode::Safe),
        "ask" => Ok(PermissionMode::Ask),
        "allow-all" | "allowAll" => Ok(PermissionMode::AllowAll),
        other => Err(ConfigError::invalid(
            path,
            format!("{other:?} is not \"safe\", \"ask\" or \"allow-all\""),
        )),
    }
}

fn compaction(raw: RawCompaction) -> Result<CompactionConfig, ConfigError> {
    let defaults = CompactionConfig::default();
    let threshold = raw.threshold.unwrap_or(defaults.threshold);
    if !(0.2..=0.95).contains(&threshold) {
        return Err(ConfigError::invalid(
            "agents.defaults.compaction.threshold",
            format!("{threshold} is not a share of the context window from 0.2 to 0.95"),
        ));
    }
    Ok(CompactionConfig {
        enabled: raw.enabled.unwrap_or(defaults.enabled),
        threshold,
        timeout: raw
            .timeout_seconds
            .filter(|s| *s > 0)
            .map_or(defaults.timeout, Duration::from_secs),
    })
}

pub(super) fn agents(
    raw: RawAgents,
    mcp_servers: &BTreeMap<String, McpServerConfig>,
) -> Result<AgentsConfig, ConfigError> {
    let defaults = raw.defaults.unwrap_or_default();
    let timezone = super::scheduling::timezone(
        defaults.timezone.as_deref(),
        "agents.defaults.timezone",
        crate::clock::host_timezone,
    )?;
    let default_permission_mode = match &defaults.permission_mode {
        Some(mode) => permission_mode(mode, "agents.defaults.permissionMode")?,
        None => PermissionMode::Ask,
    };
    let mut list = Vec::with_capacity(raw.list.len());
    let mut seen = std::collections::BTreeSet::new();
    for (index, agent) in raw.list.into_iter().enumerate() {
        let path = format!("agents.list[{index}]");
        check_name(&agent.id, &format!("{path}.id"))?;
        if !seen.insert(agent.id.clone()) {
            return Err(ConfigError::invalid(
                format!("{path}.id"),
                format!("duplicate agent id {:?}", agent.id),
            ));
        }
        let permission_mode = agent
            .permission_mode
            .as_deref()
            .map(|m| permission_mode(m, &format!("{path}.permissionMode")))
            .transpose()?;
        let (tools_allow, tools_deny) = agent.tools.map(|t| (t.allow, t.deny)).unwrap_or_default();
        let tools_allow = super::tools::trimmed(tools_allow);
        let tools_deny = super::tools::trimmed(tools_deny);
        super::mcp::check_tool_entries(&tools_allow, mcp_servers, &format!("{path}.tools.allow"))?;
        super::mcp::check_tool_entries(&tools_deny, mcp_servers, &format!("{path}.tools.deny"))?;
        list.push(AgentConfig {
            id: agent.id,
            name: agent.name,
            default: agent.default,
            model: agent.model,
            workspace: agent.workspace,
            tools_allow,
            tools_deny,
            temperature: agent.temperature,
            max_tokens: agent.max_tokens,
            permission_mode,
            heartbeat: super::scheduling::heartbeat(agent.heartbeat.as_ref(), &format!("{path}.heartbeat"))?,
            timezone: super::scheduling::timezone(
                agent.timezone.as_deref(),
                &format!("{path}.timezone"),
                || timezone,
            )?,
            limits: super::usage::limits(agent.limits, &format!("{path}.limits"))?,
            mcp: super::mcp::agent_servers(agent.mcp, mcp_servers, &format!("{path}.mcp"))?,
        });
    }
    if list.iter().filter(|a| a.default).count() > 1 {
        return Err(ConfigError::invalid(
            "agents.list",
            "more than one agent is marked default",
        ));
    }
    Ok(AgentsConfig {
        default_model: defaults.model,
        default_permission_mode,
        timezone,
        max_iterations: defaults.max_iterations.unwrap_or(20),
        run_lease: match defaults.run_lease_seconds.unwrap_or(30) {
            0 => {
                return Err(ConfigError::invalid(
                    "agents.defaults.runLeaseSeconds",
                    "must be at least 1",
                ));
            }
            seconds => Duration::from_secs(seconds),
        },
        compaction: compaction(defaults.compaction)?,
        list,
    })
}
