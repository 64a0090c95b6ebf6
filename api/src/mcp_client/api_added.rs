//! MCP servers added through the API, kept in SurrealDB (`mcp_server:{name}`)
//! so every replica runs the same ones and they survive a restart. A server's
//! spec is the config file's entry as JSON with its `env` and `headers`
//! values sealed under the master key ([`crate::storage::SealedSpecs`]);
//! every write bumps `revision`, which replicas compare to restart only what changed.

use serde_json::Value;

use crate::config::{ConfigError, McpServerConfig, McpServerSpec, McpStartup, mcp_server_from_spec};
use crate::secrets::{SecretError, Vault};
use crate::storage::{Db, SealedSpec, SealedSpecs, Stored};

pub use crate::storage::SpecError;

/// A server as stored: its spec with secrets still sealed.
pub type StoredServer = Stored<McpServerSpec>;

impl SealedSpec for McpServerSpec {
    const KIND: &'static str = "MCP server";

    fn map_secrets(
        mut self,
        name: &str,
        each: &mut dyn FnMut(&str, &str) -> Result<String, SecretError>,
    ) -> Result<Self, SecretError> {
        for (key, value) in self.env.iter_mut() {
            *value = each(value, &format!("mcp_server:{name}:env:{key}"))?;
        }
        for (header, value) in self.headers.iter_mut() {
            let context = format!("mcp_server:{name}:header:{}", header.to_ascii_lowercase());
            *value = each(value, &context)?;
        }
        if let Some(secret) = self.oauth.as_mut().and_then(|o| o.client_secret.as_mut()) {
            *secret = each(secret, &format!("mcp_server:{name}:oauth:client_secret"))?;
        }
        Ok(self)
    }

    fn secret_values(&self) -> Vec<&str> {
        self.env
            .values()
            .chain(self.headers.values())
            .chain(self.oauth.iter().filter_map(|o| o.client_secret.as_ref()))
            .map(String::as_str)
            .collect()
    }

    fn check(&self, name: &str) -> Result<(), ConfigError> {
        mcp_server_from_spec(name, self.clone(), McpStartup::Eager).map(drop)
    }
}

impl StoredServer {
    /// The server's settings with its secrets opened.
    pub fn config(&self, vault: &Vault, default_startup: McpStartup) -> Result<McpServerConfig, SpecError> {
        Ok(mcp_server_from_spec(
            &self.name,
            self.opened(vault)?,
            default_startup,
        )?)
    }
}

/// Reads `value` as a server spec; errors name the field.
pub fn parse_spec(value: Value) -> Result<McpServerSpec, ConfigError> {
    crate::storage::parse_fields(value)
}

/// The stored servers.
pub type ServerStore = SealedSpecs<McpServerSpec>;

/// The store of servers in `db`.
pub fn server_store(db: Db) -> ServerStore {
    SealedSpecs::new(db, "mcp_server")
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;
    use serde_json::json;

    fn spec() -> McpServerSpec {
        parse_spec(json!({"command": "/bin/true", "args": ["--flag"],
                          "env": {"SERVICE_TOKEN": "tok-secret-0123456789"}, "trust": "read"}))
        .unwrap()
    }

    #[tokio::test]
    async fn env_and_header_values_are_sealed_at_rest_and_open_in_their_place() {
        let db = Db::scratch().await;
        let store = server_store(db.clone());
        let vault = Vault::ephemeral().unwrap();
        store.create(&vault, "tools", spec()).await.unwrap();
        let remote = parse_spec(json!({"url": "http://127.0.0.1:9/mcp",
                                       "headers": {"Authorization": "Bearer hdr-secret-9876543210"}}))
        .unwrap();
        let signed = parse_spec(json!({"url": "http://127.0.0.1:9/mcp",
                                       "oauth": {"clientId": "onyx", "clientSecret": "cs-secret-5647382910"}}))
        .unwrap();
        store.create(&vault, "signed", signed).await.unwrap();
        store.create(&vault, "remote", remote).await.unwrap();
        let raw: Vec<Value> = db.rows("SELECT * FROM mcp_server", json!({}), 0).await.unwrap();
        let text = serde_json::to_string(&raw).unwrap();
        assert!(
            !text.contains("0123456789") && !text.contains("9876543210") && !text.contains("5647382910"),
            "{text}"
        );
        let signed = store
            .get("signed")
            .await
            .unwrap()
            .unwrap()
            .config(&vault, McpStartup::Eager)
            .unwrap()
            .oauth
            .unwrap();
        assert_eq!(signed.client_id, "onyx");
        assert_eq!(
            signed.client_secret.unwrap().expose_secret(),
            "cs-secret-5647382910"
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
            Err(SpecError::Exists(..))
        ));
        // A sealed value moved to another server's record does not open there.
        let tools = store.get("tools").await.unwrap().unwrap();
        let moved = StoredServer {
            name: "remote".into(),
            ..tools
        };
        assert!(matches!(
            moved.config(&vault, McpStartup::Eager),
            Err(SpecError::Secret(_))
        ));
    }

    #[tokio::test]
    async fn reseal_moves_every_env_value_to_the_new_key() {
        use crate::secrets::{KeySource, MasterKey};
        let copy = |key: &MasterKey| MasterKey::parse(key.encoded().expose_secret(), "t").unwrap();
        let store = server_store(Db::scratch().await);
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
        let opened = stored.opened(&only_new).unwrap();
        assert_eq!(opened.env["SERVICE_TOKEN"], "tok-secret-0123456789");
        assert!(stored.config(&before, McpStartup::Eager).is_err());
    }

    #[tokio::test]
    async fn a_patch_keeps_what_it_does_not_name_and_errors_name_the_field() {
        let db = Db::scratch().await;
        let store = server_store(db);
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
        let opened = patched.opened(&vault).unwrap();
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
        assert!(matches!(err, SpecError::Invalid(_)), "{err}");
        assert!(matches!(
            store.update(&vault, "nobody", json!({})).await,
            Err(SpecError::NotFound(..))
        ));
        assert!(matches!(
            store.create(&vault, "bad__name", spec()).await,
            Err(SpecError::Invalid(_))
        ));
    }
}
