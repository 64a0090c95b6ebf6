//! The config file as written: serde structs mirroring `onyx.json5` key for key.
//!
//! Every struct denies unknown keys so a typo is a startup error that names its
//! path. Values are checked and converted into typed settings by `validate`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawConfig {
    /// Editors' JSON-schema hint: accepted so it is not an unknown key, then ignored.
    #[serde(rename = "$schema", default)]
    pub _schema: serde::de::IgnoredAny,
    #[serde(default)]
    pub gateway: RawGateway,
    #[serde(default)]
    pub providers: BTreeMap<String, RawProvider>,
    #[serde(default)]
    pub models: RawModels,
    #[serde(default)]
    pub storage: RawStorage,
    #[serde(default)]
    pub memory: RawMemory,
    #[serde(default)]
    pub agents: RawAgents,
    #[serde(default)]
    pub bindings: Vec<RawBinding>,
    #[serde(default)]
    pub plugins: RawPlugins,
    #[serde(default)]
    pub tools: RawTools,
    #[serde(default)]
    pub scheduler: RawScheduler,
    #[serde(default)]
    pub usage: RawUsage,
    #[serde(default)]
    pub mcp: RawMcp,
    #[serde(default)]
    pub orchestration: RawOrchestration,
    #[serde(default)]
    pub knowledge: super::knowledge::RawKnowledge,
}

/// Proposals, missions and steps (`orchestration`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawOrchestration {
    pub enabled: Option<bool>,
    /// `false`: this replica never runs steps (a control-plane replica).
    pub worker: Option<bool>,
    pub lease_seconds: Option<u64>,
    pub max_attempts: Option<u32>,
    pub max_parallel_steps: Option<usize>,
    pub step_timeout_seconds: Option<u64>,
    /// Seeds the reaction matrix's random numbers (tests, reproducible runs).
    pub reaction_seed: Option<u64>,
}

/// MCP servers whose tools agents are offered, and the client's limits.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawMcp {
    /// `eager` (connect at startup, the default) or `lazy` (at first use).
    pub startup: Option<String>,
    pub start_timeout_seconds: Option<u64>,
    pub call_timeout_seconds: Option<u64>,
    pub max_output_chars: Option<usize>,
    #[serde(default)]
    pub servers: BTreeMap<String, RawMcpServer>,
}

/// One server, as Claude Desktop, Claude Code and VS Code write it (and as
/// `POST /v1/mcp/servers` takes it).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawMcpServer {
    /// `stdio`, `http` (streamable HTTP) or `sse` (the older HTTP+SSE);
    /// inferred from `command` / `url` when absent.
    #[serde(rename = "type")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// `read`, `write` or `dangerous` (the default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trust: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub startup: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_timeout_seconds: Option<u64>,
}

/// Prices and the gateway-wide budget.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawUsage {
    /// Model name (or `provider/model`, `provider/*`) → USD per million tokens.
    #[serde(default)]
    pub prices: BTreeMap<String, RawPrice>,
    pub limits: Option<crate::limits::Limits>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawPrice {
    pub input: f64,
    pub output: f64,
    pub cached_input: Option<f64>,
    pub cache_write: Option<f64>,
}

/// The task scheduler's settings.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawScheduler {
    pub enabled: Option<bool>,
    pub catch_up: Option<String>,
    pub missed_after_seconds: Option<u64>,
    pub lease_seconds: Option<u64>,
    pub max_consecutive_failures: Option<u32>,
    pub failure_backoff_seconds: Option<u64>,
    pub run_timeout_seconds: Option<u64>,
}

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

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawGateway {
    pub listen: Option<String>,
    #[serde(default)]
    pub auth: RawAuth,
    pub max_body_bytes: Option<u64>,
    pub record_sessions: Option<bool>,
    pub log_format: Option<String>,
    pub shutdown_grace_seconds: Option<u64>,
    pub models_cache_seconds: Option<u64>,
    pub trusted_proxy: Option<RawTrustedProxy>,
    pub cors: Option<super::cors::RawCors>,
}

/// `gateway.trustedProxy`: `{ header: "X-Forwarded-For", from: ["127.0.0.1"] }`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawTrustedProxy {
    pub header: String,
    #[serde(default)]
    pub from: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawAuth {
    #[serde(default)]
    pub api_keys: Vec<String>,
    pub password_hash: Option<String>,
}

/// One provider as written in the config file, and as `POST /v1/providers` takes it.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawProvider {
    #[serde(rename = "type")]
    pub kind: String,
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    pub timeout_seconds: Option<u64>,
    pub connect_timeout_seconds: Option<u64>,
    pub max_retries: Option<u32>,
    #[serde(default)]
    pub models: Vec<String>,
    pub api_version: Option<String>,
    /// Azure: model name → deployment name.
    #[serde(default)]
    pub deployments: BTreeMap<String, String>,
    /// Vertex: the Google Cloud project, region and service-account key file.
    pub project: Option<String>,
    pub location: Option<String>,
    pub credentials_file: Option<String>,
    /// Bedrock: the AWS region.
    pub region: Option<String>,
    /// The context window of this provider's models, where the shipped table
    /// does not know them.
    pub context_window: Option<u32>,
    /// Whether agent runs send OpenAI's `prompt_cache_key` (servers that
    /// reject unknown fields need `false`).
    pub prompt_cache_key: Option<bool>,
    /// Whether `/v1/responses` goes to this provider's own Responses API.
    pub responses: Option<bool>,
    /// `false`, `true` (the defaults) or the breaker's settings.
    pub circuit_breaker: Option<RawCircuitBreaker>,
    /// The vendor CLI a subscription provider runs.
    pub command: Option<String>,
}

/// `circuitBreaker`: on or off, or its settings.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
pub enum RawCircuitBreaker {
    Enabled(bool),
    Settings(RawBreakerSettings),
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawBreakerSettings {
    pub failures: Option<u32>,
    pub cool_seconds: Option<u64>,
    pub max_cool_seconds: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawModels {
    #[serde(default)]
    pub aliases: BTreeMap<String, OneOrMany>,
    /// Context windows in tokens by model (`"ollama/llama3.2": 8192`), over
    /// the shipped table and the provider's `contextWindow`.
    #[serde(default)]
    pub context_window: BTreeMap<String, u32>,
}

/// An alias target: one model reference or an ordered fallback list.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawStorage {
    pub data_dir: Option<String>,
    pub objects: Option<RawObjects>,
    pub surrealdb: Option<RawSurreal>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawObjects {
    #[serde(rename = "type")]
    pub kind: String,
    pub endpoint: Option<String>,
    pub region: Option<String>,
    pub access_key: Option<String>,
    pub secret_key: Option<String>,
    pub bucket_prefix: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawSurreal {
    pub url: Option<String>,
    pub user: Option<String>,
    pub pass: Option<String>,
    pub namespace: Option<String>,
    pub database: Option<String>,
    pub cache_mb: Option<u64>,
    pub memtable_mb: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawMemory {
    pub embedder: Option<RawEmbedder>,
    pub reranker: Option<RawReranker>,
    pub fusion: Option<String>,
    pub vector_weight: Option<f64>,
    pub text_weight: Option<f64>,
    pub min_score: Option<f64>,
    pub half_life_days: Option<f64>,
    pub chunk_tokens: Option<u32>,
    pub chunk_overlap: Option<u32>,
    pub sync_interval_seconds: Option<u64>,
    pub resident_budget_mb: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawEmbedder {
    #[serde(rename = "type")]
    pub kind: String,
    pub model: Option<String>,
    pub provider: Option<String>,
    pub base_url: Option<String>,
    pub dimensions: Option<u32>,
    /// `local` only: a directory holding the model files.
    pub path: Option<String>,
    /// `local` only: where the model files are downloaded from.
    pub download_url: Option<String>,
    /// `local` only: the most CPU threads inference uses.
    pub threads: Option<u32>,
}

/// `memory.reranker`: a reranking endpoint in the Cohere / Jina shape.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawReranker {
    pub url: String,
    pub model: String,
    pub api_key: Option<String>,
    pub candidates: Option<u32>,
    pub timeout_ms: Option<u64>,
}

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

/// OpenClaw's binding: which agent answers a channel, account, chat or peer.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawBinding {
    pub agent_id: String,
    #[serde(rename = "match")]
    pub matcher: RawBindingMatch,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawBindingMatch {
    pub channel: String,
    pub account_id: Option<String>,
    pub guild_id: Option<String>,
    pub chat_id: Option<String>,
    pub peer: Option<RawPeer>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawPeer {
    pub kind: String,
    pub id: String,
}

/// `plugins.enabled` names the plugins to start; every other key is one
/// plugin's own settings, validated by that plugin when it starts.
#[derive(Debug, Default, Deserialize)]
pub struct RawPlugins {
    #[serde(default)]
    pub enabled: Vec<String>,
    #[serde(flatten)]
    pub settings: BTreeMap<String, Value>,
}
