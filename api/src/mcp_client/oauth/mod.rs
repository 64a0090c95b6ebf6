//! OAuth 2.1 sign-in for remote (HTTP and SSE) MCP servers, as the MCP
//! authorization spec (2025-06-18) describes: discovery from the server's
//! 401 ([`discovery`]), dynamic client registration, the authorization code
//! with PKCE S256 and the RFC 8707 `resource` ([`flow`]), and the tokens
//! kept sealed and refreshed ([`store`]). The access token goes only to the
//! server it was issued for; no API answer ever carries one.

mod discovery;
mod flow;
mod store;

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::{SecureRandom, SystemRandom};
use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};
use url::Url;

pub use discovery::check_secure;
use store::{ClientAuth, Grant, Issuer, OAuthClient, Pending, Store};

use crate::config::McpOAuthClient;

use crate::secrets::Vault;
use crate::storage::Db;

/// How long the owner has to finish a sign-in.
const SIGN_IN_TTL: i64 = 600;
/// Tokens are refreshed this long before they expire at most (a quarter of
/// their life when that is shorter).
const REFRESH_AHEAD: i64 = 60;

#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    #[error("cannot reach {0}")]
    Unreachable(String),
    #[error("{0}")]
    Refused(String),
    /// The callback's `state` is unknown, used, expired or does not match.
    #[error("{0}")]
    BadState(String),
    #[error("the sign-in store failed: {0}")]
    Store(String),
}

/// An access token for one server, and when to refresh it.
pub struct Bearer {
    pub token: SecretString,
    pub refresh_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// What the owner opens to sign in.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SignInStart {
    pub authorization_url: String,
    pub redirect_uri: String,
    /// When the sign-in stops being accepted (RFC 3339).
    pub expires_at: String,
}

/// The sign-ins and tokens of every remote server.
pub struct OAuth {
    store: Store,
    vault: Arc<Vault>,
    /// No redirects: a credential is never carried to where a redirect points.
    http: reqwest::Client,
}

fn random_token() -> Result<String, OAuthError> {
    let mut bytes = [0u8; 32];
    SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| OAuthError::Store("the system random source failed".into()))?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

fn sha256_b64(text: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(text.as_bytes()))
}

impl OAuth {
    pub fn new(db: Db, vault: Arc<Vault>) -> Result<Self, OAuthError> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(20))
            .build()
            .map_err(|err| OAuthError::Store(format!("no HTTP client: {err}")))?;
        Ok(Self {
            store: Store { db },
            vault,
            http,
        })
    }

    /// The HTTP client for requests that carry a token (it follows no redirect).
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// Asks `resource` whether it wants a token; its challenge if it answers 401.
    pub async fn challenge(
        &self,
        resource: &Url,
        bearer: Option<&Bearer>,
    ) -> Result<Option<discovery::Challenge>, OAuthError> {
        discovery::probe(&self.http, resource, bearer.map(|b| b.token.expose_secret())).await
    }

    /// Starts a sign-in for `server` at `resource`: discovery, the
    /// `configured` client or a registration, a one-time state; the
    /// authorization URL to open.
    pub async fn start(
        &self,
        server: &str,
        resource: &Url,
        configured: Option<&McpOAuthClient>,
        redirect_uri: &Url,
    ) -> Result<SignInStart, OAuthError> {
        let challenge = self.challenge(resource, None).await?.unwrap_or_default();
        let found = discovery::discover(&self.http, resource, &challenge).await?;
        let redirect = redirect_uri.to_string();
        let client = match (configured, &found.registration_endpoint) {
            (Some(configured), _) => OAuthClient {
                id: configured.client_id.clone(),
                secret: configured.client_secret.clone(),
                auth: match configured.client_secret {
                    Some(_) => ClientAuth::ClientSecretBasic,
                    None => ClientAuth::None,
                },
            },
            (None, Some(endpoint)) => flow::register(&self.http, endpoint, &redirect).await?,
            (None, None) => {
                return Err(OAuthError::Refused(format!(
                    "the authorization server {} offers no dynamic client registration: register a \
                     client there with the redirect URI {redirect} and give the server \
                     oauth.clientId (and oauth.clientSecret if it has one)",
                    found.issuer
                )));
            }
        };
        let scope = configured.and_then(|c| c.scope.clone()).or(found.scope);
        let verifier = random_token()?;
        let state = random_token()?;
        let expires_at = chrono::Utc::now().timestamp() + SIGN_IN_TTL;
        let mut url = found.authorization_endpoint.clone();
        {
            let mut query = url.query_pairs_mut();
            query
                .append_pair("response_type", "code")
                .append_pair("client_id", &client.id)
                .append_pair("redirect_uri", &redirect)
                .append_pair("code_challenge", &sha256_b64(&verifier))
                .append_pair("code_challenge_method", "S256")
                .append_pair("state", &state)
                .append_pair("resource", resource.as_str());
            if let Some(scope) = &scope {
                query.append_pair("scope", scope);
            }
        }
        let pending = Pending {
            server: server.to_string(),
            issuer: Issuer {
                issuer: found.issuer,
                token_endpoint: found.token_endpoint.to_string(),
                resource: resource.to_string(),
                client,
            },
            verifier: SecretString::from(verifier),
            redirect_uri: redirect.clone(),
            expires_at,
        };
        self.store
            .save_pending(&self.vault, &sha256_b64(&state), &pending)
            .await?;
        Ok(SignInStart {
            authorization_url: url.to_string(),
            redirect_uri: redirect,
            expires_at: chrono::DateTime::from_timestamp(expires_at, 0)
                .map(|t| t.to_rfc3339())
                .unwrap_or_default(),
        })
    }

    /// The callback: takes the sign-in its `state` names (once), exchanges
    /// the code and keeps the tokens; the server's name.
    pub async fn finish(&self, state: &str, code: &str, iss: Option<&str>) -> Result<String, OAuthError> {
        let pending = self
            .store
            .take_pending(&self.vault, &sha256_b64(state))
            .await?
            .ok_or_else(|| {
                OAuthError::BadState(
                    "this sign-in is unknown or was already used; start the sign-in again from the MCP page"
                        .into(),
                )
            })?;
        if pending.expires_at < chrono::Utc::now().timestamp() {
            return Err(OAuthError::BadState(format!(
                "the sign-in for {} expired; start it again from the MCP page",
                pending.server
            )));
        }
        // RFC 9207: an authorization server that names itself must be the one asked.
        if let Some(iss) = iss
            && iss.trim_end_matches('/') != pending.issuer.issuer.trim_end_matches('/')
        {
            return Err(OAuthError::BadState(format!(
                "the answer came from {iss:?}, not the authorization server of {}",
                pending.server
            )));
        }
        let grant = flow::token(
            &self.http,
            &pending.issuer,
            flow::TokenRequest::Code {
                code,
                verifier: &pending.verifier,
                redirect_uri: &pending.redirect_uri,
            },
            None,
        )
        .await?;
        self.store
            .save_grant(&self.vault, &pending.server, &grant)
            .await?;
        Ok(pending.server)
    }

    /// The token to send to `server` at `resource`, refreshed first when it
    /// is about to expire (or `force`d); `None` when it was never signed in.
    /// A refresh that fails forgets the tokens: the owner signs in again.
    pub async fn bearer(
        &self,
        server: &str,
        resource: &Url,
        force: bool,
    ) -> Result<Option<Bearer>, OAuthError> {
        let Some(grant) = self.store.grant(&self.vault, server).await? else {
            return Ok(None);
        };
        if grant.issuer.resource != resource.as_str() {
            // Signed in for another URL (the server was edited): not sent here.
            self.store.forget(server).await?;
            return Ok(None);
        }
        let now = chrono::Utc::now();
        let due = refresh_at(&grant).is_some_and(|at| at <= now);
        if !force && !due {
            return Ok(Some(bearer(grant)));
        }
        let Some(refresh_token) = grant.refresh_token.clone() else {
            self.store.forget(server).await?;
            return Err(OAuthError::Refused(
                "the access token expired and there is no refresh token".into(),
            ));
        };
        match flow::token(
            &self.http,
            &grant.issuer,
            flow::TokenRequest::Refresh {
                refresh_token: &refresh_token,
            },
            Some(&refresh_token),
        )
        .await
        {
            Ok(fresh) => {
                self.store.save_grant(&self.vault, server, &fresh).await?;
                tracing::info!(mcp_server = %server, "MCP server's access token refreshed");
                Ok(Some(bearer(fresh)))
            }
            Err(err @ OAuthError::Refused(_)) => {
                self.store.forget(server).await?;
                Err(err)
            }
            Err(other) => Err(other),
        }
    }

    /// Forgets `server`'s tokens and sign-ins under way.
    pub async fn forget(&self, server: &str) -> Result<(), OAuthError> {
        self.store.forget(server).await
    }
}

fn refresh_at(grant: &Grant) -> Option<chrono::DateTime<chrono::Utc>> {
    let expires = grant.expires_at?;
    let ahead = REFRESH_AHEAD.min((expires - grant.issued_at) / 4);
    chrono::DateTime::from_timestamp(expires - ahead, 0)
}

fn bearer(grant: Grant) -> Bearer {
    Bearer {
        refresh_at: refresh_at(&grant),
        token: grant.access_token,
    }
}
