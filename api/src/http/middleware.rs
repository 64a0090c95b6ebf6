//! Auth. `RequireApiKeyLayer` checks the bearer key (or `x-api-key`, as
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
use futures::future::{BoxFuture, Either};
use tower::{Layer, Service};

use super::error::ApiError;
use crate::app::App;
use crate::auth::{Caller as KeyCaller, Denied, KeyError, Scope};
use crate::providers::Attribution;

/// Checks the caller's key (see the module docs). A hand-written service
/// for the same reason as `RequestContextLayer`: the common case (a
/// configured key, or a stored one looked up in the last seconds) is decided
/// without waiting and calls the route directly, without boxing anything.
#[derive(Clone)]
pub struct RequireApiKeyLayer {
    app: Arc<App>,
}

impl RequireApiKeyLayer {
    pub fn new(app: Arc<App>) -> Self {
        Self { app }
    }
}

impl<S> Layer<S> for RequireApiKeyLayer {
    type Service = RequireApiKey<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequireApiKey {
            app: self.app.clone(),
            inner,
        }
    }
}

#[derive(Clone)]
pub struct RequireApiKey<S> {
    app: Arc<App>,
    inner: S,
}

/// What can be decided about a request without waiting.
enum KeyCheck {
    Passed(Request),
    Refused(Response),
    /// A cookie session, a key scoped to agents, or a key not looked up lately.
    NeedsLookup(Request),
}

impl<S> Service<Request> for RequireApiKey<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<S::Future, BoxFuture<'static, Result<Response, Infallible>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        match check_now(&self.app, req) {
            KeyCheck::Passed(req) => Either::Left(self.inner.call(req)),
            KeyCheck::Refused(response) => Either::Right(Box::pin(std::future::ready(Ok(response)))),
            KeyCheck::NeedsLookup(req) => {
                // The ready service goes into the future; a clone stays for the next call.
                let clone = self.inner.clone();
                let inner = std::mem::replace(&mut self.inner, clone);
                let app = self.app.clone();
                Either::Right(Box::pin(
                    async move { Ok(check_then_call(app, req, inner).await) },
                ))
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
        return KeyCheck::NeedsLookup(req);
    };
    match app.auth.identify_now(presented) {
        Some(Ok(caller)) if caller.agents.is_none() => {
            admit(&mut req, caller);
            KeyCheck::Passed(req)
        }
        Some(Err(denied)) => KeyCheck::Refused(refusal(denied)),
        Some(Ok(_)) | None => KeyCheck::NeedsLookup(req),
    }
}

fn admit(req: &mut Request, caller: KeyCaller) {
    req.extensions_mut().insert(caller.scope);
    req.extensions_mut().insert(Attribution {
        key: Some(caller.key_id),
        key_limits: caller.limits,
        ..Attribution::default()
    });
}

fn refusal(denied: Denied) -> Response {
    match denied {
        Denied::Expired(at) => ApiError::from(KeyError::Expired(at)).into_response(),
        Denied::Invalid => ApiError::Unauthorized("invalid API key").into_response(),
    }
}

async fn check_then_call<S>(app: Arc<App>, mut req: Request, mut inner: S) -> Response
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    let Some(presented) = presented_key(&req).map(String::from) else {
        // The control UI: a signed-in cookie session, from the UI's own origin.
        if let Some(session) = req.extensions().get::<tower_sessions::Session>().cloned()
            && super::login::signed_in(&session).await
        {
            if !super::login::same_origin(req.method(), req.headers()) {
                return ApiError::Forbidden(
                    "cross-site request refused: it must come from the Onyx UI's own origin",
                )
                .into_response();
            }
            req.extensions_mut().insert(Scope::Admin);
            let Ok(response) = inner.call(req).await;
            return response;
        }
        return ApiError::Unauthorized(
            "missing API key: send `Authorization: Bearer <key>` or `x-api-key: <key>`",
        )
        .into_response();
    };
    match app.auth.identify(&presented).await {
        Ok(caller) => {
            let agents = caller.agents.clone();
            admit(&mut req, caller);
            if let Some(agents) = agents {
                req.extensions_mut()
                    .insert(super::mcp::ScopedAgents(agents.clone()));
                req = match super::agent_scope::check(&app, req, &agents).await {
                    Ok(req) => req,
                    Err(refused) => return refused.into_response(),
                };
            }
            let Ok(response) = inner.call(req).await;
            response
        }
        Err(denied) => refusal(denied),
    }
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
