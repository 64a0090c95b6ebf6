//! Validated, typed settings: what the rest of Onyx reads. Secrets are
//! `SecretString` and never printed.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use secrecy::SecretString;
use url::Url;

use crate::model_ref::ModelRef;

pub const DEFAULT_LISTEN: &str = "127.0.0.1:18790";
pub const DEFAULT_MAX_BODY_BYTES: usize = 20 * 1024 * 1024;

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
    pub knowledge: super::KnowledgeConfig,
}

/// `orchestration`: proposals become missions whose steps run as agent runs.
#[derive(Debug, Clone)]
pub struct OrchestrationConfig {
    pub enabled: bool,
    /// Whether this replica claims and runs steps.
    pub worker: bool,
    /// A step whose replica stops renewing it this long is stale.
    pub lease: Duration,
    /// Runs of one step before it fails for good.
    pub max_attempts: u32,
    /// Steps this replica runs at once.
    pub max_parallel_steps: usize,
    pub step_timeout: Duration,
    pub reaction_seed: Option<u64>,
}

impl Default for OrchestrationConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            worker: true,
            lease: Duration::from_secs(60),
            max_attempts: 2,
            max_parallel_steps: 4,
            step_timeout: Duration::from_secs(600),
            reaction_seed: None,
        }
    }
}

/// `mcp`: the MCP servers agents can use, and the client's limits.
#[derive(Debug, Clone)]
pub struct McpConfig {
    pub startup: McpStartup,
    /// How long a server may take to start and answer the handshake.
    pub start_timeout: Duration,
    /// How long one tool call may take (a server may set its own).
    pub call_timeout: Duration,
    /// Characters of a tool result the model sees; the rest is cut.
    pub max_output_chars: usize,
    pub servers: BTreeMap<String, McpServerConfig>,
}

impl Default for McpConfig {
    fn default() -> Self {
        Self {
            startup: McpStartup::Eager,
            start_timeout: Duration::from_secs(30),
            call_timeout: Duration::from_secs(60),
            max_output_chars: 20_000,
            servers: BTreeMap::new(),
        }
    }
}

/// When a server's client is started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McpStartup {
    /// With the gateway.
    Eager,
    /// When an agent run first needs its tools.
    Lazy,
}

#[derive(Debug, Clone)]
pub struct McpServerConfig {
    pub transport: McpTransport,
    pub trust: ToolTrust,
    pub startup: McpStartup,
    pub call_timeout: Option<Duration>,
}

/// How to reach a server. `env` and `headers` values hold secrets.
#[derive(Debug, Clone)]
pub enum McpTransport {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, SecretString>,
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP.
    Http {
        url: Url,
        headers: BTreeMap<String, SecretString>,
    },
    /// The older HTTP+SSE transport.
    Sse {
        url: Url,
        headers: BTreeMap<String, SecretString>,
    },
}

impl McpTransport {
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Stdio { .. } => "stdio",
            Self::Http { .. } => "http",
            Self::Sse { .. } => "sse",
        }
    }
}

/// How far an outside tool is trusted: `Read` and `Write` run without a
/// prompt, `Dangerous` waits for approval in `ask` mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolTrust {
    Read,
    Write,
    Dangerous,
}

/// `usage`: price overrides and the gateway-wide budget.
#[derive(Debug, Clone, Default)]
pub struct UsageConfig {
    pub prices: BTreeMap<String, ModelPrice>,
    pub limits: Option<crate::limits::Limits>,
}

/// USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelPrice {
    pub input: f64,
    pub output: f64,
    pub cached_input: Option<f64>,
    pub cache_write: Option<f64>,
}

/// Context windows the config sets: by model reference (`provider/model`)
/// and by provider; the shipped table covers the rest.
#[derive(Debug, Clone, Default)]
pub struct ContextWindows {
    pub models: BTreeMap<String, u32>,
    pub providers: BTreeMap<String, u32>,
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

/// What happens to occurrences missed while no replica was running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatchUp {
    /// Recorded as skipped; the task waits for its next occurrence.
    Skip,
    /// Run once now, however many were missed.
    Once,
}

#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    pub enabled: bool,
    /// Tasks without their own timezone use this one (`agents.defaults.timezone`).
    pub timezone: chrono_tz::Tz,
    pub catch_up: CatchUp,
    /// A due run this overdue was missed (no replica was running).
    pub missed_after: Duration,
    /// How long a claimed run is owned without renewal; a replica that dies
    /// mid-run loses its claim after this long.
    pub lease: Duration,
    /// A task failing this many times in a row is paused.
    pub max_consecutive_failures: u32,
    /// The first retry delay after a failure; doubles per further failure (to 1 h).
    pub failure_backoff: Duration,
    pub run_timeout: Duration,
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

#[derive(Debug)]
pub struct GatewayConfig {
    pub listen: SocketAddr,
    pub api_keys: Vec<SecretString>,
    pub password_hash: Option<String>,
    pub max_body_bytes: usize,
    pub record_sessions: bool,
    pub log_format: LogFormat,
    pub shutdown_grace: Duration,
    pub models_cache_ttl: Duration,
    /// Where a client's address comes from behind a reverse proxy (`None`: the TCP peer).
    pub trusted_proxy: Option<super::proxy::TrustedProxy>,
    /// `gateway.cors`: the origins answered with CORS headers (`None`: off).
    pub cors: Option<super::cors::Cors>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Human,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    /// Any server speaking OpenAI's chat completions API.
    OpenAi,
    Anthropic,
    Ollama,
    /// OpenAI models deployed on Azure (deployments, `api-version`, `api-key`).
    Azure,
    /// Google AI Studio's Gemini API (`generateContent`, `x-goog-api-key`).
    Gemini,
    /// Gemini on Google Cloud Vertex AI (project, location, OAuth2 bearer).
    Vertex,
    /// AWS Bedrock's Converse API (SigV4 from the AWS credential chain, or a Bedrock API key).
    Bedrock,
    /// Claude Pro/Max through the Claude Code CLI (`providers::subscription`).
    ClaudeSubscription,
    /// ChatGPT Plus/Pro through the Codex CLI (`providers::subscription`).
    Codex,
    /// A GitHub Copilot subscription through the Copilot CLI (`providers::subscription`).
    Copilot,
}

impl ProviderKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::Anthropic => "anthropic",
            Self::Ollama => "ollama",
            Self::Azure => "azure",
            Self::Gemini => "gemini",
            Self::Vertex => "vertex",
            Self::Bedrock => "bedrock",
            Self::ClaudeSubscription => "claude-subscription",
            Self::Codex => "codex",
            Self::Copilot => "copilot",
        }
    }
}

#[derive(Debug)]
pub struct ProviderConfig {
    pub name: String,
    pub kind: ProviderKind,
    pub base_url: Url,
    pub api_key: Option<SecretString>,
    /// Extra headers sent with every upstream request (values may be secrets).
    pub headers: Vec<(String, SecretString)>,
    /// Whole-request limit for non-streaming calls; time to first byte for streams.
    pub timeout: Duration,
    pub connect_timeout: Duration,
    /// Retries on 429/5xx/connect errors/timeouts before the next fallback.
    pub max_retries: u32,
    /// Models listed when the upstream cannot be asked (or in addition to it).
    pub models: Vec<String>,
    /// Anthropic's `anthropic-version` header; Azure's `api-version` query.
    pub api_version: Option<String>,
    /// Azure: the deployment serving each model name (default: the same name).
    pub deployments: BTreeMap<String, String>,
    /// Vertex: where the models run.
    pub vertex: Option<VertexConfig>,
    /// Bedrock: the region and endpoint.
    pub bedrock: Option<BedrockConfig>,
    /// The context window of its models where the shipped table has none.
    pub context_window: Option<u32>,
    /// Send `prompt_cache_key` upstream (OpenAI-compatible providers).
    pub prompt_cache_key: bool,
    /// `/v1/responses` is passed through to the provider's own Responses API
    /// (OpenAI-compatible providers only).
    pub responses: bool,
    /// Whether this provider was added from the environment rather than the file.
    pub detected: bool,
    /// None when `circuitBreaker: false`.
    pub circuit_breaker: Option<CircuitBreakerConfig>,
    /// The vendor CLI a subscription provider drives (default: its name on `PATH`).
    pub command: Option<String>,
}

/// A Vertex AI provider's project, region and credentials.
#[derive(Debug, Clone)]
pub struct VertexConfig {
    pub project: String,
    /// `us-central1`, …, or `global`.
    pub location: String,
    /// A service account's JSON key file; without one, `apiKey` is a static
    /// OAuth2 access token.
    pub credentials_file: Option<PathBuf>,
}

/// An AWS Bedrock provider's region and endpoint; credentials come from the
/// AWS chain (environment, profile, IMDS…) or `apiKey` (a Bedrock API key).
#[derive(Debug, Clone)]
pub struct BedrockConfig {
    /// `us-east-1`, …; without one, the AWS chain's (`AWS_REGION`, the profile).
    pub region: Option<String>,
    /// `baseUrl` when set: the endpoint instead of the region's.
    pub endpoint: Option<Url>,
}

/// When a provider's circuit opens, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CircuitBreakerConfig {
    /// Consecutive transient failures that open it.
    pub failures: u32,
    /// The first cooling period; it doubles after each failed probe…
    pub cool: Duration,
    /// …up to this.
    pub max_cool: Duration,
}

impl Default for CircuitBreakerConfig {
    fn default() -> Self {
        Self {
            failures: 5,
            cool: Duration::from_secs(30),
            max_cool: Duration::from_secs(300),
        }
    }
}

#[derive(Debug)]
pub struct StorageConfig {
    pub data_dir: PathBuf,
    pub objects: ObjectStoreConfig,
    pub surrealdb: SurrealConfig,
}

#[derive(Debug)]
pub enum ObjectStoreConfig {
    Local,
    S3 {
        endpoint: Option<Url>,
        region: String,
        access_key: Option<SecretString>,
        secret_key: Option<SecretString>,
        bucket_prefix: String,
    },
}

#[derive(Debug, Clone)]
pub struct SurrealConfig {
    pub url: String,
    pub user: Option<String>,
    pub pass: Option<SecretString>,
    pub namespace: String,
    pub database: String,
    pub embedded: EmbeddedStore,
}

/// Memory caps of embedded SurrealKV (`storage.surrealdb.cacheMb`, `memtableMb`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmbeddedStore {
    /// The block cache of recently read data.
    pub cache_mb: u64,
    /// Writes held in memory before they are flushed to a table file; also
    /// the largest transaction the store accepts.
    pub memtable_mb: u64,
}

impl Default for EmbeddedStore {
    fn default() -> Self {
        Self {
            cache_mb: 128,
            memtable_mb: 64,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fusion {
    Linear,
    Rrf,
    /// A weighted sum of the legs' calibrated scores, each leg weighted per
    /// query by how far its best candidate stands out of the rest (the default).
    Adaptive,
}

/// `memory.residentBudgetMb` when unset: 100,000 chunks of 384 dimensions fit.
pub const DEFAULT_RESIDENT_BUDGET_MB: u64 = 512;

#[derive(Debug)]
pub struct MemoryConfig {
    pub embedder: Option<EmbedderConfig>,
    pub fusion: Fusion,
    pub vector_weight: f64,
    pub text_weight: f64,
    pub min_score: f64,
    pub half_life_days: f64,
    pub chunk_tokens: u32,
    pub chunk_overlap: u32,
    /// How often files changed outside Onyx are looked for.
    pub sync_interval: Duration,
    /// The memory a replica's resident search index may hold, in MiB.
    pub resident_budget_mb: u64,
    /// A reranking stage after fusion, when configured.
    pub reranker: Option<RerankerConfig>,
}

/// `memory.reranker`: an endpoint that scores (query, document) pairs, in the
/// shape Cohere, Jina, TEI, vLLM and llama.cpp's server speak.
#[derive(Debug, Clone)]
pub struct RerankerConfig {
    /// The endpoint itself, e.g. `http://127.0.0.1:8080/v1/rerank`.
    pub url: Url,
    pub model: String,
    pub api_key: Option<secrecy::SecretString>,
    /// How many fused hits it reorders (at least the hits asked for).
    pub candidates: usize,
    /// How long a search waits for it before showing the fused order.
    pub timeout: Duration,
}

#[derive(Debug)]
pub enum EmbedderConfig {
    /// An embeddings endpoint: Ollama or an OpenAI-compatible provider.
    Provider(ProviderEmbedderConfig),
    /// A sentence-embedding model run inside Onyx (`type: "local"`).
    Local(LocalEmbedderConfig),
    /// No embeddings at all (`type: "none"`): memory search is full-text only.
    Off,
}

#[derive(Debug)]
pub struct ProviderEmbedderConfig {
    pub kind: ProviderKind,
    pub model: String,
    /// The provider whose endpoint and key are used (`openai` type), if any.
    pub provider: Option<String>,
    pub base_url: Option<Url>,
    pub dimensions: Option<u32>,
}

#[derive(Debug)]
pub struct LocalEmbedderConfig {
    /// The model's name (a sentence-transformers BERT model, mean or CLS pooling).
    pub model: String,
    /// A directory holding `model.safetensors`, `tokenizer.json` and
    /// `config.json`; without one they are downloaded into the data dir.
    pub path: Option<PathBuf>,
    /// The base URL the model files are downloaded from.
    pub download_url: Url,
    /// The most CPU threads inference uses; none: the machine's cores, up to 4.
    pub threads: Option<usize>,
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

#[derive(Debug, Clone)]
pub struct Binding {
    pub agent_id: String,
    pub channel: String,
    pub account_id: Option<String>,
    pub guild_id: Option<String>,
    pub chat_id: Option<String>,
    pub peer: Option<(String, String)>,
}

#[derive(Debug, Default)]
pub struct PluginsConfig {
    pub enabled: Vec<String>,
    pub settings: BTreeMap<String, serde_json::Value>,
}

/// An agent's `heartbeat`: how often it runs its HEARTBEAT.md checklist, and
/// where a result other than `HEARTBEAT_OK` goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatConfig {
    pub every: Duration,
    /// `telegram:<chat>`, `discord:<channel>` or `session:<id>`.
    pub deliver_to: Option<String>,
}
