//! A stand-in OAuth 2.1 authorization server and the MCP server it protects,
//! speaking the wire protocols the MCP authorization spec (2025-06-18)
//! names, on two origins: the resource's Protected Resource Metadata
//! (RFC 9728) and its 401 challenge, the server's metadata (RFC 8414),
//! dynamic client registration (RFC 7591), `/authorize` (approves at once
//! and redirects with a code, as a signed-in user's consent would), and
//! `/token` (PKCE S256 checked, RFC 8707 `resource` required, refresh tokens
//! rotated). The MCP endpoint is streamable HTTP answering JSON, with one
//! tool, `whoami`, behind the bearer token.
//!
//! `POST /_fake/oauth/expire` on the authorization server expires every
//! access token at once; `POST /_fake/oauth/revoke` withdraws every access
//! and refresh token (the user revoked the app); `GET /_fake/oauth/stats`
//! counts what happened. Started [`without_registration`](Options), it
//! offers no registration endpoint and knows only clients added by hand
//! ([`OAuthFake::add_client`]), which prove their secret with HTTP Basic.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::Router;
use axum::extract::Query;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::{SecureRandom, SystemRandom};
use serde_json::{Value, json};

use crate::{FakeServer, FakeState};

/// A client the server knows: its redirect URIs and its secret (a public client has none).
struct Client {
    redirect_uris: Vec<String>,
    secret: Option<String>,
}

struct Code {
    client_id: String,
    challenge: String,
    redirect_uri: String,
}

/// What both halves share.
#[derive(Default)]
pub struct OAuthFake {
    issuer: OnceLock<String>,
    resource: OnceLock<String>,
    /// Access tokens' lifetime in seconds.
    ttl: u64,
    /// Whether the metadata names a registration endpoint.
    registration: bool,
    /// Registered client ids, their redirect URIs and secret (if any).
    clients: Mutex<HashMap<String, Client>>,
    codes: Mutex<HashMap<String, Code>>,
    /// Access token → (client id, expiry in Unix seconds).
    access: Mutex<HashMap<String, (String, u64)>>,
    /// Refresh token → client id.
    refresh: Mutex<HashMap<String, String>>,
    registrations: AtomicU64,
    code_exchanges: AtomicU64,
    refreshes: AtomicU64,
    refused_grants: AtomicU64,
    /// MCP requests turned away for a missing, unknown or expired token.
    unauthorized: AtomicU64,
    tool_calls: AtomicU64,
    /// Requests to the authorization server that carried a Bearer token (never wanted).
    bearer_at_auth_server: AtomicU64,
}

/// The two servers, running.
pub struct OAuthServers {
    pub auth_server: FakeServer,
    pub mcp: FakeServer,
    pub fake: Arc<OAuthFake>,
}

impl OAuthServers {
    /// The protected MCP endpoint.
    pub fn mcp_url(&self) -> String {
        format!("{}/mcp", self.mcp.url())
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

fn random() -> String {
    let mut bytes = [0u8; 24];
    let _ = SystemRandom::new().fill(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn oauth_error(status: StatusCode, error: &str, description: &str) -> Response {
    (
        status,
        Json(json!({"error": error, "error_description": description})),
    )
        .into_response()
}

impl OAuthFake {
    fn issuer(&self) -> String {
        self.issuer.get().cloned().unwrap_or_default()
    }

    fn resource(&self) -> String {
        self.resource.get().cloned().unwrap_or_default()
    }

    pub fn stats(&self) -> Value {
        json!({
            "registrations": self.registrations.load(Ordering::SeqCst),
            "codeExchanges": self.code_exchanges.load(Ordering::SeqCst),
            "refreshes": self.refreshes.load(Ordering::SeqCst),
            "refusedGrants": self.refused_grants.load(Ordering::SeqCst),
            "unauthorized": self.unauthorized.load(Ordering::SeqCst),
            "toolCalls": self.tool_calls.load(Ordering::SeqCst),
            "bearerAtAuthServer": self.bearer_at_auth_server.load(Ordering::SeqCst),
            "liveAccessTokens": lock(&self.access).values().filter(|(_, exp)| *exp > now()).count(),
        })
    }

    fn issue(&self, client_id: &str) -> Value {
        let (access, refresh) = (random(), random());
        lock(&self.access).insert(access.clone(), (client_id.to_string(), now() + self.ttl));
        lock(&self.refresh).insert(refresh.clone(), client_id.to_string());
        json!({"access_token": access, "token_type": "Bearer", "expires_in": self.ttl,
               "refresh_token": refresh, "scope": "tools"})
    }

    /// Adds a client as an administrator would in the server's console.
    pub fn add_client(&self, id: &str, secret: Option<&str>, redirect_uri: &str) {
        lock(&self.clients).insert(
            id.to_string(),
            Client {
                redirect_uris: vec![redirect_uri.to_string()],
                secret: secret.map(String::from),
            },
        );
    }

    /// The client a token request authenticates as: HTTP Basic for a client
    /// with a secret, else the form's `client_id`; `None` if the secret is wrong.
    fn client_of(&self, headers: &HeaderMap, form: &HashMap<String, String>) -> Option<String> {
        let basic = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Basic "))
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .and_then(|b| String::from_utf8(b).ok());
        let clients = lock(&self.clients);
        match basic {
            Some(pair) => {
                // (The ids and secrets the tests use need no form-encoding.)
                let (id, secret) = pair.split_once(':')?;
                (clients.get(id)?.secret.as_deref() == Some(secret)).then(|| id.to_string())
            }
            None => {
                let id = form.get("client_id")?;
                clients.get(id)?.secret.is_none().then(|| id.clone())
            }
        }
    }

    fn token(&self, headers: &HeaderMap, form: HashMap<String, String>) -> Response {
        let field = |name: &str| form.get(name).cloned().unwrap_or_default();
        if field("resource") != self.resource() {
            self.refused_grants.fetch_add(1, Ordering::SeqCst);
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "invalid_target",
                "resource must name the MCP server",
            );
        }
        let Some(client_id) = self.client_of(headers, &form) else {
            self.refused_grants.fetch_add(1, Ordering::SeqCst);
            return oauth_error(
                StatusCode::UNAUTHORIZED,
                "invalid_client",
                "unknown client or wrong secret",
            );
        };
        match field("grant_type").as_str() {
            "authorization_code" => {
                let Some(code) = lock(&self.codes).remove(&field("code")) else {
                    self.refused_grants.fetch_add(1, Ordering::SeqCst);
                    return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant", "unknown or used code");
                };
                let verifier = field("code_verifier");
                let challenge =
                    URL_SAFE_NO_PAD.encode(ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes()));
                if code.client_id != client_id
                    || code.redirect_uri != field("redirect_uri")
                    || challenge != code.challenge
                {
                    self.refused_grants.fetch_add(1, Ordering::SeqCst);
                    return oauth_error(
                        StatusCode::BAD_REQUEST,
                        "invalid_grant",
                        "PKCE verification failed",
                    );
                }
                self.code_exchanges.fetch_add(1, Ordering::SeqCst);
                Json(self.issue(&client_id)).into_response()
            }
            "refresh_token" => {
                let owner = lock(&self.refresh).remove(&field("refresh_token"));
                if owner.as_deref() != Some(client_id.as_str()) {
                    self.refused_grants.fetch_add(1, Ordering::SeqCst);
                    return oauth_error(
                        StatusCode::BAD_REQUEST,
                        "invalid_grant",
                        "refresh token not valid",
                    );
                }
                self.refreshes.fetch_add(1, Ordering::SeqCst);
                Json(self.issue(&client_id)).into_response()
            }
            other => oauth_error(StatusCode::BAD_REQUEST, "unsupported_grant_type", other),
        }
    }

    fn authorize(&self, q: HashMap<String, String>) -> Response {
        let field = |name: &str| q.get(name).cloned().unwrap_or_default();
        let redirect_uri = field("redirect_uri");
        let known = lock(&self.clients)
            .get(&field("client_id"))
            .is_some_and(|client| client.redirect_uris.contains(&redirect_uri));
        if !known {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "unknown client or redirect_uri",
            );
        }
        if field("response_type") != "code"
            || field("code_challenge_method") != "S256"
            || field("code_challenge").len() < 43
            || field("resource") != self.resource()
        {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "code, PKCE S256 and resource required",
            );
        }
        let code = random();
        lock(&self.codes).insert(
            code.clone(),
            Code {
                client_id: field("client_id"),
                challenge: field("code_challenge"),
                redirect_uri: redirect_uri.clone(),
            },
        );
        let Ok(mut location) = url::Url::parse(&redirect_uri) else {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "redirect_uri is not a URL",
            );
        };
        location
            .query_pairs_mut()
            .append_pair("code", &code)
            .append_pair("state", &field("state"))
            .append_pair("iss", &self.issuer());
        (StatusCode::FOUND, [(header::LOCATION, location.to_string())]).into_response()
    }

    /// The client id of a live bearer token.
    fn caller(&self, headers: &HeaderMap) -> Option<String> {
        let token = headers
            .get(header::AUTHORIZATION)?
            .to_str()
            .ok()?
            .strip_prefix("Bearer ")?;
        let access = lock(&self.access);
        let (client, expires) = access.get(token)?;
        (*expires > now()).then(|| client.clone())
    }

    fn mcp(&self, headers: &HeaderMap, body: Value) -> Response {
        let Some(client) = self.caller(headers) else {
            self.unauthorized.fetch_add(1, Ordering::SeqCst);
            let challenge = format!(
                r#"Bearer error="invalid_token", resource_metadata="{}/.well-known/oauth-protected-resource/mcp", scope="tools""#,
                self.resource().trim_end_matches("/mcp")
            );
            return (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, challenge)],
                Json(json!({"error": "invalid_token"})),
            )
                .into_response();
        };
        let id = body.get("id").cloned();
        let method = body["method"].as_str().unwrap_or_default();
        let result = match method {
            "initialize" => json!({
                "protocolVersion": body["params"]["protocolVersion"].as_str().unwrap_or("2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "oauth-fake", "version": "1.0.0"},
            }),
            "tools/list" => json!({"tools": [{
                "name": "whoami",
                "description": "Says which OAuth client called.",
                "inputSchema": {"type": "object", "properties": {}},
            }]}),
            "tools/call" => {
                self.tool_calls.fetch_add(1, Ordering::SeqCst);
                json!({"content": [{"type": "text", "text": format!("signed in as OAuth client {client}")}], "isError": false})
            }
            "ping" => json!({}),
            _ if id.is_none() => return StatusCode::ACCEPTED.into_response(),
            other => {
                return Json(json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32601, "message": format!("no method {other}")}}))
                .into_response();
            }
        };
        Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
    }
}

fn form(body: &str) -> HashMap<String, String> {
    url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect()
}

/// How the authorization server behaves.
pub struct Options {
    /// Access tokens' lifetime in seconds.
    pub ttl_seconds: u64,
    /// Whether clients may register themselves (RFC 7591).
    pub registration: bool,
}

/// Starts both servers with dynamic registration; access tokens live `ttl_seconds`.
pub async fn start(ttl_seconds: u64) -> std::io::Result<OAuthServers> {
    start_with(Options {
        ttl_seconds,
        registration: true,
    })
    .await
}

/// Starts both servers.
pub async fn start_with(options: Options) -> std::io::Result<OAuthServers> {
    let fake = Arc::new(OAuthFake {
        ttl: options.ttl_seconds,
        registration: options.registration,
        ..OAuthFake::default()
    });
    let watch_bearer = |fake: Arc<OAuthFake>| {
        move |request: axum::extract::Request, next: axum::middleware::Next| {
            let fake = fake.clone();
            async move {
                let bearer = request
                    .headers()
                    .get(header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok())
                    .is_some_and(|v| v.starts_with("Bearer "));
                if bearer {
                    fake.bearer_at_auth_server.fetch_add(1, Ordering::SeqCst);
                }
                next.run(request).await
            }
        }
    };
    let f = fake.clone();
    let auth_routes: Router<Arc<FakeState>> = Router::new()
        .route(
            "/.well-known/oauth-authorization-server",
            get({
                let f = f.clone();
                move || async move {
                    let issuer = f.issuer();
                    let mut metadata = json!({
                        "issuer": issuer,
                        "authorization_endpoint": format!("{issuer}/authorize"),
                        "token_endpoint": format!("{issuer}/token"),
                        "response_types_supported": ["code"],
                        "grant_types_supported": ["authorization_code", "refresh_token"],
                        "code_challenge_methods_supported": ["S256"],
                        "token_endpoint_auth_methods_supported": ["none", "client_secret_basic"],
                    });
                    if f.registration {
                        metadata["registration_endpoint"] = json!(format!("{issuer}/register"));
                    }
                    Json(metadata)
                }
            }),
        )
        .route(
            "/register",
            post({
                let f = f.clone();
                move |Json(body): Json<Value>| async move {
                    if !f.registration {
                        return StatusCode::NOT_FOUND.into_response();
                    }
                    let uris: Vec<String> = body["redirect_uris"]
                        .as_array()
                        .map(|a| a.iter().filter_map(|u| u.as_str().map(String::from)).collect())
                        .unwrap_or_default();
                    if uris.is_empty() {
                        return oauth_error(
                            StatusCode::BAD_REQUEST,
                            "invalid_redirect_uri",
                            "redirect_uris required",
                        );
                    }
                    let id = format!("client-{}", random());
                    lock(&f.clients).insert(
                        id.clone(),
                        Client {
                            redirect_uris: uris.clone(),
                            secret: None,
                        },
                    );
                    f.registrations.fetch_add(1, Ordering::SeqCst);
                    (
                        StatusCode::CREATED,
                        Json(json!({"client_id": id, "redirect_uris": uris,
                        "token_endpoint_auth_method": "none",
                        "grant_types": ["authorization_code", "refresh_token"]})),
                    )
                        .into_response()
                }
            }),
        )
        .route(
            "/authorize",
            get({
                let f = f.clone();
                move |Query(q): Query<HashMap<String, String>>| async move { f.authorize(q) }
            }),
        )
        .route(
            "/token",
            post({
                let f = f.clone();
                move |headers: HeaderMap, body: String| async move { f.token(&headers, form(&body)) }
            }),
        )
        .route(
            "/_fake/oauth/expire",
            post({
                let f = f.clone();
                move || async move {
                    for (_, expires) in lock(&f.access).values_mut() {
                        *expires = 0;
                    }
                    Json(json!({"expired": true}))
                }
            }),
        )
        .route(
            "/_fake/oauth/revoke",
            post({
                let f = f.clone();
                move || async move {
                    lock(&f.access).clear();
                    lock(&f.refresh).clear();
                    Json(json!({"revoked": true}))
                }
            }),
        )
        .route(
            "/_fake/oauth/stats",
            get({
                let f = f.clone();
                move || async move { Json(f.stats()) }
            }),
        )
        .layer(axum::middleware::from_fn(watch_bearer(fake.clone())));
    let auth_server = crate::serve(auth_routes, FakeState::new(None), 0).await?;
    let _ = fake.issuer.set(auth_server.url());

    let resource_metadata = {
        let f = f.clone();
        move || async move {
            Json(
                json!({"resource": f.resource(), "authorization_servers": [f.issuer()],
                        "scopes_supported": ["tools"], "bearer_methods_supported": ["header"]}),
            )
        }
    };
    let mcp_routes: Router<Arc<FakeState>> = Router::new()
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(resource_metadata.clone()),
        )
        .route("/.well-known/oauth-protected-resource", get(resource_metadata))
        .route(
            "/mcp",
            post({
                let f = f.clone();
                move |headers: HeaderMap, Json(body): Json<Value>| async move { f.mcp(&headers, body) }
            })
            .get(|| async { StatusCode::METHOD_NOT_ALLOWED })
            .delete(|| async { StatusCode::OK }),
        );
    let mcp = crate::serve(mcp_routes, FakeState::new(None), 0).await?;
    let _ = fake.resource.set(format!("{}/mcp", mcp.url()));
    Ok(OAuthServers {
        auth_server,
        mcp,
        fake,
    })
}
