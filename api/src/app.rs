//! `App`: everything a running gateway shares across requests, built once from
//! the validated config. Holds no per-user state, so replicas can be many.

use std::sync::Arc;
use std::time::{Duration, Instant};

use secrecy::SecretString;

use crate::agents::{self, Agents};
use crate::auth::{ApiKeys, Authenticator, KeyError};
use crate::background::Background;
use crate::channels::Channels;
use crate::config::{Config, ProviderKind};
use crate::health::HealthCache;
use crate::memory::Memory;
use crate::observability::Metrics;
use crate::plugins::{Conversations, Plugins};
use crate::providers::api_added::ProviderStore;
use crate::providers::catalog::ModelCatalog;
use crate::providers::{ProviderError, ProviderRegistry, Router, Routes};
use crate::scheduler::Runner;
use crate::sessions::{SessionError, Sessions};
use crate::storage::{self, Db, DbError, ObjectStore};
use crate::tasks::Tasks;

pub struct App {
    pub router: Arc<Router>,
    pub catalog: ModelCatalog,
    pub auth: Authenticator,
    pub metrics: Arc<Metrics>,
    pub health: HealthCache,
    pub started: Instant,
    pub max_body_bytes: usize,
    pub db: Db,
    pub objects: Arc<dyn ObjectStore>,
    pub sessions: Arc<Sessions>,
    pub memory: Arc<Memory>,
    pub agents: Arc<Agents>,
    pub tasks: Arc<Tasks>,
    pub scheduler: Arc<Runner>,
    /// Chat platforms that results can be delivered to (filled by plugins).
    pub channels: Arc<Channels>,
    pub plugins: Plugins,
    /// The loops running beside the server (stopped after it, on shutdown).
    pub background: Background,
    /// The control UI's password (argon2id), if one is set.
    pub password_hash: Option<String>,
    pub login_throttle: crate::auth::LoginThrottle,
    /// UI password checks, a few at a time (each allocates argon2's memory).
    pub password_checks: crate::auth::PasswordChecks,
    /// `gateway.trustedProxy`: whose header names a client's address.
    pub trusted_proxy: Option<crate::config::TrustedProxy>,
    /// `gateway.cors`: the web origins answered with CORS headers (`None`: off).
    pub cors: Option<crate::config::Cors>,
    /// The providers routed to: the config file's and those added through the API.
    pub providers: Arc<ProviderRegistry>,
    /// Store plain proxy requests (without `x-onyx-session-id`) as sessions.
    pub record_sessions: bool,
    /// Usage records, prices, budgets and rate limits.
    pub usage: Arc<crate::usage::Meter>,
    /// The clients of the configured MCP servers (stopped on shutdown).
    pub mcp: Arc<crate::mcp_client::McpClients>,
    /// Proposals, missions and steps (`None` with `orchestration.enabled: false`).
    pub orchestrator: Option<Arc<crate::orchestration::Orchestrator>>,
    /// menos, the content vault (`knowledge.menos`), if configured.
    pub menos: Option<Arc<crate::knowledge::Menos>>,
    /// What agents told the owner outside a watched turn, for the browser.
    pub notifications: crate::notifications::Notifier,
    /// Turns true when shutdown begins: endless streams (notifications) end,
    /// so the server's graceful stop does not wait on them.
    pub shutting_down: tokio::sync::watch::Sender<bool>,
}

#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error("provider {name}: {source}")]
    Provider {
        name: String,
        source: Box<ProviderError>,
    },
    #[error(
        "refusing to listen on {0} without an API key: set ONYX_API_KEY or gateway.auth.apiKeys, or listen on 127.0.0.1"
    )]
    OpenWithoutKey(std::net::SocketAddr),
    #[error(transparent)]
    Database(#[from] DbError),
    #[error(transparent)]
    Secrets(#[from] crate::secrets::SecretError),
    #[error("API keys: {0}")]
    Keys(#[from] KeyError),
    #[error("sessions: {0}")]
    Sessions(#[from] SessionError),
    #[error(transparent)]
    Plugin(#[from] onyx_plugin_sdk::PluginError),
    #[error(transparent)]
    Knowledge(#[from] crate::knowledge::KnowledgeError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
}

impl App {
    pub async fn new(config: &Config) -> Result<Self, StartupError> {
        let metrics = Arc::new(Metrics::new());
        let vault = Arc::new(crate::secrets::vault_from_env(&config.storage.data_dir)?);
        crate::providers::subscription::set_data_dir(&config.storage.data_dir);
        crate::providers::subscription::sealed::set_vault(vault.clone());
        // Plaintext left by a crash or a sign-in made outside Onyx is sealed now.
        crate::providers::subscription::seal_at_rest();
        let db = Db::connect(&config.storage.surrealdb).await?;
        db.migrate().await?;
        let usage = crate::usage::Meter::new(db.clone(), usage_settings(config), metrics.clone());
        let router = Arc::new(Router::new(Routes::default(), metrics.clone()).with_meter(usage.clone()));
        let providers = Arc::new(
            ProviderRegistry::new(
                &config.providers,
                &config.aliases,
                ProviderStore::new(db.clone()),
                vault.clone(),
                router.clone(),
            )
            .map_err(|(name, source)| StartupError::Provider { name, source })?,
        );
        if let Err(err) = providers.reload().await {
            tracing::error!(error = %err, "could not read the providers added through the API; will retry");
        }
        let mut keys: Vec<SecretString> = config.gateway.api_keys.clone();
        if let Ok(key) = std::env::var("ONYX_API_KEY")
            && !key.is_empty()
        {
            keys.push(SecretString::from(key));
        }
        let objects = open_objects(config).await;
        let sessions = Sessions::new(objects.clone(), db.clone()).await?;
        let auth = Authenticator::new(
            ApiKeys::new(&keys),
            db.clone(),
            config.gateway.password_hash.is_some(),
        )
        .await?;
        let background = Background::new();
        background.spawn(
            "providers: follow changes from every replica",
            providers.clone().watch(),
        );
        background.spawn("usage: budget write-back and sweep", usage.clone().upkeep_loop());
        background.spawn(
            "sessions: parked turns",
            sessions.retry_loop(Duration::from_secs(2)),
        );
        let memory = crate::memory::build(config, objects.clone(), db.clone()).map_err(|source| {
            StartupError::Provider {
                name: "memory.embedder".into(),
                source: Box::new(source),
            }
        })?;
        // Before serving: a chunking change empties the index, which must not
        // race the first writes.
        if let Err(err) = memory.prepare_chunking().await {
            tracing::warn!(error = %err, "could not check the memory index; will retry in the background");
        }
        background.spawn("memory: sync and index catch-up", memory.background_loops());
        let menos = match &config.knowledge.menos {
            Some(menos) => Some(Arc::new(crate::knowledge::Menos::new(menos)?)),
            None => None,
        };
        // Leases are renewed (and lapsed ones found) on a connection of their
        // own, so renewals never queue behind this replica's other queries.
        let lease_db = db.dedicated().await?;
        let tasks = Tasks::new(db.clone(), lease_db.clone(), config.scheduler.clone());
        background.spawn("tasks: run leases", tasks.lease_upkeep());
        let channels = Arc::new(Channels::default());
        let mcp = crate::mcp_client::McpClients::new(&config.mcp);
        mcp.start();
        mcp.attach_store(crate::mcp_client::api_added::server_store(db.clone()), vault)
            .await;
        background.spawn(
            "mcp: follow server changes from every replica",
            mcp.clone().watch(),
        );
        crate::agents::tools::registry::check_config(config)?;
        let agents = Agents::start(
            config,
            agents::Parts {
                router: router.clone(),
                memory: memory.clone(),
                sessions: sessions.clone(),
                objects: objects.clone(),
                db: db.clone(),
                lease_db: lease_db.clone(),
                tasks: tasks.clone(),
                channels: channels.clone(),
                mcp: mcp.clone(),
                menos: menos.clone(),
                run_tokens: auth.run_tokens().clone(),
            },
            &background,
        );
        let orchestrator = config.orchestration.enabled.then(|| {
            let orchestrator = crate::orchestration::Orchestrator::new(
                db.clone(),
                lease_db.clone(),
                agents.clone(),
                memory.clone(),
                config.orchestration.clone(),
            );
            agents.set_coordination(Arc::new(crate::orchestration::Coordinator(Arc::downgrade(
                &orchestrator,
            ))));
            background.spawn(
                "orchestration: missions, triggers, reactions",
                orchestrator.clone().run(),
            );
            orchestrator
        });
        let scheduler = Runner::new(
            tasks.clone(),
            agents.clone(),
            sessions.clone(),
            memory.clone(),
            channels.clone(),
        );
        if config.scheduler.enabled {
            let heartbeats = config
                .agents
                .list
                .iter()
                .filter_map(|a| a.heartbeat.clone().map(|heartbeat| (a.id.clone(), heartbeat)))
                .collect();
            background.spawn("scheduler", scheduler.run(heartbeats));
        }
        let env = |name: &str| std::env::var(name).ok();
        let enabled = crate::plugins::build(&config.plugins, &env)?;
        let conversations = Arc::new(Conversations::new(
            agents.clone(),
            sessions.clone(),
            crate::plugins::chats::Chats::new(db.clone()),
            config.bindings.clone(),
            enabled.allow,
        ));
        let plugins = Plugins::start(enabled.plugins, conversations, &channels, &background);
        let notifications = crate::notifications::Notifier::new(db.clone());
        Ok(Self {
            plugins,
            background,
            password_hash: config.gateway.password_hash.clone(),
            login_throttle: crate::auth::LoginThrottle::new(db.clone()),
            password_checks: crate::auth::PasswordChecks::default(),
            trusted_proxy: config.gateway.trusted_proxy.clone(),
            cors: config.gateway.cors.clone(),
            providers,
            tasks,
            scheduler,
            channels,
            db,
            objects,
            sessions,
            memory,
            agents,
            record_sessions: config.gateway.record_sessions,
            usage,
            mcp,
            orchestrator,
            router,
            catalog: ModelCatalog::new(config.gateway.models_cache_ttl),
            auth,
            metrics,
            health: HealthCache::new(menos.clone()),
            menos,
            notifications,
            shutting_down: tokio::sync::watch::Sender::new(false),
            started: Instant::now(),
            max_body_bytes: config.gateway.max_body_bytes,
        })
    }
}

/// What `usage` needs from the config: price overrides, agent and global limits.
fn usage_settings(config: &Config) -> crate::usage::UsageSettings {
    crate::usage::UsageSettings {
        prices: config
            .usage
            .prices
            .iter()
            .map(|(model, p)| {
                let price = crate::usage::Price {
                    input: p.input,
                    output: p.output,
                    cached_input: p.cached_input,
                    cache_write: p.cache_write,
                };
                (model.clone(), price)
            })
            .collect(),
        global: config.usage.limits,
        agents: config
            .agents
            .list
            .iter()
            .filter_map(|a| a.limits.map(|l| (a.id.clone(), l)))
            .collect(),
    }
}

/// The object store; when it cannot be reached at startup Onyx still serves
/// (turns are parked until it is back) and `/health` says so.
async fn open_objects(config: &Config) -> Arc<dyn ObjectStore> {
    match storage::open_object_store(&config.storage).await {
        Ok(store) => store,
        Err(err) => {
            tracing::error!(error = %err, "object store unavailable at startup; will keep retrying");
            storage::object_store_without_buckets(&config.storage).await
        }
    }
}

/// Zero-config Ollama: when no `ollama` provider is configured and nothing set
/// `OLLAMA_HOST`, one answering on the default port is used.
pub async fn detect_local_ollama(config: &mut Config) {
    if config.providers.values().any(|p| p.kind == ProviderKind::Ollama) {
        return;
    }
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 11434));
    let reachable = tokio::time::timeout(Duration::from_millis(300), tokio::net::TcpStream::connect(addr))
        .await
        .is_ok_and(|r| r.is_ok());
    if let (true, Some(url)) = (reachable, crate::config::ollama_url("127.0.0.1:11434")) {
        tracing::info!("found Ollama on 127.0.0.1:11434; offering it as provider \"ollama\"");
        let provider = crate::config::detected_provider("ollama", ProviderKind::Ollama, url, None);
        config.providers.insert("ollama".into(), provider);
    }
}
