//! Auth. `require_api_key` checks the bearer key (or `x-api-key`, as
//! Anthropic's clients send it), refuses an expired key, marks each request
//! with the caller's scope and the agents it reaches (`agent_scope`), lets
//! the control UI in by its cookie session, and refuses a query string that
//! names a parameter twice. `require_admin` and `require_unscoped` guard the
//! route tiers of `http::router`. A run token (a subscription model's CLI,
//! for one agent run) opens `/mcp` alone, as its run's agent, even on a
//! key-less gateway. (Every request's id, span and metrics:
//! `request_context`; the key-less gateway's Host and Origin rules: `edge`.)

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::extract::Request;
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::Route;
use axum::routing::future::RouteFuture;
use futures::future::{BoxFuture, Either};
use tower::Service;
use tower::layer::{LayerFn, layer_fn};

use super::agent_scope::AgentReach;
use super::error::ApiError;
use crate::app::App;
use crate::auth::{Caller as KeyCaller, Denied, KeyError, RUN_TOKEN_PREFIX, RunGrant, Scope};
use crate::providers::Attribution;

/// Checks the caller's key (see the module docs) on every route it wraps. A
/// hand-written service for the same reason as `request_context`'s: the
/// common case (a configured key, or a stored one looked up in the last
/// seconds) is decided without waiting and calls the route directly, without
/// boxing anything.
pub fn require_api_key(app: Arc<App>) -> LayerFn<impl Fn(Route) -> RequireApiKey + Clone> {
    layer_fn(move |inner| RequireApiKey {
        app: app.clone(),
        inner,
    })
}

#[derive(Clone)]
pub struct RequireApiKey {
    app: Arc<App>,
    inner: Route,
}

/// What can be decided about a request without waiting.
enum KeyCheck {
    Passed(Request),
    Refused(Response),
    Pending(Request, Pending),
}

/// What is left to wait for.
enum Pending {
    /// No key: the control UI's cookie session, if signed in.
    CookieSession,
    /// A stored key not looked up lately.
    Lookup(String),
}

impl Service<Request> for RequireApiKey {
    type Response = Response;
    type Error = Infallible;
    type Future = Either<RouteFuture<Infallible>, BoxFuture<'static, Result<Response, Infallible>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Service::<Request>::poll_ready(&mut self.inner, cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        match check_now(&self.app, req) {
            KeyCheck::Passed(req) => Either::Left(self.inner.call(req)),
            KeyCheck::Refused(response) => Either::Right(Box::pin(std::future::ready(Ok(response)))),
            KeyCheck::Pending(req, pending) => {
                // The ready route goes into the future; a clone stays for the next call.
                let clone = self.inner.clone();
                let app = self.app.clone();
                let mut inner = std::mem::replace(&mut self.inner, clone);
                Either::Right(Box::pin(async move {
                    Ok(match check_later(&app, req, pending).await {
                        Ok(req) => inner.call(req).await?,
                        Err(refused) => refused,
                    })
                }))
            }
        }
    }
}

/// The key presented as `Authorization: Bearer` or, as Anthropic's clients send it, `x-api-key`.
fn presented_key(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()))
        .map(str::trim)
}

fn check_now(app: &App, mut req: Request) -> KeyCheck {
    // One reading of the query for everyone: no parameter twice.
    if let Err(err) = super::query::check_unique(req.uri().query()) {
        return KeyCheck::Refused(err.into_response());
    }
    if let Err(err) = super::body::post_is_json(req.method(), req.headers()) {
        return KeyCheck::Refused(err.into_response());
    }
    // Before the key-less case: a run token is checked wherever it is shown.
    if let Some(presented) = presented_key(req.headers())
        && presented.starts_with(RUN_TOKEN_PREFIX)
    {
        return match run_token(app, presented, req.uri().path()) {
            Ok(grant) => {
                admit_run(&mut req, grant);
                KeyCheck::Passed(req)
            }
            Err(refused) => KeyCheck::Refused(refused.into_response()),
        };
    }
    if !app.auth.required() {
        // Key-less: only on loopback (checked at startup), from loopback pages (`edge`).
        req.extensions_mut().insert(Scope::Admin);
        req.extensions_mut().insert(AgentReach::Every);
        return KeyCheck::Passed(req);
    }
    let Some(presented) = presented_key(req.headers()) else {
        return KeyCheck::Pending(req, Pending::CookieSession);
    };
    match app.auth.identify_now(presented) {
        Some(Ok(caller)) => {
            admit(&mut req, caller);
            KeyCheck::Passed(req)
        }
        Some(Err(denied)) => KeyCheck::Refused(refusal(denied)),
        None => {
            let presented = presented.to_string();
            KeyCheck::Pending(req, Pending::Lookup(presented))
        }
    }
}

/// Marks the request as the caller's: its scope, the agents it reaches, who to bill.
fn admit(req: &mut Request, caller: KeyCaller) {
    req.extensions_mut().insert(caller.scope);
    req.extensions_mut().insert(match caller.agents {
        Some(agents) => AgentReach::Only(agents),
        None => AgentReach::Every,
    });
    req.extensions_mut().insert(Attribution {
        key: Some(caller.key_id),
        key_limits: caller.limits,
        ..Attribution::default()
    });
}

/// The grant of a run token shown on `path`: only `/mcp` takes one (403
/// elsewhere); a revoked or expired one is unknown (401).
fn run_token(app: &App, presented: &str, path: &str) -> Result<RunGrant, ApiError> {
    let grant = app
        .auth
        .run_tokens()
        .identify(presented)
        .ok_or(ApiError::Unauthorized("invalid run token: its run has ended"))?;
    if path != "/mcp" {
        return Err(ApiError::Forbidden("a run token opens /mcp only"));
    }
    Ok(grant)
}

/// Marks the request as a run's CLI: the run's agent only, billed to the run,
/// with its grant for `/mcp`.
fn admit_run(req: &mut Request, grant: RunGrant) {
    req.extensions_mut().insert(Scope::Chat);
    req.extensions_mut()
        .insert(AgentReach::Only(vec![grant.agent.clone()].into()));
    req.extensions_mut().insert(Attribution {
        key: Some(format!("run:{}", grant.run).into()),
        agent: Some(grant.agent.clone()),
        run: Some(grant.run.clone()),
        ..Attribution::default()
    });
    req.extensions_mut().insert(grant);
}

fn refusal(denied: Denied) -> Response {
    match denied {
        Denied::Expired(at) => ApiError::from(KeyError::Expired(at)).into_response(),
        Denied::Invalid => ApiError::Unauthorized("invalid API key").into_response(),
    }
}

/// The checks that wait (a database lookup, the cookie session): the
/// request, ready for the route, or the refusal.
async fn check_later(app: &App, mut req: Request, pending: Pending) -> Result<Request, Response> {
    match pending {
        Pending::CookieSession => cookie_session(req).await,
        Pending::Lookup(presented) => {
            let caller = app.auth.identify(&presented).await.map_err(refusal)?;
            admit(&mut req, caller);
            Ok(req)
        }
    }
}

/// Whether a request on an open route comes from someone `require_api_key`
/// would admit: a key-less gateway, a valid key, or the UI's signed-in session.
pub async fn authenticated(
    app: &App,
    headers: &axum::http::HeaderMap,
    session: Option<&tower_sessions::Session>,
) -> bool {
    if !app.auth.required() {
        return true;
    }
    if let Some(presented) = presented_key(headers) {
        return app.auth.identify(presented).await.is_ok();
    }
    match session {
        Some(session) => super::login::signed_in(session).await,
        None => false,
    }
}

/// The control UI: a signed-in cookie session, from the UI's own origin.
async fn cookie_session(mut req: Request) -> Result<Request, Response> {
    let Some(session) = req.extensions().get::<tower_sessions::Session>().cloned() else {
        return Err(missing_key());
    };
    if !super::login::signed_in(&session).await {
        return Err(missing_key());
    }
    if !super::login::same_origin(req.method(), req.headers()) {
        return Err(ApiError::Forbidden(
            "cross-site request refused: it must come from the Onyx UI's own origin",
        )
        .into_response());
    }
    req.extensions_mut().insert(Scope::Admin);
    req.extensions_mut().insert(AgentReach::Every);
    Ok(req)
}

fn missing_key() -> Response {
    ApiError::Unauthorized("missing API key: send `Authorization: Bearer <key>` or `x-api-key: <key>`")
        .into_response()
}

/// The `admin` tier: key and config management, approvals, an agent's
/// permissions. Admin keys, the owner's UI session, a key-less gateway.
pub async fn require_admin(req: Request, next: Next) -> Response {
    match req.extensions().get::<Scope>() {
        Some(Scope::Admin) => next.run(req).await,
        _ => ApiError::Forbidden("this route needs an API key with the admin scope").into_response(),
    }
}

/// The `owner` tier: what spans every agent. Any caller but a key scoped to agents.
pub async fn require_unscoped(req: Request, next: Next) -> Response {
    match AgentReach::of(req.extensions()) {
        Ok(AgentReach::Every) => next.run(req).await,
        Ok(reach) => {
            let route = req
                .extensions()
                .get::<axum::extract::MatchedPath>()
                .map_or("this route", |p| p.as_str());
            reach
                .refuse(format_args!("{} {route} is not open to it", req.method()))
                .into_response()
        }
        Err(err) => err.into_response(),
    }
}

/// Who a request is for, as `require_api_key` found it: the key's id and
/// limits (empty when auth is off). Handlers pass it on to the chat path.
pub struct Caller(pub Attribution);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Caller {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        Ok(Self(
            // Taken, not cloned: one handler reads it, once.
            parts.extensions.remove::<Attribution>().unwrap_or_default(),
        ))
    }
}

/// The caller's scope, as `require_api_key` found it. A route it did not run
/// on gets the narrowest (`chat`): fail closed.
pub struct CallerScope(pub Scope);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for CallerScope {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        Ok(Self(
            parts.extensions.get::<Scope>().copied().unwrap_or(Scope::Chat),
        ))
    }
}
