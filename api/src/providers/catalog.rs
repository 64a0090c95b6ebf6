//! The model list behind `GET /v1/models`: every provider's models as
//! `provider/model`, plus aliases, fetched concurrently and cached. A provider
//! that cannot be asked keeps its last good list (or its configured `models`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::future::join_all;
use serde::Serialize;
use tokio::sync::Mutex;

use super::{Provider, ProviderError, Router};

const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Serialize)]
pub struct ModelEntry {
    pub id: String,
    pub object: &'static str,
    pub created: u64,
    pub owned_by: String,
}

impl ModelEntry {
    fn new(id: String, owned_by: String) -> Self {
        Self {
            id,
            object: "model",
            created: 0,
            owned_by,
        }
    }
}

pub struct ModelCatalog {
    ttl: Duration,
    state: Mutex<CatalogState>,
}

#[derive(Default)]
struct CatalogState {
    fetched_at: Option<Instant>,
    /// Last successful upstream answer per provider.
    upstream: BTreeMap<String, Vec<String>>,
    /// The providers asked at `fetched_at` (one added since makes the list stale).
    asked: std::collections::BTreeSet<String>,
}

impl ModelCatalog {
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            state: Mutex::new(CatalogState::default()),
        }
    }

    /// Asks one provider for its models now (the Config page's "refresh
    /// models"), keeping the answer for `/v1/models`.
    pub async fn refresh(&self, provider: &dyn Provider) -> Result<Vec<String>, ProviderError> {
        let models = tokio::time::timeout(FETCH_TIMEOUT, provider.list_models())
            .await
            .map_err(|_| ProviderError::Timeout {
                provider: provider.name().into(),
                after: FETCH_TIMEOUT,
            })??;
        let mut state = self.state.lock().await;
        state.upstream.insert(provider.name().into(), models.clone());
        Ok(models)
    }

    /// Drops what is known of `name`'s models (it was edited or removed).
    pub async fn forget(&self, name: &str) {
        let mut state = self.state.lock().await;
        state.upstream.remove(name);
        state.asked.remove(name);
    }

    pub async fn list(&self, router: &Router) -> Vec<ModelEntry> {
        let routes = router.routes();
        let mut state = self.state.lock().await;
        let fresh = state.fetched_at.is_some_and(|at| at.elapsed() < self.ttl)
            && routes.providers.keys().all(|name| state.asked.contains(name));
        if !fresh {
            let fetches = routes.providers.values().map(|routed| async move {
                let provider = &routed.client;
                let result = tokio::time::timeout(FETCH_TIMEOUT, provider.list_models()).await;
                (provider.name().to_string(), result)
            });
            for (name, result) in join_all(fetches).await {
                match result {
                    Ok(Ok(models)) => {
                        state.upstream.insert(name, models);
                    }
                    Ok(Err(err)) => tracing::warn!(provider = %name, error = %err, "could not list models"),
                    Err(_) => tracing::warn!(provider = %name, "listing models timed out"),
                }
            }
            state.fetched_at = Some(Instant::now());
            state.asked = routes.providers.keys().cloned().collect();
        }
        let mut ids: BTreeMap<String, String> = BTreeMap::new();
        for (name, routed) in &routes.providers {
            let listed = state.upstream.get(name).into_iter().flatten();
            let configured = routed.models.iter();
            for model in listed.chain(configured) {
                ids.insert(format!("{name}/{model}"), name.to_string());
            }
        }
        let mut entries: Vec<ModelEntry> = ids
            .into_iter()
            .map(|(id, owner)| ModelEntry::new(id, owner))
            .collect();
        entries.extend(
            routes
                .aliases
                .keys()
                .map(|alias| ModelEntry::new(alias.clone(), "onyx-alias".into())),
        );
        entries
    }
}
