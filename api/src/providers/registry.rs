//! The providers the router routes to, kept current on every replica: those
//! from the config file and the environment (read-only, built once at start)
//! and those added through `/v1/providers` (stored, see [`super::stored`]).
//! A write reloads this replica at once; other replicas hear it through a
//! SurrealDB live query on `provider` and `model_alias` (with a periodic
//! reload behind it in case a live query drops), and rebuild only providers
//! whose revision changed. A stored provider that cannot be built (a secret
//! sealed under a key this replica lacks) keeps its last good client and
//! shows the problem in `/v1/providers`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use serde::Serialize;

use super::api_added::{ProviderStore, SpecError, StoredProvider};
use super::breaker::{Breaker, CircuitView};
use super::router::{RoutedProvider, Routes};
use super::{ModelRef, ProviderError, Router};
use crate::config::{ProviderConfig, ProviderSpec};
use crate::secrets::{Vault, hint};

/// How often the stored providers are read again whatever the live query says.
const RELOAD_EVERY: Duration = Duration::from_secs(30);

/// Where a provider came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "ProviderSource")]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "ProviderSource"))]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// `providers` in the config file (read-only here).
    Config,
    /// A key or host in the environment (read-only here).
    Environment,
    /// Added through `/v1/providers` or the Config page.
    #[default]
    Api,
}

/// A provider as `/v1/providers` shows it: secrets as hints only.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ProviderView {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub base_url: String,
    /// The key's last four characters (`…abcd`), or null without a key.
    pub api_key: Option<String>,
    /// Header names with hints of their values.
    pub headers: BTreeMap<String, String>,
    pub timeout_seconds: u64,
    pub connect_timeout_seconds: u64,
    pub max_retries: u32,
    pub models: Vec<String>,
    pub api_version: Option<String>,
    /// Azure: model name → deployment.
    pub deployments: BTreeMap<String, String>,
    /// Vertex: the project, location and key file.
    pub project: Option<String>,
    pub location: Option<String>,
    pub credentials_file: Option<String>,
    /// Bedrock: the AWS region (null: the AWS chain's).
    pub region: Option<String>,
    pub context_window: Option<u32>,
    pub prompt_cache_key: bool,
    pub responses: bool,
    /// The circuit breaker's settings; null when it is off.
    pub circuit_breaker: Option<BreakerSettingsView>,
    /// The circuit as it is now on this replica (null when the breaker is off).
    pub circuit: Option<CircuitView>,
    pub source: Source,
    /// Whether this API may change it (only `api` providers).
    pub read_only: bool,
    /// Why this replica cannot use it as stored, if so.
    pub error: Option<String>,
    /// Subscription providers: the vendor CLI to run (for its sign-in).
    #[serde(skip)]
    #[cfg_attr(test, ts(skip))]
    pub command: Option<String>,
    pub created_at: Option<String>,
    pub updated_at: Option<String>,
}

/// A provider's `circuitBreaker` settings as `/v1/providers` shows them.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct BreakerSettingsView {
    pub failures: u32,
    pub cool_seconds: u64,
    pub max_cool_seconds: u64,
}

/// An alias as `/v1/aliases` shows it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct AliasView {
    pub name: String,
    /// Tried in order: the first, then each fallback.
    pub targets: Vec<String>,
    pub source: Source,
    pub read_only: bool,
}

/// Why a change through the API was refused.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error(transparent)]
    Store(#[from] SpecError),
    #[error("{0:?} comes from the {1}; change it there (it is read-only here)")]
    ReadOnly(String, &'static str),
    #[error("provider {provider:?} is used by alias {alias:?}; change or remove the alias first")]
    InUse { provider: String, alias: String },
    #[error("{field}: {message}")]
    InvalidAlias { field: String, message: String },
    #[error("no alias {0:?} was added through the API")]
    AliasNotFound(String),
    #[error("{0}")]
    Build(Box<ProviderError>),
}

impl From<ProviderError> for RegistryError {
    fn from(err: ProviderError) -> Self {
        Self::Build(Box::new(err))
    }
}

fn view(config: &ProviderConfig, source: Source) -> ProviderView {
    ProviderView {
        name: config.name.clone(),
        kind: config.kind.as_str().into(),
        base_url: config.base_url.to_string(),
        api_key: config.api_key.as_ref().map(hint),
        headers: config
            .headers
            .iter()
            .map(|(name, value)| (name.clone(), hint(value)))
            .collect(),
        timeout_seconds: config.timeout.as_secs(),
        connect_timeout_seconds: config.connect_timeout.as_secs(),
        max_retries: config.max_retries,
        models: config.models.clone(),
        api_version: config.api_version.clone(),
        deployments: config.deployments.clone(),
        project: config.vertex.as_ref().map(|v| v.project.clone()),
        location: config.vertex.as_ref().map(|v| v.location.clone()),
        credentials_file: config
            .vertex
            .as_ref()
            .and_then(|v| v.credentials_file.as_ref())
            .map(|f| f.display().to_string()),
        region: config.bedrock.as_ref().and_then(|b| b.region.clone()),
        context_window: config.context_window,
        prompt_cache_key: config.prompt_cache_key,
        responses: config.responses,
        circuit_breaker: config.circuit_breaker.map(|b| BreakerSettingsView {
            failures: b.failures,
            cool_seconds: b.cool.as_secs(),
            max_cool_seconds: b.max_cool.as_secs(),
        }),
        circuit: None,
        source,
        read_only: source != Source::Api,
        error: None,
        command: config.command.clone(),
        created_at: None,
        updated_at: None,
    }
}

/// What can be shown of a stored provider that cannot be built: its fields
/// without the secrets it could not open.
fn unusable_view(provider: &StoredProvider, error: String) -> ProviderView {
    let mut spec = provider.spec.clone();
    let header_names: Vec<String> = spec.headers.keys().cloned().collect();
    let had_key = spec.api_key.take().is_some();
    spec.headers.clear();
    let mut view = match crate::config::provider_from_spec(&provider.name, spec) {
        Ok(config) => view(&config, Source::Api),
        // Stored under rules since tightened: only what the spec says plainly.
        Err(_) => ProviderView {
            name: provider.name.clone(),
            kind: provider.spec.kind.clone(),
            base_url: provider.spec.base_url.clone().unwrap_or_default(),
            models: provider.spec.models.clone(),
            ..ProviderView::default()
        },
    };
    view.api_key = had_key.then(|| "sealed".to_string());
    view.headers = header_names
        .into_iter()
        .map(|h| (h, "sealed".to_string()))
        .collect();
    view.error = Some(error);
    view.created_at = Some(provider.created_at.clone());
    view.updated_at = Some(provider.updated_at.clone());
    view
}

/// A stored provider as last built on this replica.
struct Built {
    revision: u64,
    /// None when it never could be built here (it is listed, not routed).
    routed: Option<RoutedProvider>,
    view: ProviderView,
}

pub struct ProviderRegistry {
    router: Arc<Router>,
    store: ProviderStore,
    vault: Arc<Vault>,
    file: BTreeMap<String, (RoutedProvider, ProviderView)>,
    file_aliases: BTreeMap<String, Vec<ModelRef>>,
    built: Mutex<BTreeMap<String, Built>>,
    stored_aliases: Mutex<BTreeMap<String, Vec<ModelRef>>>,
    reloading: tokio::sync::Mutex<()>,
}

fn build(config: &ProviderConfig) -> Result<RoutedProvider, ProviderError> {
    Ok(RoutedProvider {
        client: super::build(config)?,
        max_retries: config.max_retries,
        models: config.models.clone(),
        breaker: config.circuit_breaker.map(|b| Arc::new(Breaker::new(b))),
    })
}

impl ProviderRegistry {
    /// Builds the file's providers (an error stops startup, naming the
    /// provider) and routes to them; [`reload`](Self::reload) adds the stored ones.
    pub fn new(
        configs: &BTreeMap<String, ProviderConfig>,
        aliases: &BTreeMap<String, Vec<ModelRef>>,
        store: ProviderStore,
        vault: Arc<Vault>,
        router: Arc<Router>,
    ) -> Result<Self, (String, Box<ProviderError>)> {
        let mut file = BTreeMap::new();
        for config in configs.values() {
            let routed = build(config).map_err(|err| (config.name.clone(), Box::new(err)))?;
            let source = if config.detected {
                Source::Environment
            } else {
                Source::Config
            };
            file.insert(config.name.clone(), (routed, view(config, source)));
        }
        let registry = Self {
            router,
            store,
            vault,
            file,
            file_aliases: aliases.clone(),
            built: Mutex::new(BTreeMap::new()),
            stored_aliases: Mutex::new(BTreeMap::new()),
            reloading: tokio::sync::Mutex::new(()),
        };
        registry.publish();
        Ok(registry)
    }

    pub fn vault(&self) -> &Vault {
        &self.vault
    }

    fn built(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Built>> {
        self.built
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn stored_aliases(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Vec<ModelRef>>> {
        self.stored_aliases
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Hands the router the file's providers and aliases with the stored ones
    /// (the file wins a name both use).
    fn publish(&self) {
        let mut routes = Routes::default();
        for (name, built) in self.built().iter() {
            if let Some(routed) = &built.routed {
                routes.providers.insert(name.clone(), routed.clone());
            }
        }
        for (name, (routed, _)) in &self.file {
            routes.providers.insert(name.clone(), routed.clone());
        }
        routes.aliases = self.stored_aliases().clone();
        routes.aliases.extend(self.file_aliases.clone());
        self.router.replace(routes);
    }

    /// Reads the stored providers and aliases and routes to them, rebuilding
    /// only what changed.
    pub async fn reload(&self) -> Result<(), SpecError> {
        let _one_at_a_time = self.reloading.lock().await;
        let stored = self.store.list().await?;
        let aliases = self.store.aliases().await?;
        {
            let mut built = self.built();
            built.retain(|name, _| stored.iter().any(|s| &s.name == name));
            for provider in stored {
                if built
                    .get(&provider.name)
                    .is_some_and(|b| b.revision == provider.revision)
                {
                    continue;
                }
                self.rebuild(&mut built, provider);
            }
        }
        *self.stored_aliases() = aliases
            .into_iter()
            .filter_map(|(name, targets)| {
                let refs: Result<Vec<ModelRef>, _> = targets.iter().map(|t| ModelRef::parse(t)).collect();
                match refs {
                    Ok(refs) => Some((name, refs)),
                    Err(err) => {
                        tracing::warn!(alias = %name, error = %err, "a stored alias cannot be routed");
                        None
                    }
                }
            })
            .collect();
        self.publish();
        Ok(())
    }

    fn rebuild(&self, built: &mut BTreeMap<String, Built>, provider: StoredProvider) {
        let name = provider.name.clone();
        let result = provider
            .config(&self.vault)
            .map_err(|err| err.to_string())
            .and_then(|config| {
                build(&config)
                    .map(|routed| (config, routed))
                    .map_err(|err| err.to_string())
            });
        match result {
            Ok((config, routed)) => {
                let mut view = view(&config, Source::Api);
                view.created_at = Some(provider.created_at);
                view.updated_at = Some(provider.updated_at);
                built.insert(
                    name,
                    Built {
                        revision: provider.revision,
                        routed: Some(routed),
                        view,
                    },
                );
            }
            Err(error) => {
                tracing::error!(provider = %name, error = %error, "a stored provider cannot be used; keeping its last good version if any");
                match built.get_mut(&name) {
                    Some(old) => old.view.error = Some(error),
                    None => {
                        let view = unusable_view(&provider, error);
                        built.insert(
                            name,
                            Built {
                                revision: provider.revision,
                                routed: None,
                                view,
                            },
                        );
                    }
                }
            }
        }
    }

    /// Follows changes from every replica until the process stops.
    pub async fn watch(self: Arc<Self>) {
        let mut backoff = crate::backoff::Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
        loop {
            let provider_changes = self.store_changes("provider").await;
            let alias_changes = self.store_changes("model_alias").await;
            let (Some(providers), Some(aliases)) = (provider_changes, alias_changes) else {
                tokio::time::sleep(backoff.failed()).await;
                continue;
            };
            backoff.succeeded();
            let mut changes = futures::stream::select(providers, aliases);
            // What changed while no live query listened.
            self.reload_logged().await;
            // A change, or a quiet spell: read again. The stream ending: subscribe again.
            while let Ok(Some(())) | Err(_) = tokio::time::timeout(RELOAD_EVERY, changes.next()).await {
                self.reload_logged().await;
            }
        }
    }

    async fn store_changes(&self, table: &'static str) -> Option<futures::stream::BoxStream<'static, ()>> {
        match self.store.changes(table).await {
            Ok(stream) => Some(stream),
            Err(err) => {
                tracing::warn!(table, error = %err, "cannot follow provider changes; retrying");
                None
            }
        }
    }

    async fn reload_logged(&self) {
        if let Err(err) = self.reload().await {
            tracing::warn!(error = %err, "could not read the stored providers");
        }
    }

    /// Every provider this replica routes to, file ones first.
    pub fn views(&self) -> Vec<ProviderView> {
        let with_circuit = |routed: Option<&RoutedProvider>, view: &ProviderView| {
            let mut view = view.clone();
            view.circuit = routed
                .and_then(|r| r.breaker.as_ref())
                .map(|b| b.view(&view.name));
            view
        };
        let mut views: Vec<ProviderView> = self
            .file
            .values()
            .map(|(routed, view)| with_circuit(Some(routed), view))
            .collect();
        views.extend(
            self.built()
                .iter()
                .filter(|(name, _)| !self.file.contains_key(*name))
                .map(|(_, b)| with_circuit(b.routed.as_ref(), &b.view)),
        );
        views
    }

    pub fn view(&self, name: &str) -> Option<ProviderView> {
        self.views().into_iter().find(|v| v.name == name)
    }

    fn refuse_file_provider(&self, name: &str) -> Result<(), RegistryError> {
        match self.file.get(name) {
            Some((_, view)) if view.source == Source::Environment => {
                Err(RegistryError::ReadOnly(name.into(), "environment"))
            }
            Some(_) => Err(RegistryError::ReadOnly(name.into(), "config file")),
            None => Ok(()),
        }
    }

    /// Adds a provider; it routes on this replica when this returns.
    pub async fn create(&self, name: &str, spec: ProviderSpec) -> Result<ProviderView, RegistryError> {
        self.refuse_file_provider(name)?;
        let config = crate::config::provider_from_spec(name, spec.clone()).map_err(SpecError::from)?;
        build(&config)?;
        self.store.create(&self.vault, name, spec).await?;
        self.reload().await?;
        Ok(self.view(name).unwrap_or_else(|| view(&config, Source::Api)))
    }

    /// Edits a provider with a JSON merge patch.
    pub async fn update(&self, name: &str, patch: serde_json::Value) -> Result<ProviderView, RegistryError> {
        self.refuse_file_provider(name)?;
        let stored = self.store.update(&self.vault, name, patch).await?;
        self.reload().await?;
        match self.view(name) {
            Some(view) => Ok(view),
            None => Ok(view(&stored.config(&self.vault)?, Source::Api)),
        }
    }

    /// Removes a provider no alias uses.
    pub async fn delete(&self, name: &str) -> Result<(), RegistryError> {
        self.refuse_file_provider(name)?;
        let routes = self.router.routes();
        if let Some((alias, _)) = routes
            .aliases
            .iter()
            .find(|(_, refs)| refs.iter().any(|r| r.provider == name))
        {
            return Err(RegistryError::InUse {
                provider: name.into(),
                alias: alias.clone(),
            });
        }
        if !self.store.delete(name).await? {
            return Err(SpecError::NotFound("provider", name.into()).into());
        }
        self.reload().await?;
        Ok(())
    }

    pub fn aliases(&self) -> Vec<AliasView> {
        let stored = self.stored_aliases().clone();
        let file = self
            .file_aliases
            .iter()
            .map(|(name, refs)| (name, refs, Source::Config));
        let api = stored
            .iter()
            .filter(|(name, _)| !self.file_aliases.contains_key(*name))
            .map(|(name, refs)| (name, refs, Source::Api));
        file.chain(api)
            .map(|(name, refs, source)| AliasView {
                name: name.clone(),
                targets: refs.iter().map(ModelRef::to_string).collect(),
                source,
                read_only: source != Source::Api,
            })
            .collect()
    }

    /// Adds or replaces an alias: `targets` are `provider/model`, tried in order.
    pub async fn put_alias(&self, name: &str, targets: Vec<String>) -> Result<AliasView, RegistryError> {
        if self.file_aliases.contains_key(name) {
            return Err(RegistryError::ReadOnly(name.into(), "config file"));
        }
        let invalid = |field: String, message: String| RegistryError::InvalidAlias { field, message };
        if name.is_empty()
            || name.contains('/')
            || name.starts_with("onyx:")
            || name.chars().any(char::is_whitespace)
        {
            return Err(invalid(
                "name".into(),
                "an alias is a non-empty name without '/', spaces or the 'onyx:' prefix".into(),
            ));
        }
        if targets.is_empty() {
            return Err(invalid(
                "targets".into(),
                "needs at least one provider/model".into(),
            ));
        }
        let routes = self.router.routes();
        for (index, target) in targets.iter().enumerate() {
            let field = format!("targets[{index}]");
            let model_ref = ModelRef::parse(target).map_err(|err| invalid(field.clone(), err.to_string()))?;
            if !routes.providers.contains_key(&model_ref.provider) {
                let known: Vec<&str> = routes.providers.keys().map(String::as_str).collect();
                return Err(invalid(
                    field,
                    format!(
                        "unknown provider {:?} (known: {})",
                        model_ref.provider,
                        known.join(", ")
                    ),
                ));
            }
        }
        self.store.put_alias(name, &targets).await?;
        self.reload().await?;
        Ok(AliasView {
            name: name.into(),
            targets,
            source: Source::Api,
            read_only: false,
        })
    }

    pub async fn delete_alias(&self, name: &str) -> Result<(), RegistryError> {
        if self.file_aliases.contains_key(name) {
            return Err(RegistryError::ReadOnly(name.into(), "config file"));
        }
        if !self.store.delete_alias(name).await? {
            return Err(RegistryError::AliasNotFound(name.into()));
        }
        self.reload().await?;
        Ok(())
    }
}
