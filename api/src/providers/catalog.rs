//! The model list behind `GET /v1/models`: every provider's models as
//! `provider/model`, plus aliases, fetched concurrently and cached. A provider
//! that cannot be asked keeps its last good list (or its configured `models`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::future::join_all;
use serde::Serialize;
use tokio::sync::Mutex;

use super::Router;

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
    /// Models listed in config, by provider: always offered.
    configured: BTreeMap<String, Vec<String>>,
    state: Mutex<CatalogState>,
}

#[derive(Default)]
struct CatalogState {
    fetched_at: Option<Instant>,
    /// Last successful upstream answer per provider.
    upstream: BTreeMap<String, Vec<String>>,
}

impl ModelCatalog {
    pub fn new(ttl: Duration, configured: BTreeMap<String, Vec<String>>) -> Self {
        Self {
            ttl,
            configured,
            state: Mutex::new(CatalogState::default()),
        }
    }

    pub async fn list(&self, router: &Router) -> Vec<ModelEntry> {
        let mut state = self.state.lock().await;
        let fresh = state.fetched_at.is_some_and(|at| at.elapsed() < self.ttl);
        if !fresh {
            let fetches = router.providers().map(|provider| async move {
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
        }
        let mut ids: BTreeMap<String, String> = BTreeMap::new();
        for provider in router.providers() {
            let name = provider.name();
            let listed = state.upstream.get(name).into_iter().flatten();
            let configured = self.configured.get(name).into_iter().flatten();
            for model in listed.chain(configured) {
                ids.insert(format!("{name}/{model}"), name.to_string());
            }
        }
        let mut entries: Vec<ModelEntry> = ids
            .into_iter()
            .map(|(id, owner)| ModelEntry::new(id, owner))
            .collect();
        entries.extend(
            router
                .aliases()
                .keys()
                .map(|alias| ModelEntry::new(alias.clone(), "onyx-alias".into())),
        );
        entries
    }
}
