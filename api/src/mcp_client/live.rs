//! Live changes to the MCP servers without restarting Onyx: servers added,
//! edited or removed through `/v1/mcp/servers` are stored, and every replica
//! follows the store's changes, swapping only the clients whose server
//! changed; a restart replaces one client on this replica. The config file's
//! servers are read-only here.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;

use super::api_added::{ServerStore, SpecError};
use super::supervisor::Server;
use super::{McpClients, McpServerView};
use crate::config::{McpServerConfig, McpServerSpec, McpStartup};
use crate::secrets::Vault;

/// Even with no change signalled, the store is read again this often (a
/// live query can miss changes while it reconnects).
const RELOAD_EVERY: Duration = Duration::from_secs(30);

/// The stored servers and what this replica runs of them.
pub(super) struct Stored {
    store: ServerStore,
    vault: Arc<Vault>,
    /// The revision each stored server's client was built from.
    revisions: Mutex<BTreeMap<String, u64>>,
    /// Why a stored server cannot run on this replica, by name.
    errors: Mutex<BTreeMap<String, String>>,
    /// One reload (or restart) at a time.
    changing: tokio::sync::Mutex<()>,
}

/// Why a change through the API was refused.
#[derive(Debug, thiserror::Error)]
pub enum ChangeError {
    #[error(transparent)]
    Store(#[from] SpecError),
    #[error("the MCP server {0:?} comes from the config file; change it there")]
    ReadOnly(String),
    #[error("no MCP server {0:?}; GET /v1/mcp/servers lists them")]
    NotFound(String),
    #[error("MCP servers cannot be stored on this gateway")]
    NoStore,
}

impl McpClients {
    /// Runs the servers stored through the API as well (read now, then
    /// followed by [`Self::watch`]).
    pub async fn attach_store(&self, store: ServerStore, vault: Arc<Vault>) {
        match super::oauth::OAuth::new(store.db(), vault.clone()) {
            Ok(oauth) => {
                let _ = self.oauth.set(Arc::new(oauth));
            }
            Err(err) => tracing::error!(error = %err, "OAuth sign-in for MCP servers is unavailable"),
        }
        let stored = Stored {
            store,
            vault,
            revisions: Mutex::new(BTreeMap::new()),
            errors: Mutex::new(BTreeMap::new()),
            changing: tokio::sync::Mutex::new(()),
        };
        if self.stored.set(stored).is_ok() {
            self.reload_logged().await;
        }
    }

    fn stored(&self) -> Result<&Stored, ChangeError> {
        self.stored.get().ok_or(ChangeError::NoStore)
    }

    /// Why the stored server `name` cannot run here, if it cannot.
    pub(super) fn stored_error(&self, name: &str) -> Option<String> {
        let stored = self.stored.get()?;
        lock(&stored.errors).get(name).cloned()
    }

    /// Reads the stored servers and swaps the clients of those that changed.
    pub async fn reload(&self) -> Result<(), SpecError> {
        let Some(stored) = self.stored.get() else {
            return Ok(());
        };
        let _one_at_a_time = stored.changing.lock().await;
        let list = stored.store.list().await?;
        let gone: Vec<String> = lock(&stored.revisions)
            .keys()
            .filter(|name| !list.iter().any(|s| &s.name == *name))
            .cloned()
            .collect();
        for name in gone {
            lock(&stored.revisions).remove(&name);
            lock(&stored.errors).remove(&name);
            self.replace(&name, None, false).await;
            tracing::info!(mcp_server = %name, "MCP server removed");
        }
        for server in list {
            if self.from_file.contains(&server.name) {
                tracing::warn!(mcp_server = %server.name, "a stored MCP server has the name of one in the config file; the file's is kept");
                continue;
            }
            if lock(&stored.revisions).get(&server.name) == Some(&server.revision) {
                continue;
            }
            lock(&stored.revisions).insert(server.name.clone(), server.revision);
            match server.config(&stored.vault, self.default_startup) {
                Ok(config) => {
                    lock(&stored.errors).remove(&server.name);
                    self.replace(&server.name, Some(config), false).await;
                    tracing::info!(mcp_server = %server.name, revision = server.revision, "MCP server (re)configured");
                }
                Err(err) => {
                    tracing::error!(mcp_server = %server.name, error = %err, "a stored MCP server cannot be used; keeping its last good version if any");
                    lock(&stored.errors).insert(server.name.clone(), err.to_string());
                }
            }
        }
        Ok(())
    }

    async fn reload_logged(&self) {
        if let Err(err) = self.reload().await {
            tracing::warn!(error = %err, "could not read the stored MCP servers");
        }
    }

    /// Puts a fresh client for `name` in place (or none), stops the old one,
    /// and starts the fresh one if it is eager, the old one was running, or `launch`.
    async fn replace(&self, name: &str, config: Option<McpServerConfig>, launch: bool) {
        let fresh = config.map(|config| Server::new(name.to_string(), config, self.oauth.clone()));
        let old = {
            let mut servers = self.servers.write().unwrap_or_else(PoisonError::into_inner);
            match &fresh {
                Some(fresh) => servers.insert(name.to_string(), fresh.clone()),
                None => servers.remove(name),
            }
        };
        let was_running = old.as_ref().is_some_and(|old| old.was_launched());
        if let Some(old) = old {
            old.stop().await;
        }
        if let Some(fresh) = fresh
            && (launch || was_running || fresh.config.startup == McpStartup::Eager)
        {
            self.launch(&fresh);
        }
    }

    /// Follows the stored servers' changes from every replica until the process stops.
    pub async fn watch(self: Arc<Self>) {
        let Some(stored) = self.stored.get() else {
            return;
        };
        let mut backoff = crate::backoff::Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
        while !*self.stop.borrow() {
            let mut changes = match stored.store.changes().await {
                Ok(changes) => changes,
                Err(err) => {
                    tracing::warn!(error = %err, "cannot follow MCP server changes; retrying");
                    tokio::time::sleep(backoff.failed()).await;
                    continue;
                }
            };
            backoff.succeeded();
            // What changed while no live query listened.
            self.reload_logged().await;
            // A change, or a quiet spell: read again. The stream ending: subscribe again.
            while let Ok(Some(())) | Err(_) = tokio::time::timeout(RELOAD_EVERY, changes.next()).await {
                if *self.stop.borrow() {
                    return;
                }
                self.reload_logged().await;
            }
        }
    }

    fn writable(&self, name: &str) -> Result<&Stored, ChangeError> {
        if self.from_file.iter().any(|n| n == name) {
            return Err(ChangeError::ReadOnly(name.into()));
        }
        self.stored()
    }

    fn shown(&self, name: &str) -> Result<McpServerView, ChangeError> {
        self.server_view(name)
            .ok_or_else(|| ChangeError::NotFound(name.into()))
    }

    /// Stores a new server and starts it here (other replicas follow).
    pub async fn add(&self, name: &str, spec: McpServerSpec) -> Result<McpServerView, ChangeError> {
        let stored = self.writable(name).map_err(|err| match err {
            ChangeError::ReadOnly(name) => ChangeError::Store(SpecError::Exists("MCP server", name)),
            other => other,
        })?;
        stored.store.create(&stored.vault, name, spec).await?;
        self.reload().await?;
        self.stored_failure(name)?;
        self.shown(name)
    }

    /// Applies a JSON merge patch to a stored server and swaps its client.
    pub async fn edit(&self, name: &str, patch: Value) -> Result<McpServerView, ChangeError> {
        let stored = self.writable(name)?;
        stored.store.update(&stored.vault, name, patch).await?;
        self.reload().await?;
        self.stored_failure(name)?;
        self.shown(name)
    }

    /// A stored server that could not be built after a write: its reason.
    fn stored_failure(&self, name: &str) -> Result<(), ChangeError> {
        match self.stored_error(name) {
            Some(error) => Err(ChangeError::Store(SpecError::Invalid(
                crate::config::ConfigError::invalid("", error),
            ))),
            None => Ok(()),
        }
    }

    /// Removes a stored server and stops its client.
    pub async fn remove(&self, name: &str) -> Result<(), ChangeError> {
        let stored = self.writable(name)?;
        if !stored.store.delete(name).await? {
            return Err(ChangeError::NotFound(name.into()));
        }
        // Its tokens go with it.
        if let Some(oauth) = self.oauth.get()
            && let Err(err) = oauth.forget(name).await
        {
            tracing::warn!(mcp_server = %name, error = %err, "could not delete the removed server's tokens");
        }
        self.reload().await?;
        Ok(())
    }

    /// Replaces the client of `name` on this replica with a fresh one, started now.
    pub async fn restart(&self, name: &str) -> Result<McpServerView, ChangeError> {
        let _one_at_a_time = match self.stored.get() {
            Some(stored) => Some(stored.changing.lock().await),
            None => None,
        };
        let server = self.get(name).ok_or_else(|| ChangeError::NotFound(name.into()))?;
        self.replace(name, Some(server.config.clone()), true).await;
        tracing::info!(mcp_server = %name, "MCP server restarted through the API");
        self.shown(name)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
