//! `tools`: the built-in tools' settings (web search and fetch, `exec` and
//! its sandbox, how long an approval waits) and the tool allow and deny
//! lists every agent shares.
//!
//! Allow and deny entries (here and per agent) are only trimmed here; which
//! built-in tools and groups exist is the agents' tool registry's to say
//! (`agents::tools::registry::check_config` refuses unknown names at startup,
//! with their config path). MCP tools are named `mcp__{server}__{tool}`;
//! `group:mcp` names them all.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use url::Url;

use super::ConfigError;
use super::fields::{Env, parse_url};

/// Every MCP server's tools (`mcp__{server}__{tool}`).
pub const MCP_GROUP: &str = "group:mcp";
pub const MCP_PREFIX: &str = "mcp__";

/// Settings of the agents' built-in tools.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawTools {
    #[serde(default)]
    pub web_search: RawWebSearch,
    #[serde(default)]
    pub web_fetch: RawWebFetch,
    #[serde(default)]
    pub exec: RawExec,
    pub approval_timeout_seconds: Option<u64>,
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub deny: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawWebSearch {
    pub searxng_url: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawWebFetch {
    #[serde(default)]
    pub allow_private: Vec<String>,
    pub max_bytes: Option<usize>,
    pub timeout_seconds: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawExec {
    pub timeout_seconds: Option<u64>,
    pub max_output_bytes: Option<usize>,
    pub network: Option<bool>,
    pub require_sandbox: Option<bool>,
    /// Extra read-only paths (a tool installed under `/opt`).
    #[serde(default)]
    pub read_only: Vec<String>,
    #[serde(default)]
    pub limits: RawExecLimits,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawExecLimits {
    pub cpu_seconds: Option<u64>,
    pub memory_mb: Option<u64>,
    pub processes: Option<u64>,
    pub file_size_mb: Option<u64>,
}

/// How `exec` is confined (`tools.exec.network`, `requireSandbox`, `readOnly`, `limits`).
#[derive(Debug, Clone, Default)]
pub struct ExecSandbox {
    /// Let commands reach the network (default: cut; refused where it cannot be).
    pub network: bool,
    /// Refuse to run commands that cannot be fully confined (see
    /// [`ExecSandbox::resolve_require`]).
    pub require: bool,
    /// `tools.exec.requireSandbox` as written (`None`: decided by the listen address).
    pub require_setting: Option<bool>,
    /// Readable by commands beside the system directories.
    pub read_only: Vec<PathBuf>,
    pub limits: crate::sandbox::Limits,
    /// Never readable by a command: the data dir, the config file, `$HOME`.
    pub hidden: Vec<PathBuf>,
}

impl ExecSandbox {
    /// `requireSandbox` unless written: on when the gateway listens beyond
    /// loopback (the Docker image does), since then others reach its agents.
    pub fn resolve_require(&mut self, listen: std::net::SocketAddr) {
        self.require = self.require_setting.unwrap_or(!listen.ip().is_loopback());
    }
}

#[derive(Debug, Clone)]
pub struct ToolsConfig {
    /// SearXNG's base URL; without one `web_search` is not offered.
    pub searxng_url: Option<Url>,
    /// Whether `knowledge.menos` is configured; without it `menos_search`
    /// is not offered.
    pub menos_search: bool,
    /// Hosts or IP addresses `web_fetch` may reach even though they are
    /// private, loopback or link-local.
    pub fetch_allow_private: Vec<String>,
    pub fetch_max_bytes: usize,
    pub fetch_timeout: Duration,
    pub exec_timeout: Duration,
    pub exec_max_output: usize,
    pub exec_sandbox: ExecSandbox,
    /// How long a dangerous tool call waits for approval in `ask` mode.
    pub approval_timeout: Duration,
    /// `tools.allow` / `tools.deny` for every agent: tool names and groups.
    pub allow: Vec<String>,
    pub deny: Vec<String>,
}

impl Default for ToolsConfig {
    fn default() -> Self {
        Self {
            searxng_url: None,
            menos_search: false,
            fetch_allow_private: Vec::new(),
            fetch_max_bytes: 2 * 1024 * 1024,
            fetch_timeout: Duration::from_secs(15),
            exec_timeout: Duration::from_secs(60),
            exec_max_output: 64 * 1024,
            exec_sandbox: ExecSandbox::default(),
            approval_timeout: Duration::from_secs(300),
            allow: Vec::new(),
            deny: Vec::new(),
        }
    }
}

pub(super) fn tools(raw: RawTools, env: Env) -> Result<ToolsConfig, ConfigError> {
    let defaults = ToolsConfig::default();
    let searxng = raw
        .web_search
        .searxng_url
        .or_else(|| env("SEARXNG_URL"))
        .filter(|u| !u.is_empty());
    Ok(ToolsConfig {
        // Set from `knowledge.menos` once that is read.
        menos_search: false,
        searxng_url: searxng
            .as_deref()
            .map(|u| parse_url(u, "tools.webSearch.searxngUrl"))
            .transpose()?,
        fetch_allow_private: raw.web_fetch.allow_private,
        fetch_max_bytes: raw.web_fetch.max_bytes.unwrap_or(defaults.fetch_max_bytes),
        fetch_timeout: raw
            .web_fetch
            .timeout_seconds
            .map_or(defaults.fetch_timeout, Duration::from_secs),
        exec_timeout: raw
            .exec
            .timeout_seconds
            .map_or(defaults.exec_timeout, Duration::from_secs),
        exec_max_output: raw.exec.max_output_bytes.unwrap_or(defaults.exec_max_output),
        exec_sandbox: exec_sandbox(&raw.exec)?,
        approval_timeout: raw
            .approval_timeout_seconds
            .map_or(defaults.approval_timeout, Duration::from_secs),
        allow: trimmed(raw.allow),
        deny: trimmed(raw.deny),
    })
}

fn exec_sandbox(raw: &RawExec) -> Result<ExecSandbox, ConfigError> {
    let defaults = crate::sandbox::Limits::default();
    let positive = |value: Option<u64>, default: u64, path: &str, scale: u64| match value {
        None => Ok(default),
        Some(0) => Err(ConfigError::invalid(
            format!("tools.exec.limits.{path}"),
            "must be at least 1",
        )),
        Some(n) => Ok(n.saturating_mul(scale)),
    };
    let l = &raw.limits;
    const MB: u64 = 1 << 20;
    let read_only = raw
        .read_only
        .iter()
        .map(|path| {
            let path = PathBuf::from(path);
            if path.is_absolute() {
                Ok(path)
            } else {
                Err(ConfigError::invalid(
                    "tools.exec.readOnly",
                    format!("{path:?} must be an absolute path"),
                ))
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ExecSandbox {
        network: raw.network.unwrap_or(false),
        require: raw.require_sandbox.unwrap_or(false),
        require_setting: raw.require_sandbox,
        read_only,
        limits: crate::sandbox::Limits {
            cpu_seconds: positive(l.cpu_seconds, defaults.cpu_seconds, "cpuSeconds", 1)?,
            memory_bytes: positive(l.memory_mb, defaults.memory_bytes, "memoryMb", MB)?,
            processes: positive(l.processes, defaults.processes, "processes", 1)?,
            file_bytes: positive(l.file_size_mb, defaults.file_bytes, "fileSizeMb", MB)?,
        },
        hidden: Vec::new(),
    })
}

/// Allow or deny entries without surrounding white space.
pub(super) fn trimmed(names: Vec<String>) -> Vec<String> {
    names.into_iter().map(|name| name.trim().to_string()).collect()
}
