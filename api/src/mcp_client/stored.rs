//! MCP servers added through the API, kept in SurrealDB (`mcp_server:{name}`)
//! so every replica runs the same ones and they survive a restart. A server's
//! spec is the config file's entry as JSON with its `env` and `headers`
//! values sealed under the master key ([`crate::secrets`]); every write bumps
//! `revision`, which replicas compare to restart only what changed.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::config::{ConfigError, McpServerConfig, McpServerSpec, McpStartup, mcp_server_from_spec};
use crate::secrets::{SecretError, Vault};
use crate::storage::{Db, DbError};
use secrecy::ExposeSecret;

const NAME_TAKEN: &str = "onyx:mcp-server-exists";
const CHANGED_MEANWHILE: &str = "onyx:mcp-server-changed";

/// Why a stored server could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error("{0}")]
    Secret(#[from] SecretError),
    #[error("{0}")]
    Invalid(#[from] ConfigError),
    #[error("an MCP server named {0:?} already exists")]
    Exists(String),
    #[error("no MCP server {0:?} was added through the API")]
    NotFound(String),
    #[error("MCP server {0:?} changed while this edit was made; try again")]
    Conflict(String),
}

/// A server as stored: its spec with secrets still sealed.
#[derive(Debug, Clone)]
pub struct StoredServer {
    pub name: String,
    pub spec: McpServerSpec,
    pub revision: u64,
}

#[derive(Deserialize)]
struct ServerRow {
    name: String,
    spec: String,
    revision: u64,
}

impl ServerRow {
    fn into_stored(self) -> Result<StoredServer, StoreError> {
        let spec = serde_json::from_str(&self.spec)
            .map_err(|err| DbError::Decode(format!("MCP server {:?}: {err}", self.name)))?;
        Ok(StoredServer {
            name: self.name,
            spec,
            revision: self.revision,
        })
    }
}

/// `spec` with its env and header values sealed (or opened) for server `name`.
fn map_secrets(
    name: &str,
    mut spec: McpServerSpec,
    mut each: impl FnMut(&str, &str) -> Result<String, SecretError>,
) -> Result<McpServerSpec, SecretError> {
    for (key, value) in spec.env.iter_mut() {
        *value = each(value, &format!("mcp_server:{name}:env:{key}"))?;
    }
    for (header, value) in spec.headers.iter_mut() {
        let context = format!("mcp_server:{name}:header:{}", header.to_ascii_lowercase());
        *value = each(value, &context)?;
    }
    Ok(spec)
}

fn seal(vault: &Vault, name: &str, spec: McpServerSpec) -> Result<McpServerSpec, SecretError> {
    map_secrets(name, spec, |plain, context| vault.seal(plain, context))
}

fn open(vault: &Vault, name: &str, spec: McpServerSpec) -> Result<McpServerSpec, SecretError> {
    map_secrets(name, spec, |sealed, context| {
        vault.open(sealed, context).map(|s| s.expose_secret().to_string())
    })
}

impl StoredServer {
    /// The server's settings with its secrets opened.
    pub fn config(&self, vault: &Vault, default_startup: McpStartup) -> Result<McpServerConfig, StoreError> {
        let spec = open(vault, &self.name, self.spec.clone())?;
        Ok(mcp_server_from_spec(&self.name, spec, default_startup)?)
    }
}

/// Reads `value` as a server spec; errors name the field.
pub fn parse_spec(value: Value) -> Result<McpServerSpec, ConfigError> {
    serde_path_to_error::deserialize(value).map_err(|err| {
        let path = err.path().to_string();
        ConfigError::Invalid {
            path: if path == "." { String::new() } else { path },
            message: err.into_inner().to_string(),
        }
    })
}

#[derive(Clone)]
pub struct ServerStore {
    db: Db,
}

impl ServerStore {
    pub fn new(db: Db) -> Self {
        Self { db }
    }

    pub async fn list(&self) -> Result<Vec<StoredServer>, StoreError> {
        let rows: Vec<ServerRow> = self
            .db
            .rows(
                "SELECT name, spec, revision FROM mcp_server ORDER BY name",
                json!({}),
                0,
            )
            .await?;
        rows.into_iter().map(ServerRow::into_stored).collect()
    }

    pub async fn get(&self, name: &str) -> Result<Option<StoredServer>, StoreError> {
        let rows: Vec<ServerRow> = self
            .db
            .rows(
                "SELECT name, spec, revision FROM type::record('mcp_server', $name)",
                json!({"name": name}),
                0,
            )
            .await?;
        rows.into_iter().next().map(ServerRow::into_stored).transpose()
    }

    /// Stores a new server (its spec checked and its secrets sealed).
    pub async fn create(
        &self,
        vault: &Vault,
        name: &str,
        spec: McpServerSpec,
    ) -> Result<StoredServer, StoreError> {
        mcp_server_from_spec(name, spec.clone(), McpStartup::Eager)?;
        let sealed = seal(vault, name, spec)?;
        let result = self
            .db
            .execute(
                &format!(
                    "BEGIN TRANSACTION;
                     IF (SELECT VALUE name FROM type::record('mcp_server', $name)) != [] {{ THROW '{NAME_TAKEN}' }};
                     CREATE type::record('mcp_server', $name) SET name = $name, spec = $spec,
                         revision = 1, created_at = $now, updated_at = $now;
                     COMMIT TRANSACTION;"
                ),
                json!({"name": name, "spec": spec_json(&sealed)?, "now": crate::clock::now_stamp()}),
            )
            .await;
        match result {
            Err(DbError::Surreal(message)) if message.contains(NAME_TAKEN) => {
                return Err(StoreError::Exists(name.into()));
            }
            other => other?,
        };
        Ok(StoredServer {
            name: name.into(),
            spec: sealed,
            revision: 1,
        })
    }

    /// Applies a JSON merge patch to a server's spec (env and header values
    /// given replace the stored ones; `null` removes a field, a variable or a header).
    pub async fn update(&self, vault: &Vault, name: &str, patch: Value) -> Result<StoredServer, StoreError> {
        let current = self
            .get(name)
            .await?
            .ok_or_else(|| StoreError::NotFound(name.into()))?;
        let opened = open(vault, name, current.spec.clone())?;
        let mut value = serde_json::to_value(&opened).map_err(|err| DbError::Decode(err.to_string()))?;
        crate::providers::stored::merge_patch(&mut value, patch);
        let spec = parse_spec(value)?;
        mcp_server_from_spec(name, spec.clone(), McpStartup::Eager)?;
        let sealed = seal(vault, name, spec)?;
        self.write(name, &sealed, current.revision).await?;
        Ok(StoredServer {
            spec: sealed,
            revision: current.revision + 1,
            ..current
        })
    }

    /// Replaces the stored spec if nobody else changed it since `revision`.
    async fn write(&self, name: &str, sealed: &McpServerSpec, revision: u64) -> Result<(), StoreError> {
        let result = self
            .db
            .execute(
                &format!(
                    "BEGIN TRANSACTION;
                     IF (SELECT VALUE revision FROM type::record('mcp_server', $name)) != [$revision]
                         {{ THROW '{CHANGED_MEANWHILE}' }};
                     UPDATE type::record('mcp_server', $name) SET spec = $spec, revision = $revision + 1,
                         updated_at = $now;
                     COMMIT TRANSACTION;"
                ),
                json!({"name": name, "spec": spec_json(sealed)?, "revision": revision,
                       "now": crate::clock::now_stamp()}),
            )
            .await;
        match result {
            Err(DbError::Surreal(message)) if message.contains(CHANGED_MEANWHILE) => {
                Err(StoreError::Conflict(name.into()))
            }
            other => other.map(drop).map_err(Into::into),
        }
    }

    /// Seals every stored secret under `vault`'s current key (what
    /// `onyx keys rotate-master` does); returns how many servers changed.
    pub async fn reseal_all(&self, vault: &Vault) -> Result<usize, StoreError> {
        let mut changed = 0;
        for stored in self.list().await? {
            let mut sealed_values = stored.spec.env.values().chain(stored.spec.headers.values());
            if sealed_values.all(|v| vault.is_current(v)) {
                continue;
            }
            let opened = open(vault, &stored.name, stored.spec.clone())?;
            let resealed = seal(vault, &stored.name, opened)?;
            self.write(&stored.name, &resealed, stored.revision).await?;
            changed += 1;
        }
        Ok(changed)
    }

    /// Removes a server; `false` when there was none.
    pub async fn delete(&self, name: &str) -> Result<bool, StoreError> {
        let gone: Vec<Value> = self
            .db
            .rows(
                "DELETE type::record('mcp_server', $name) RETURN BEFORE",
                json!({"name": name}),
                0,
            )
            .await?;
        Ok(!gone.is_empty())
    }

    /// A signal per change to the stored servers.
    pub async fn changes(&self) -> Result<futures::stream::BoxStream<'static, ()>, StoreError> {
        Ok(self.db.changes("mcp_server").await?)
    }
}

fn spec_json(spec: &McpServerSpec) -> Result<String, StoreError> {
    serde_json::to_string(spec).map_err(|err| DbError::Decode(err.to_string()).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> McpServerSpec {
        parse_spec(json!({"command": "/bin/true", "args": ["--flag"],
                          "env": {"SERVICE_TOKEN": "tok-secret-0123456789"}, "trust": "read"}))
        .unwrap()
    }

    #[tokio::test]
    async fn env_and_header_values_are_sealed_at_rest_and_open_in_their_place() {
        let db = Db::scratch().await;
        let store = ServerStore::new(db.clone());
        let vault = Vault::ephemeral().unwrap();
        store.create(&vault, "tools", spec()).await.unwrap();
        let remote = parse_spec(json!({"url": "http://127.0.0.1:9/mcp",
                                       "headers": {"Authorization": "Bearer hdr-secret-9876543210"}}))
        .unwrap();
        store.create(&vault, "remote", remote).await.unwrap();
        let raw: Vec<Value> = db.rows("SELECT * FROM mcp_server", json!({}), 0).await.unwrap();
        let text = serde_json::to_string(&raw).unwrap();
        assert!(
            !text.contains("0123456789") && !text.contains("9876543210"),
            "{text}"
        );
        let config = store
            .get("tools")
            .await
            .unwrap()
            .unwrap()
            .config(&vault, McpStartup::Eager)
            .unwrap();
        let crate::config::McpTransport::Stdio { env, args, .. } = config.transport else {
            panic!("stdio expected")
        };
        assert_eq!(env["SERVICE_TOKEN"].expose_secret(), "tok-secret-0123456789");
        assert_eq!(args, ["--flag"]);
        assert!(matches!(
            store.create(&vault, "tools", spec()).await,
            Err(StoreError::Exists(_))
        ));
        // A sealed value moved to another server's record does not open there.
        let tools = store.get("tools").await.unwrap().unwrap();
        let moved = StoredServer {
            name: "remote".into(),
            ..tools
        };
        assert!(matches!(
            moved.config(&vault, McpStartup::Eager),
            Err(StoreError::Secret(_))
        ));
    }

    #[tokio::test]
    async fn reseal_moves_every_env_value_to_the_new_key() {
        use crate::secrets::{KeySource, MasterKey};
        let copy = |key: &MasterKey| MasterKey::parse(key.encoded().expose_secret(), "t").unwrap();
        let store = ServerStore::new(Db::scratch().await);
        let (old, new) = (MasterKey::generate().unwrap(), MasterKey::generate().unwrap());
        let before = Vault::new(copy(&old), Vec::new(), KeySource::Generated);
        store.create(&before, "tools", spec()).await.unwrap();
        let during = Vault::new(copy(&new), vec![old], KeySource::Generated);
        assert_eq!(store.reseal_all(&during).await.unwrap(), 1);
        assert_eq!(
            store.reseal_all(&during).await.unwrap(),
            0,
            "nothing left to move"
        );
        let only_new = Vault::new(new, Vec::new(), KeySource::Generated);
        let stored = store.get("tools").await.unwrap().unwrap();
        let opened = open(&only_new, "tools", stored.spec.clone()).unwrap();
        assert_eq!(opened.env["SERVICE_TOKEN"], "tok-secret-0123456789");
        assert!(stored.config(&before, McpStartup::Eager).is_err());
    }

    #[tokio::test]
    async fn a_patch_keeps_what_it_does_not_name_and_errors_name_the_field() {
        let db = Db::scratch().await;
        let store = ServerStore::new(db);
        let vault = Vault::ephemeral().unwrap();
        store.create(&vault, "tools", spec()).await.unwrap();
        let patched = store
            .update(
                &vault,
                "tools",
                json!({"args": ["--other"], "env": {"EXTRA": "x"}}),
            )
            .await
            .unwrap();
        assert_eq!(patched.revision, 2);
        let opened = open(&vault, "tools", patched.spec).unwrap();
        assert_eq!(opened.env["SERVICE_TOKEN"], "tok-secret-0123456789");
        assert_eq!(opened.env["EXTRA"], "x");
        let err = store
            .update(&vault, "tools", json!({"trust": "sometimes"}))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("trust"), "{err}");
        let err = store
            .update(&vault, "tools", json!({"url": "http://127.0.0.1:9/mcp"}))
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Invalid(_)), "{err}");
        assert!(matches!(
            store.update(&vault, "nobody", json!({})).await,
            Err(StoreError::NotFound(_))
        ));
        assert!(matches!(
            store.create(&vault, "bad__name", spec()).await,
            Err(StoreError::Invalid(_))
        ));
    }
}
