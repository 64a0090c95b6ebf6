//! Providers and aliases added through the API, kept in SurrealDB
//! (`provider:{name}`, `model_alias:{name}`). A provider's spec is the config
//! file's provider entry as JSON, with its API key and header values sealed
//! under the master key ([`crate::storage::SealedSpecs`]); every write bumps
//! `revision`, which replicas compare to rebuild only what changed.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::config::{ConfigError, ProviderConfig, ProviderSpec, provider_from_spec};
use crate::secrets::{SecretError, Vault};
use crate::storage::{Db, SealedSpec, SealedSpecs, Stored};

pub use crate::storage::SpecError;

/// A provider as stored: its spec with secrets still sealed.
pub type StoredProvider = Stored<ProviderSpec>;

impl SealedSpec for ProviderSpec {
    const KIND: &'static str = "provider";

    fn map_secrets(
        mut self,
        name: &str,
        each: &mut dyn FnMut(&str, &str) -> Result<String, SecretError>,
    ) -> Result<Self, SecretError> {
        if let Some(key) = self.api_key.take() {
            self.api_key = Some(each(&key, &format!("provider:{name}:apiKey"))?);
        }
        for (header, value) in self.headers.iter_mut() {
            let context = format!("provider:{name}:header:{}", header.to_ascii_lowercase());
            *value = each(value, &context)?;
        }
        Ok(self)
    }

    fn secret_values(&self) -> Vec<&str> {
        self.api_key
            .iter()
            .chain(self.headers.values())
            .map(String::as_str)
            .collect()
    }

    fn check(&self, name: &str) -> Result<(), ConfigError> {
        provider_from_spec(name, self.clone()).map(drop)
    }
}

impl StoredProvider {
    /// The provider's settings with its secrets opened.
    pub fn config(&self, vault: &Vault) -> Result<ProviderConfig, SpecError> {
        Ok(provider_from_spec(&self.name, self.opened(vault)?)?)
    }
}

/// Reads `value` as a provider spec; errors name the field.
pub fn parse_spec(value: Value) -> Result<ProviderSpec, ConfigError> {
    crate::storage::parse_fields(value)
}

#[derive(Clone)]
pub struct ProviderStore {
    db: Db,
    providers: SealedSpecs<ProviderSpec>,
}

impl ProviderStore {
    pub fn new(db: Db) -> Self {
        Self {
            providers: SealedSpecs::new(db.clone(), "provider"),
            db,
        }
    }

    pub async fn list(&self) -> Result<Vec<StoredProvider>, SpecError> {
        self.providers.list().await
    }

    pub async fn get(&self, name: &str) -> Result<Option<StoredProvider>, SpecError> {
        self.providers.get(name).await
    }

    /// Stores a new provider (its spec checked and its secrets sealed).
    pub async fn create(
        &self,
        vault: &Vault,
        name: &str,
        spec: ProviderSpec,
    ) -> Result<StoredProvider, SpecError> {
        self.providers.create(vault, name, spec).await
    }

    /// Applies a JSON merge patch to a provider's spec (secrets given in the
    /// patch replace the stored ones; `null` removes a field or header).
    pub async fn update(&self, vault: &Vault, name: &str, patch: Value) -> Result<StoredProvider, SpecError> {
        self.providers.update(vault, name, patch).await
    }

    /// Removes a provider; `false` when there was none.
    pub async fn delete(&self, name: &str) -> Result<bool, SpecError> {
        self.providers.delete(name).await
    }

    /// Seals every stored secret under `vault`'s current key (what
    /// `onyx keys rotate-master` does); returns how many providers changed.
    pub async fn reseal_all(&self, vault: &Vault) -> Result<usize, SpecError> {
        self.providers.reseal_all(vault).await
    }

    /// A signal per change to the stored providers (`provider`) or aliases (`model_alias`).
    pub async fn changes(
        &self,
        table: &'static str,
    ) -> Result<futures::stream::BoxStream<'static, ()>, SpecError> {
        Ok(self.db.changes(table).await?)
    }

    pub async fn aliases(&self) -> Result<BTreeMap<String, Vec<String>>, SpecError> {
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

    pub async fn put_alias(&self, name: &str, targets: &[String]) -> Result<(), SpecError> {
        self.db
            .execute(
                "UPSERT type::record('model_alias', $name) SET name = $name, targets = $targets, updated_at = $now",
                json!({"name": name, "targets": targets, "now": crate::clock::now_stamp()}),
            )
            .await?;
        Ok(())
    }

    /// Removes an alias; `false` when there was none.
    pub async fn delete_alias(&self, name: &str) -> Result<bool, SpecError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;

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
            Err(SpecError::Exists(..))
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
        assert!(matches!(err, SpecError::Invalid(_)), "{err}");
        assert!(matches!(
            store.update(&vault, "nobody", json!({})).await,
            Err(SpecError::NotFound(..))
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
            Err(SpecError::Secret(SecretError::UnknownKey(_)))
        ));
    }
}
