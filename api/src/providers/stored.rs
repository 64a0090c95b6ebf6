//! Providers and aliases added through the API, kept in SurrealDB
//! (`provider:{name}`, `model_alias:{name}`). A provider's spec is the config
//! file's provider entry as JSON, with its API key and header values sealed
//! under the master key ([`crate::secrets`]); every write bumps `revision`,
//! which replicas compare to rebuild only what changed.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::config::{ConfigError, ProviderConfig, ProviderSpec, provider_from_spec};
use crate::secrets::{SecretError, Vault};
use crate::storage::{Db, DbError};
use secrecy::ExposeSecret;

const NAME_TAKEN: &str = "onyx:provider-exists";
const CHANGED_MEANWHILE: &str = "onyx:provider-changed";

/// Why a stored provider could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error("{0}")]
    Secret(#[from] SecretError),
    #[error("{0}")]
    Invalid(#[from] ConfigError),
    #[error("a provider named {0:?} already exists")]
    Exists(String),
    #[error("no provider {0:?} was added through the API")]
    NotFound(String),
    #[error("provider {0:?} changed while this edit was made; try again")]
    Conflict(String),
}

/// A provider as stored: its spec with secrets still sealed.
#[derive(Debug, Clone)]
pub struct StoredProvider {
    pub name: String,
    pub spec: ProviderSpec,
    pub revision: u64,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Deserialize)]
struct ProviderRow {
    name: String,
    spec: String,
    revision: u64,
    created_at: String,
    updated_at: String,
}

impl ProviderRow {
    fn into_stored(self) -> Result<StoredProvider, StoreError> {
        let spec = serde_json::from_str(&self.spec)
            .map_err(|err| DbError::Decode(format!("provider {:?}: {err}", self.name)))?;
        Ok(StoredProvider {
            name: self.name,
            spec,
            revision: self.revision,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

fn key_context(name: &str) -> String {
    format!("provider:{name}:apiKey")
}

fn header_context(name: &str, header: &str) -> String {
    format!("provider:{name}:header:{}", header.to_ascii_lowercase())
}

/// `spec` with its key and header values sealed (or opened) for provider `name`.
fn map_secrets(
    name: &str,
    mut spec: ProviderSpec,
    mut each: impl FnMut(&str, &str) -> Result<String, SecretError>,
) -> Result<ProviderSpec, SecretError> {
    if let Some(key) = spec.api_key.take() {
        spec.api_key = Some(each(&key, &key_context(name))?);
    }
    spec.headers = std::mem::take(&mut spec.headers)
        .into_iter()
        .map(|(header, value)| {
            let context = header_context(name, &header);
            each(&value, &context).map(|value| (header, value))
        })
        .collect::<Result<_, _>>()?;
    Ok(spec)
}

pub fn seal_spec(vault: &Vault, name: &str, spec: ProviderSpec) -> Result<ProviderSpec, SecretError> {
    map_secrets(name, spec, |plain, context| vault.seal(plain, context))
}

pub fn open_spec(vault: &Vault, name: &str, spec: ProviderSpec) -> Result<ProviderSpec, SecretError> {
    map_secrets(name, spec, |sealed, context| {
        vault.open(sealed, context).map(|s| s.expose_secret().to_string())
    })
}

impl StoredProvider {
    /// The provider's settings with its secrets opened.
    pub fn config(&self, vault: &Vault) -> Result<ProviderConfig, StoreError> {
        let spec = open_spec(vault, &self.name, self.spec.clone())?;
        Ok(provider_from_spec(&self.name, spec)?)
    }
}

/// RFC 7396 JSON merge patch: objects merge key by key, `null` removes.
pub(crate) fn merge_patch(target: &mut Value, patch: Value) {
    let Value::Object(patch) = patch else {
        *target = patch;
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Default::default());
    }
    let Value::Object(map) = target else { return };
    for (key, value) in patch {
        if value.is_null() {
            map.remove(&key);
        } else {
            merge_patch(map.entry(key).or_insert(Value::Null), value);
        }
    }
}

/// Reads `value` as a provider spec; errors name the field.
pub fn parse_spec(value: Value) -> Result<ProviderSpec, ConfigError> {
    serde_path_to_error::deserialize(value).map_err(|err| {
        let path = err.path().to_string();
        ConfigError::Invalid {
            path: if path == "." { String::new() } else { path },
            message: err.into_inner().to_string(),
        }
    })
}

#[derive(Clone)]
pub struct ProviderStore {
    db: Db,
}

impl ProviderStore {
    pub fn new(db: Db) -> Self {
        Self { db }
    }

    pub async fn list(&self) -> Result<Vec<StoredProvider>, StoreError> {
        let rows: Vec<ProviderRow> = self
            .db
            .rows("SELECT * OMIT id FROM provider ORDER BY name", json!({}), 0)
            .await?;
        rows.into_iter().map(ProviderRow::into_stored).collect()
    }

    pub async fn get(&self, name: &str) -> Result<Option<StoredProvider>, StoreError> {
        let rows: Vec<ProviderRow> = self
            .db
            .rows(
                "SELECT * OMIT id FROM type::record('provider', $name)",
                json!({"name": name}),
                0,
            )
            .await?;
        rows.into_iter().next().map(ProviderRow::into_stored).transpose()
    }

    /// Stores a new provider (its spec checked and its secrets sealed).
    pub async fn create(
        &self,
        vault: &Vault,
        name: &str,
        spec: ProviderSpec,
    ) -> Result<StoredProvider, StoreError> {
        provider_from_spec(name, spec.clone())?;
        let sealed = seal_spec(vault, name, spec)?;
        let now = crate::clock::now_stamp();
        let result = self
            .db
            .execute(
                &format!(
                    "BEGIN TRANSACTION;
                     IF (SELECT VALUE name FROM type::record('provider', $name)) != [] {{ THROW '{NAME_TAKEN}' }};
                     CREATE type::record('provider', $name) SET name = $name, spec = $spec,
                         revision = 1, created_at = $now, updated_at = $now;
                     COMMIT TRANSACTION;"
                ),
                json!({"name": name, "spec": spec_json(&sealed)?, "now": now}),
            )
            .await;
        match result {
            Err(DbError::Surreal(message)) if message.contains(NAME_TAKEN) => {
                return Err(StoreError::Exists(name.into()));
            }
            other => other?,
        };
        Ok(StoredProvider {
            name: name.into(),
            spec: sealed,
            revision: 1,
            created_at: now.clone(),
            updated_at: now,
        })
    }

    /// Applies a JSON merge patch to a provider's spec (secrets given in the
    /// patch replace the stored ones; `null` removes a field or header).
    pub async fn update(
        &self,
        vault: &Vault,
        name: &str,
        patch: Value,
    ) -> Result<StoredProvider, StoreError> {
        let current = self
            .get(name)
            .await?
            .ok_or_else(|| StoreError::NotFound(name.into()))?;
        let opened = open_spec(vault, name, current.spec.clone())?;
        let mut value = serde_json::to_value(&opened).map_err(|err| DbError::Decode(err.to_string()))?;
        merge_patch(&mut value, patch);
        let spec = parse_spec(value)?;
        provider_from_spec(name, spec.clone())?;
        let sealed = seal_spec(vault, name, spec)?;
        self.write(name, &sealed, current.revision).await?;
        let now = crate::clock::now_stamp();
        Ok(StoredProvider {
            spec: sealed,
            revision: current.revision + 1,
            updated_at: now,
            ..current
        })
    }

    /// Replaces the stored spec if nobody else changed it since `revision`.
    async fn write(&self, name: &str, sealed: &ProviderSpec, revision: u64) -> Result<(), StoreError> {
        let result = self
            .db
            .execute(
                &format!(
                    "BEGIN TRANSACTION;
                     IF (SELECT VALUE revision FROM type::record('provider', $name)) != [$revision]
                         {{ THROW '{CHANGED_MEANWHILE}' }};
                     UPDATE type::record('provider', $name) SET spec = $spec, revision = $revision + 1,
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

    /// Removes a provider; `false` when there was none.
    pub async fn delete(&self, name: &str) -> Result<bool, StoreError> {
        let gone: Vec<Value> = self
            .db
            .rows(
                "DELETE type::record('provider', $name) RETURN BEFORE",
                json!({"name": name}),
                0,
            )
            .await?;
        Ok(!gone.is_empty())
    }

    /// Seals every stored secret under `vault`'s current key (what
    /// `onyx keys rotate-master` does); returns how many providers changed.
    pub async fn reseal_all(&self, vault: &Vault) -> Result<usize, StoreError> {
        let mut changed = 0;
        for stored in self.list().await? {
            let sealed_values = stored.spec.api_key.iter().chain(stored.spec.headers.values());
            if sealed_values.clone().all(|v| vault.is_current(v)) {
                continue;
            }
            let opened = open_spec(vault, &stored.name, stored.spec.clone())?;
            let resealed = seal_spec(vault, &stored.name, opened)?;
            self.write(&stored.name, &resealed, stored.revision).await?;
            changed += 1;
        }
        Ok(changed)
    }

    /// A signal per change to the stored providers (`provider`) or aliases (`model_alias`).
    pub async fn changes(
        &self,
        table: &'static str,
    ) -> Result<futures::stream::BoxStream<'static, ()>, StoreError> {
        Ok(self.db.changes(table).await?)
    }

    pub async fn aliases(&self) -> Result<BTreeMap<String, Vec<String>>, StoreError> {
        #[derive(Deserialize)]
        struct AliasRow {
            name: String,
            targets: Vec<String>,
        }
        let rows: Vec<AliasRow> = self
            .db
            .rows("SELECT name, targets FROM model_alias", json!({}), 0)
            .await?;
        Ok(rows.into_iter().map(|r| (r.name, r.targets)).collect())
    }

    pub async fn put_alias(&self, name: &str, targets: &[String]) -> Result<(), StoreError> {
        self.db
            .execute(
                "UPSERT type::record('model_alias', $name) SET name = $name, targets = $targets, updated_at = $now",
                json!({"name": name, "targets": targets, "now": crate::clock::now_stamp()}),
            )
            .await?;
        Ok(())
    }

    /// Removes an alias; `false` when there was none.
    pub async fn delete_alias(&self, name: &str) -> Result<bool, StoreError> {
        let gone: Vec<Value> = self
            .db
            .rows(
                "DELETE type::record('model_alias', $name) RETURN BEFORE",
                json!({"name": name}),
                0,
            )
            .await?;
        Ok(!gone.is_empty())
    }
}

fn spec_json(spec: &ProviderSpec) -> Result<String, StoreError> {
    serde_json::to_string(spec).map_err(|err| DbError::Decode(err.to_string()).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(key: &str) -> ProviderSpec {
        parse_spec(
            json!({"type": "openai", "baseUrl": "http://127.0.0.1:9/v1", "apiKey": key,
                          "headers": {"X-Org": "org-secret-value"}}),
        )
        .unwrap()
    }

    #[tokio::test]
    async fn stored_secrets_are_sealed_and_open_in_their_place() {
        let db = Db::scratch().await;
        let store = ProviderStore::new(db.clone());
        let vault = Vault::ephemeral().unwrap();
        store
            .create(&vault, "acme", spec("sk-acme-0123456789"))
            .await
            .unwrap();
        let raw: Vec<Value> = db.rows("SELECT * FROM provider", json!({}), 0).await.unwrap();
        let text = serde_json::to_string(&raw).unwrap();
        assert!(
            !text.contains("0123456789") && !text.contains("org-secret-value"),
            "{text}"
        );
        let stored = store.get("acme").await.unwrap().unwrap();
        let config = stored.config(&vault).unwrap();
        assert_eq!(config.api_key.unwrap().expose_secret(), "sk-acme-0123456789");
        assert_eq!(config.headers[0].1.expose_secret(), "org-secret-value");
        assert!(matches!(
            store.create(&vault, "acme", spec("k")).await,
            Err(StoreError::Exists(_))
        ));
    }

    #[tokio::test]
    async fn a_patch_keeps_what_it_does_not_name_and_null_removes() {
        let db = Db::scratch().await;
        let store = ProviderStore::new(db);
        let vault = Vault::ephemeral().unwrap();
        store
            .create(&vault, "acme", spec("sk-acme-0123456789"))
            .await
            .unwrap();
        let patched = store
            .update(
                &vault,
                "acme",
                json!({"maxRetries": 5, "headers": {"X-Org": null}}),
            )
            .await
            .unwrap();
        assert_eq!(patched.revision, 2);
        let config = patched.config(&vault).unwrap();
        assert_eq!(config.max_retries, 5);
        assert!(config.headers.is_empty());
        assert_eq!(config.api_key.unwrap().expose_secret(), "sk-acme-0123456789");
        let err = store
            .update(&vault, "acme", json!({"timeoutSeconds": "soon"}))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("timeoutSeconds"), "{err}");
        let err = store
            .update(&vault, "acme", json!({"baseUrl": "not a url"}))
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Invalid(_)), "{err}");
        assert!(matches!(
            store.update(&vault, "nobody", json!({})).await,
            Err(StoreError::NotFound(_))
        ));
    }

    #[tokio::test]
    async fn reseal_moves_every_secret_to_the_new_key() {
        use crate::secrets::{KeySource, MasterKey};
        let copy = |key: &MasterKey| MasterKey::parse(key.encoded().expose_secret(), "t").unwrap();
        let db = Db::scratch().await;
        let store = ProviderStore::new(db);
        let (old, new) = (MasterKey::generate().unwrap(), MasterKey::generate().unwrap());
        let before = Vault::new(copy(&old), Vec::new(), KeySource::Generated);
        store
            .create(&before, "acme", spec("sk-acme-0123456789"))
            .await
            .unwrap();
        let during = Vault::new(copy(&new), vec![old], KeySource::Generated);
        assert_eq!(store.reseal_all(&during).await.unwrap(), 1);
        assert_eq!(
            store.reseal_all(&during).await.unwrap(),
            0,
            "nothing left to move"
        );
        let stored = store.get("acme").await.unwrap().unwrap();
        let only_new = Vault::new(new, Vec::new(), KeySource::Generated);
        let config = stored.config(&only_new).unwrap();
        assert_eq!(config.api_key.unwrap().expose_secret(), "sk-acme-0123456789");
        assert!(matches!(
            stored.config(&before),
            Err(StoreError::Secret(SecretError::UnknownKey(_)))
        ));
    }
}
