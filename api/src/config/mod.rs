//! Loading `onyx.json5`: JSON5 parsing, `${ENV}` substitution, OpenClaw-compatible
//! keys, and validation into typed settings. No side effects beyond reading the
//! file and the environment.
//!
//! Lookup order: `--config PATH`, then `$ONYX_CONFIG`, then
//! `~/.config/onyx/onyx.json5`; with none of them present the embedded default
//! (no file at all) is used.
//!
//! Each section of the file has its own module holding the section as written
//! (serde structs that deny unknown keys, so a typo names its path), its
//! validated type and its checks: `gateway` (with `proxy` and `cors`),
//! `providers`, `models`, `storage`, `memory` (with `embedder`), `agents`
//! (with `workspace`), `bindings`, `plugins`, `tools`, `scheduling` (the
//! scheduler and heartbeats), `usage`, `mcp`, `orchestration` and
//! `knowledge`. This module reads the file and assembles
//! them (text → [`RawConfig`] → [`Config`]); `fields` and `env` are the
//! parsers they share.

mod agents;
mod bindings;
mod cors;
mod embedder;
mod env;
mod fields;
mod gateway;
mod knowledge;
mod mcp;
mod memory;
mod models;
mod orchestration;
mod plugins;
mod providers;
mod proxy;
mod scheduling;
mod storage;
mod tools;
mod usage;
mod workspace;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

pub use agents::{AgentConfig, AgentsConfig, CompactionConfig, PermissionMode};
pub use bindings::Binding;
pub use cors::Cors;
pub use embedder::built_in as built_in_embedder;
pub use embedder::{EmbedderConfig, LocalEmbedderConfig, ProviderEmbedderConfig, RerankerConfig};
pub use gateway::{DEFAULT_LISTEN, DEFAULT_MAX_BODY_BYTES, GatewayConfig, LogFormat};
pub use knowledge::{KnowledgeConfig, MenosConfig};
pub use mcp::RawMcpServer as McpServerSpec;
pub use mcp::mcp_server_from_spec;
pub use mcp::{McpConfig, McpOAuthClient, McpServerConfig, McpStartup, McpTransport, ToolTrust};
pub use memory::{DEFAULT_RESIDENT_BUDGET_MB, Fusion, MemoryConfig};
pub use models::ContextWindows;
pub use orchestration::OrchestrationConfig;
pub use plugins::PluginsConfig;
pub use providers::RawProvider as ProviderSpec;
pub use providers::{
    BedrockConfig, CircuitBreakerConfig, ProviderConfig, ProviderKind, VertexConfig, detected_provider,
    is_deployment_name, ollama_url, provider_from_spec,
};
pub use proxy::{IpNet, TrustedProxy};
pub use scheduling::{CatchUp, HeartbeatConfig, SchedulerConfig};
pub use storage::{DEFAULT_CONNECTIONS, EmbeddedStore, ObjectStoreConfig, StorageConfig, SurrealConfig};
pub use tools::{ExecSandbox, MCP_GROUP, MCP_PREFIX, ToolsConfig};
pub use usage::{ModelPrice, UsageConfig};

use crate::model_ref::ModelRef;
use fields::Env;

/// A config that cannot be used; startup stops and prints it.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}:{line}:{column}: {message}")]
    Syntax {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
}

impl ConfigError {
    pub(crate) fn invalid(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// Where the config came from: an explicit path, or nothing (embedded default).
pub fn locate(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(path) = explicit {
        return Some(path.to_path_buf());
    }
    if let Some(path) = std::env::var_os("ONYX_CONFIG").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let home = std::env::var_os("HOME")?;
    let default = PathBuf::from(home).join(".config/onyx/onyx.json5");
    default.is_file().then_some(default)
}

/// Loads and validates the config at `path` (or the embedded default for `None`),
/// reading `${VAR}`s and zero-config providers from the process environment.
pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
    let env = |name: &str| std::env::var(name).ok();
    let text = match path {
        Some(path) => Some(std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?),
        None => None,
    };
    parse(text.as_deref(), path, &env)
}

/// Parses config text (or nothing) with an explicit environment; the pure core of [`load`].
pub fn parse(
    text: Option<&str>,
    path: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    let display_path = path
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("<config>"));
    let mut tree: serde_json::Value = match text {
        Some(text) => json5::from_str(text).map_err(|err| {
            let (line, column) = err
                .position()
                .map(|p| (p.line + 1, p.column + 1))
                .unwrap_or_else(|| end_of(text));
            ConfigError::Syntax {
                path: display_path.clone(),
                line,
                column,
                message: err.to_string(),
            }
        })?,
        None => serde_json::Value::Object(Default::default()),
    };
    if !tree.is_object() {
        return Err(ConfigError::invalid("<root>", "the config must be an object"));
    }
    env::substitute(&mut tree, env)?;
    let raw: RawConfig = serde_path_to_error::deserialize(tree).map_err(|err| {
        let path = err.path().to_string();
        // `.` is the root; an empty path is an unknown key `""` at the root.
        let path = if path == "." || path.is_empty() {
            "<root>".to_string()
        } else {
            path
        };
        ConfigError::invalid(path, err.into_inner().to_string())
    })?;
    validate(raw, path.map(Path::to_path_buf), env)
}

/// The file as written, section by section.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawConfig {
    /// Editors' JSON-schema hint: accepted so it is not an unknown key, then ignored.
    #[serde(rename = "$schema", default)]
    pub _schema: serde::de::IgnoredAny,
    #[serde(default)]
    pub gateway: gateway::RawGateway,
    #[serde(default)]
    pub providers: BTreeMap<String, providers::RawProvider>,
    #[serde(default)]
    pub models: models::RawModels,
    #[serde(default)]
    pub storage: storage::RawStorage,
    #[serde(default)]
    pub memory: memory::RawMemory,
    #[serde(default)]
    pub agents: agents::RawAgents,
    #[serde(default)]
    pub bindings: Vec<bindings::RawBinding>,
    #[serde(default)]
    pub plugins: plugins::RawPlugins,
    #[serde(default)]
    pub tools: tools::RawTools,
    #[serde(default)]
    pub scheduler: scheduling::RawScheduler,
    #[serde(default)]
    pub usage: usage::RawUsage,
    #[serde(default)]
    pub mcp: mcp::RawMcp,
    #[serde(default)]
    pub orchestration: orchestration::RawOrchestration,
    #[serde(default)]
    pub knowledge: knowledge::RawKnowledge,
}

/// The validated settings: what the rest of Onyx reads. Secrets are
/// `SecretString` and never printed.
#[derive(Debug)]
pub struct Config {
    /// The file this was loaded from; `None` for the embedded default.
    pub source: Option<PathBuf>,
    pub gateway: GatewayConfig,
    /// Every provider, configured or detected from the environment, by name.
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Alias → ordered fallback list of model references.
    pub aliases: BTreeMap<String, Vec<ModelRef>>,
    pub context_windows: ContextWindows,
    pub storage: StorageConfig,
    pub memory: MemoryConfig,
    pub agents: AgentsConfig,
    pub bindings: Vec<Binding>,
    pub plugins: PluginsConfig,
    pub tools: ToolsConfig,
    pub scheduler: SchedulerConfig,
    pub usage: UsageConfig,
    pub mcp: McpConfig,
    pub orchestration: OrchestrationConfig,
    pub knowledge: KnowledgeConfig,
}

/// Checks every section, naming the path of the first bad value, and adds the
/// zero-config providers found in the environment.
fn validate(raw: RawConfig, source: Option<PathBuf>, env: Env) -> Result<Config, ConfigError> {
    let mut providers = BTreeMap::new();
    for (name, provider) in raw.providers {
        let path = format!("providers.{name}");
        fields::check_name(&name, &path)?;
        providers.insert(name.clone(), providers::provider_config(name, provider, &path)?);
    }
    providers::add_env_providers(&mut providers, env)?;
    let aliases = models::aliases(raw.models.aliases, &providers)?;
    let context_windows = models::context_windows(raw.models.context_window, &providers)?;
    let mcp = mcp::mcp(raw.mcp, env)?;
    let mut agents = agents::agents(raw.agents, &mcp.servers)?;
    let storage = storage::storage(raw.storage, env)?;
    workspace::check_workspaces(&mut agents, &storage.data_dir, source.as_deref(), env)?;
    let mut tools = tools::tools(raw.tools, env)?;
    let knowledge = knowledge::knowledge(raw.knowledge, env)?;
    tools.menos_search = knowledge.menos.is_some();
    mcp::check_tool_entries(&tools.allow, &mcp.servers, "tools.allow")?;
    mcp::check_tool_entries(&tools.deny, &mcp.servers, "tools.deny")?;
    // What a sandboxed command must never read.
    tools.exec_sandbox.hidden = [
        Some(storage.data_dir.clone()),
        source.clone(),
        env("HOME").map(PathBuf::from),
    ]
    .into_iter()
    .flatten()
    .collect();
    let gateway = gateway::gateway(raw.gateway, env)?;
    tools.exec_sandbox.resolve_require(gateway.listen);
    Ok(Config {
        source,
        gateway,
        providers,
        aliases,
        context_windows,
        storage,
        memory: memory::memory(raw.memory, env)?,
        scheduler: scheduling::scheduler(raw.scheduler, agents.timezone)?,
        agents,
        bindings: raw.bindings.into_iter().map(bindings::binding).collect(),
        plugins: plugins::plugins(raw.plugins),
        tools,
        usage: usage::usage(raw.usage)?,
        mcp,
        orchestration: orchestration::orchestration(raw.orchestration)?,
        knowledge,
    })
}

/// The line and column just past the end of `text` (where an unexpected end of input is).
fn end_of(text: &str) -> (usize, usize) {
    let line = text.split('\n').count();
    let column = text.rsplit('\n').next().map_or(0, |last| last.chars().count()) + 1;
    (line, column)
}

#[cfg(test)]
mod fuzz_tests;
#[cfg(test)]
mod tests;
