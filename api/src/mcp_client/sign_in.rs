//! Signing in to a remote MCP server with OAuth: the owner starts it
//! (`POST /v1/mcp/servers/{name}/oauth/start`), the authorization server
//! sends the browser back to the callback, and the server reconnects on this
//! replica with its token (other replicas notice within a minute).

use url::Url;

use super::McpClients;
use super::oauth::{OAuthError, SignInStart};
use crate::config::McpTransport;

/// Why a sign-in could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum SignInError {
    #[error("no MCP server {0:?}; GET /v1/mcp/servers lists them")]
    NotFound(String),
    #[error("the MCP server {0:?} is not a remote (http or sse) server; only those sign in with OAuth")]
    NotRemote(String),
    #[error(
        "the MCP server {0:?} sends its own Authorization header; remove it from its headers to sign in with OAuth"
    )]
    OwnAuthorization(String),
    #[error("OAuth sign-in needs the server store, which this gateway does not have")]
    NoStore,
    #[error("{0}")]
    OAuth(#[from] OAuthError),
}

impl McpClients {
    /// Discovers `name`'s authorization server, registers with it and
    /// answers the URL the owner opens; the callback is `redirect_uri`.
    pub async fn start_sign_in(&self, name: &str, redirect_uri: &Url) -> Result<SignInStart, SignInError> {
        let server = self.get(name).ok_or_else(|| SignInError::NotFound(name.into()))?;
        let (McpTransport::Http { url, headers } | McpTransport::Sse { url, headers }) =
            &server.config.transport
        else {
            return Err(SignInError::NotRemote(name.into()));
        };
        if headers.keys().any(|h| h.eq_ignore_ascii_case("authorization")) {
            return Err(SignInError::OwnAuthorization(name.into()));
        }
        let oauth = self.oauth.get().ok_or(SignInError::NoStore)?;
        Ok(oauth
            .start(name, url, server.config.oauth.as_ref(), redirect_uri)
            .await?)
    }

    /// The authorization server's answer: the code exchanged for tokens
    /// (once per state), then the server reconnects here; its name.
    pub async fn finish_sign_in(
        &self,
        state: &str,
        code: &str,
        iss: Option<&str>,
    ) -> Result<String, SignInError> {
        let oauth = self.oauth.get().ok_or(SignInError::NoStore)?;
        let name = oauth.finish(state, code, iss).await?;
        match self.restart(&name).await {
            Ok(_) => tracing::info!(mcp_server = %name, "signed in to MCP server with OAuth"),
            Err(err) => {
                tracing::warn!(mcp_server = %name, error = %err, "signed in, but the server could not be restarted")
            }
        }
        Ok(name)
    }
}
