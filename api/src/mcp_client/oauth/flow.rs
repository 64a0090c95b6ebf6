//! The authorization server's two write endpoints: dynamic client
//! registration (RFC 7591) and the token endpoint (the authorization code
//! with its PKCE verifier, and the refresh token), each with the RFC 8707
//! `resource`. The server's refusals become the sign-in's status text; no
//! request body (which carries secrets) is ever logged.

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use url::Url;

use super::OAuthError;
use super::store::{ClientAuth, Grant, Issuer, OAuthClient};

#[derive(Deserialize)]
struct Registered {
    client_id: String,
    client_secret: Option<String>,
    token_endpoint_auth_method: Option<String>,
}

#[derive(Deserialize)]
struct Tokens {
    access_token: String,
    token_type: String,
    expires_in: Option<i64>,
    refresh_token: Option<String>,
}

#[derive(Deserialize)]
struct Refusal {
    error: String,
    error_description: Option<String>,
}

/// What an endpoint's error answer says, shortened (it is shown as status text).
async fn refusal(what: &str, response: reqwest::Response) -> OAuthError {
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    let reason = match serde_json::from_str::<Refusal>(&text) {
        Ok(refusal) => match refusal.error_description {
            Some(description) => format!("{} ({})", refusal.error, crate::text::one_line(&description, 200)),
            None => refusal.error,
        },
        Err(_) => status.to_string(),
    };
    OAuthError::Refused(format!("{what} refused: {reason}"))
}

/// Registers Onyx as a public client that redirects to `redirect_uri`.
pub async fn register(
    http: &reqwest::Client,
    endpoint: &Url,
    redirect_uri: &str,
) -> Result<OAuthClient, OAuthError> {
    let body = serde_json::json!({
        "client_name": "Onyx",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    });
    let response = http
        .post(endpoint.clone())
        .json(&body)
        .send()
        .await
        .map_err(|err| {
            OAuthError::Unreachable(format!(
                "the registration endpoint: {}",
                crate::error_chain::chain(&err)
            ))
        })?;
    if !response.status().is_success() {
        return Err(refusal("the client registration", response).await);
    }
    let registered: Registered = response
        .json()
        .await
        .map_err(|err| OAuthError::Refused(format!("the client registration answer is not valid: {err}")))?;
    let auth = match (
        registered.token_endpoint_auth_method.as_deref(),
        &registered.client_secret,
    ) {
        (Some("client_secret_post"), Some(_)) => ClientAuth::ClientSecretPost,
        (Some("client_secret_basic") | None, Some(_)) => ClientAuth::ClientSecretBasic,
        _ => ClientAuth::None,
    };
    Ok(OAuthClient {
        id: registered.client_id,
        secret: registered.client_secret.map(SecretString::from),
        auth,
    })
}

/// What the token endpoint is asked for.
pub enum TokenRequest<'a> {
    Code {
        code: &'a str,
        verifier: &'a SecretString,
        redirect_uri: &'a str,
    },
    Refresh {
        refresh_token: &'a SecretString,
    },
}

/// Asks the token endpoint; the grant it answers (an old refresh token is
/// kept when a refresh answers none).
pub async fn token(
    http: &reqwest::Client,
    issuer: &Issuer,
    request: TokenRequest<'_>,
    old_refresh: Option<&SecretString>,
) -> Result<Grant, OAuthError> {
    let endpoint = Url::parse(&issuer.token_endpoint)
        .map_err(|err| OAuthError::Refused(format!("the token endpoint is not a URL: {err}")))?;
    super::discovery::check_secure(&endpoint, "the token endpoint")?;
    let mut form: Vec<(&str, String)> = match &request {
        TokenRequest::Code {
            code,
            verifier,
            redirect_uri,
        } => vec![
            ("grant_type", "authorization_code".into()),
            ("code", (*code).into()),
            ("code_verifier", verifier.expose_secret().into()),
            ("redirect_uri", (*redirect_uri).into()),
        ],
        TokenRequest::Refresh { refresh_token } => vec![
            ("grant_type", "refresh_token".into()),
            ("refresh_token", refresh_token.expose_secret().into()),
        ],
    };
    form.push(("resource", issuer.resource.clone()));
    let client = &issuer.client;
    let mut builder = http.post(endpoint);
    match (client.auth, &client.secret) {
        (ClientAuth::ClientSecretBasic, Some(secret)) => {
            builder = builder.basic_auth(&client.id, Some(secret.expose_secret()));
        }
        (ClientAuth::ClientSecretPost, Some(secret)) => {
            form.push(("client_id", client.id.clone()));
            form.push(("client_secret", secret.expose_secret().into()));
        }
        _ => form.push(("client_id", client.id.clone())),
    }
    let what = match request {
        TokenRequest::Code { .. } => "the token endpoint (code exchange)",
        TokenRequest::Refresh { .. } => "the token endpoint (refresh)",
    };
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(&form)
        .finish();
    let response = builder
        .header(reqwest::header::ACCEPT, "application/json")
        .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .map_err(|err| OAuthError::Unreachable(format!("{what}: {}", crate::error_chain::chain(&err))))?;
    if !response.status().is_success() {
        return Err(refusal(what, response).await);
    }
    let tokens: Tokens = response
        .json()
        .await
        .map_err(|err| OAuthError::Refused(format!("{what} answered tokens that cannot be read: {err}")))?;
    if !tokens.token_type.eq_ignore_ascii_case("bearer") {
        return Err(OAuthError::Refused(format!(
            "{what} answered a {:?} token; only Bearer tokens are used",
            tokens.token_type
        )));
    }
    let now = chrono::Utc::now().timestamp();
    Ok(Grant {
        issuer: issuer.clone(),
        access_token: SecretString::from(tokens.access_token),
        refresh_token: tokens
            .refresh_token
            .map(SecretString::from)
            .or_else(|| old_refresh.cloned()),
        issued_at: now,
        expires_at: tokens.expires_in.map(|s| now + s.max(0)),
    })
}
