//! Auth. `require_api_key` checks the bearer key (or `x-api-key`, as
//! Anthropic's clients send it), refuses an expired key, holds a key scoped to
//! agents to them (`agent_scope`), and lets the control UI in by its cookie
//! session. (Every request's id, span and metrics: `request_context`.)

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

use super::error::ApiError;
use crate::app::App;
use crate::auth::{Caller as KeyCaller, Denied, KeyError, Scope};
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
    /// A valid key scoped to these agents (already admitted): the request must name one of them.
    AgentScope(Arc<[String]>),
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
fn presented_key(req: &Request) -> Option<&str> {
    req.headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .or_else(|| req.headers().get("x-api-key").and_then(|v| v.to_str().ok()))
        .map(str::trim)
}

fn check_now(app: &App, mut req: Request) -> KeyCheck {
    if !app.auth.required() {
        // No key exists: only possible when bound to loopback (checked at startup).
        req.extensions_mut().insert(Scope::Admin);
        return KeyCheck::Passed(req);
    }
    let Some(presented) = presented_key(&req) else {
        return KeyCheck::Pending(req, Pending::CookieSession);
    };
    match app.auth.identify_now(presented) {
        Some(Ok(caller)) => match admit(&mut req, caller) {
            None => KeyCheck::Passed(req),
            Some(agents) => KeyCheck::Pending(req, Pending::AgentScope(agents)),
        },
        Some(Err(denied)) => KeyCheck::Refused(refusal(denied)),
        None => {
            let presented = presented.to_string();
            KeyCheck::Pending(req, Pending::Lookup(presented))
        }
    }
}

/// Marks the request as the caller's; the agents its key is scoped to, if any.
fn admit(req: &mut Request, caller: KeyCaller) -> Option<Arc<[String]>> {
    req.extensions_mut().insert(caller.scope);
    req.extensions_mut().insert(Attribution {
        key: Some(caller.key_id),
        key_limits: caller.limits,
        ..Attribution::default()
    });
    caller.agents
}

fn refusal(denied: Denied) -> Response {
    match denied {
        Denied::Expired(at) => ApiError::from(KeyError::Expired(at)).into_response(),
        Denied::Invalid => ApiError::Unauthorized("invalid API key").into_response(),
    }
}

/// The checks that wait (a database lookup, the cookie session, the agent
/// the request names): the request, ready for the route, or the refusal.
async fn check_later(app: &App, mut req: Request, pending: Pending) -> Result<Request, Response> {
    let agents = match pending {
        Pending::CookieSession => return cookie_session(req).await,
        Pending::AgentScope(agents) => agents,
        Pending::Lookup(presented) => {
            let caller = app.auth.identify(&presented).await.map_err(refusal)?;
            match admit(&mut req, caller) {
                None => return Ok(req),
                Some(agents) => agents,
            }
        }
    };
    req.extensions_mut()
        .insert(super::mcp::ScopedAgents(agents.clone()));
    super::agent_scope::check(app, req, &agents)
        .await
        .map_err(IntoResponse::into_response)
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
    Ok(req)
}

fn missing_key() -> Response {
    ApiError::Unauthorized("missing API key: send `Authorization: Bearer <key>` or `x-api-key: <key>`")
        .into_response()
}

/// Key and config management need the admin scope.
pub async fn require_admin(req: Request, next: Next) -> Response {
    match req.extensions().get::<Scope>() {
        Some(Scope::Admin) => next.run(req).await,
        _ => ApiError::Forbidden("this route needs an API key with the admin scope").into_response(),
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
