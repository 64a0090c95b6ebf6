//! What OAuth sign-in keeps in SurrealDB: each remote server's grant
//! (`mcp_oauth:{server}`: its client registration and tokens, every secret
//! sealed under the master key for its place) and the sign-ins under way
//! (`mcp_oauth_state:{sha256(state)}`: the PKCE verifier sealed, taken by
//! exactly one callback and only before it expires).

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::OAuthError;
use crate::secrets::Vault;
use crate::storage::Db;

/// How the client proves itself at the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientAuth {
    /// A public client: only its id.
    None,
    ClientSecretPost,
    ClientSecretBasic,
}

/// A client registered with (or configured for) an authorization server.
#[derive(Debug, Clone)]
pub struct OAuthClient {
    pub id: String,
    pub secret: Option<SecretString>,
    pub auth: ClientAuth,
}

/// Where tokens come from, and the client that asks for them.
#[derive(Debug, Clone)]
pub struct Issuer {
    pub issuer: String,
    pub token_endpoint: String,
    /// The MCP server's URL, sent as the RFC 8707 `resource`.
    pub resource: String,
    pub client: OAuthClient,
}

/// A server's tokens, opened.
#[derive(Debug, Clone)]
pub struct Grant {
    pub issuer: Issuer,
    pub access_token: SecretString,
    pub refresh_token: Option<SecretString>,
    pub issued_at: i64,
    pub expires_at: Option<i64>,
}

/// A sign-in under way, opened.
#[derive(Debug)]
pub struct Pending {
    pub server: String,
    pub issuer: Issuer,
    pub verifier: SecretString,
    pub redirect_uri: String,
    pub expires_at: i64,
}

#[derive(Serialize, Deserialize)]
struct IssuerRow {
    issuer: String,
    token_endpoint: String,
    resource: String,
    client_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_secret: Option<String>,
    client_auth: ClientAuth,
}

#[derive(Serialize, Deserialize)]
struct GrantRow {
    #[serde(flatten)]
    issuer: IssuerRow,
    access_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    refresh_token: Option<String>,
    issued_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_at: Option<i64>,
}

#[derive(Serialize, Deserialize)]
struct PendingRow {
    server: String,
    #[serde(flatten)]
    issuer: IssuerRow,
    verifier: String,
    redirect_uri: String,
    expires_at: i64,
}

fn store_error(err: impl std::fmt::Display) -> OAuthError {
    OAuthError::Store(err.to_string())
}

fn seal_issuer(vault: &Vault, issuer: &Issuer, place: &str) -> Result<IssuerRow, OAuthError> {
    Ok(IssuerRow {
        issuer: issuer.issuer.clone(),
        token_endpoint: issuer.token_endpoint.clone(),
        resource: issuer.resource.clone(),
        client_id: issuer.client.id.clone(),
        client_secret: issuer
            .client
            .secret
            .as_ref()
            .map(|s| vault.seal(s.expose_secret(), &format!("{place}:client_secret")))
            .transpose()
            .map_err(store_error)?,
        client_auth: issuer.client.auth,
    })
}

fn open_issuer(vault: &Vault, row: IssuerRow, place: &str) -> Result<Issuer, OAuthError> {
    Ok(Issuer {
        issuer: row.issuer,
        token_endpoint: row.token_endpoint,
        resource: row.resource,
        client: OAuthClient {
            id: row.client_id,
            secret: row
                .client_secret
                .map(|s| vault.open(&s, &format!("{place}:client_secret")))
                .transpose()
                .map_err(store_error)?,
            auth: row.client_auth,
        },
    })
}

/// The grants and pending sign-ins.
#[derive(Clone)]
pub struct Store {
    pub db: Db,
}

impl Store {
    pub async fn grant(&self, vault: &Vault, server: &str) -> Result<Option<Grant>, OAuthError> {
        let rows: Vec<GrantRow> = self
            .db
            .rows(
                "SELECT * OMIT id FROM type::record('mcp_oauth', $server)",
                json!({"server": server}),
                0,
            )
            .await
            .map_err(store_error)?;
        let Some(row) = rows.into_iter().next() else {
            return Ok(None);
        };
        let place = format!("mcp_oauth:{server}");
        let open = |sealed: &str, what: &str| {
            vault
                .open(sealed, &format!("{place}:{what}"))
                .map_err(store_error)
        };
        Ok(Some(Grant {
            access_token: open(&row.access_token, "access_token")?,
            refresh_token: row
                .refresh_token
                .as_deref()
                .map(|t| open(t, "refresh_token"))
                .transpose()?,
            issued_at: row.issued_at,
            expires_at: row.expires_at,
            issuer: open_issuer(vault, row.issuer, &place)?,
        }))
    }

    pub async fn save_grant(&self, vault: &Vault, server: &str, grant: &Grant) -> Result<(), OAuthError> {
        let place = format!("mcp_oauth:{server}");
        let seal = |plain: &SecretString, what: &str| {
            vault
                .seal(plain.expose_secret(), &format!("{place}:{what}"))
                .map_err(store_error)
        };
        let row = GrantRow {
            issuer: seal_issuer(vault, &grant.issuer, &place)?,
            access_token: seal(&grant.access_token, "access_token")?,
            refresh_token: grant
                .refresh_token
                .as_ref()
                .map(|t| seal(t, "refresh_token"))
                .transpose()?,
            issued_at: grant.issued_at,
            expires_at: grant.expires_at,
        };
        let row = serde_json::to_value(&row).map_err(store_error)?;
        self.db
            .execute(
                "UPSERT type::record('mcp_oauth', $server) CONTENT $row",
                json!({"server": server, "row": row}),
            )
            .await
            .map_err(store_error)?;
        Ok(())
    }

    pub async fn forget(&self, server: &str) -> Result<(), OAuthError> {
        self.db
            .execute(
                "DELETE type::record('mcp_oauth', $server);
                 DELETE mcp_oauth_state WHERE server = $server;",
                json!({"server": server}),
            )
            .await
            .map_err(store_error)?;
        Ok(())
    }

    /// Keeps a sign-in under `state_id` (a hash of the state, never the state itself).
    pub async fn save_pending(
        &self,
        vault: &Vault,
        state_id: &str,
        pending: &Pending,
    ) -> Result<(), OAuthError> {
        let place = format!("mcp_oauth_state:{state_id}");
        let row = PendingRow {
            server: pending.server.clone(),
            issuer: seal_issuer(vault, &pending.issuer, &place)?,
            verifier: vault
                .seal(pending.verifier.expose_secret(), &format!("{place}:verifier"))
                .map_err(store_error)?,
            redirect_uri: pending.redirect_uri.clone(),
            expires_at: pending.expires_at,
        };
        let row = serde_json::to_value(&row).map_err(store_error)?;
        self.db
            .execute(
                "DELETE mcp_oauth_state WHERE expires_at < $now;
                 CREATE type::record('mcp_oauth_state', $id) CONTENT $row;",
                json!({"id": state_id, "row": row, "now": chrono::Utc::now().timestamp()}),
            )
            .await
            .map_err(store_error)?;
        Ok(())
    }

    /// Takes the sign-in `state_id` out of the store: one caller gets it, at most once.
    pub async fn take_pending(&self, vault: &Vault, state_id: &str) -> Result<Option<Pending>, OAuthError> {
        let rows: Vec<PendingRow> = self
            .db
            .rows(
                "DELETE type::record('mcp_oauth_state', $id) RETURN BEFORE",
                json!({"id": state_id}),
                0,
            )
            .await
            .map_err(store_error)?;
        let Some(row) = rows.into_iter().next() else {
            return Ok(None);
        };
        let place = format!("mcp_oauth_state:{state_id}");
        Ok(Some(Pending {
            verifier: vault
                .open(&row.verifier, &format!("{place}:verifier"))
                .map_err(store_error)?,
            issuer: open_issuer(vault, row.issuer, &place)?,
            server: row.server,
            redirect_uri: row.redirect_uri,
            expires_at: row.expires_at,
        }))
    }
}
