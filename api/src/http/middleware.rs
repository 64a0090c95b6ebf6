//! Request context and auth.
//!
//! `request_context` gives every request an id (the client's `x-request-id` when
//! sane, else a UUIDv7), a tracing span carrying it, the id echoed on the
//! response, and the request metrics. `require_api_key` checks the bearer key
//! (or `x-api-key`, as Anthropic's clients send it), refuses an expired key,
//! and holds a key scoped to agents to them (`agent_scope`).

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tracing::Instrument;

use super::body::BodyLimit;
use super::error::ApiError;
use crate::app::App;
use crate::auth::{Denied, KeyError, Scope};
use crate::providers::Attribution;

const REQUEST_ID: &str = "x-request-id";

fn client_request_id(req: &Request) -> Option<HeaderValue> {
    let value = req.headers().get(REQUEST_ID)?;
    let text = value.to_str().ok()?;
    let sane = !text.is_empty() && text.len() <= 128 && text.bytes().all(|b| b.is_ascii_graphic());
    sane.then(|| value.clone())
}

/// A UUIDv7, encoded on the stack (no intermediate `String`).
fn new_request_id() -> HeaderValue {
    let mut buf = uuid::Uuid::encode_buffer();
    let text = uuid::Uuid::now_v7().hyphenated().encode_lower(&mut buf);
    HeaderValue::from_str(text).unwrap_or(HeaderValue::from_static("unknown"))
}

pub async fn request_context(State(app): State<Arc<App>>, mut req: Request, next: Next) -> Response {
    let started = Instant::now();
    let id = client_request_id(&req).unwrap_or_else(new_request_id);
    // MatchedPath is a shared string: cloning it copies no text.
    let route = req.extensions().get::<MatchedPath>().cloned();
    let method = req.method().clone();
    req.extensions_mut().insert(BodyLimit(app.max_body_bytes));
    let span = tracing::info_span!(
        "request",
        request_id = id.to_str().unwrap_or_default(),
        method = %method,
        path = %req.uri().path()
    );
    let mut response = next.run(req).instrument(span.clone()).await;
    let elapsed = started.elapsed();
    let status = response.status().as_u16();
    let route = route.as_ref().map_or("unmatched", MatchedPath::as_str);
    app.metrics
        .record_request(route, method.as_str(), status, elapsed.as_secs_f64());
    span.in_scope(|| {
        tracing::debug!(
            status,
            elapsed_us = elapsed.as_micros() as u64,
            "request finished"
        )
    });
    response.headers_mut().insert(REQUEST_ID, id);
    response
}

pub async fn require_api_key(State(app): State<Arc<App>>, mut req: Request, next: Next) -> Response {
    if !app.auth.required() {
        // No key exists: only possible when bound to loopback (checked at startup).
        req.extensions_mut().insert(Scope::Admin);
        return next.run(req).await;
    }
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        // Anthropic's clients send the key as `x-api-key`.
        .or_else(|| req.headers().get("x-api-key").and_then(|v| v.to_str().ok()))
        .map(str::trim)
        .map(String::from);
    let Some(presented) = presented else {
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
            return next.run(req).await;
        }
        return ApiError::Unauthorized(
            "missing API key: send `Authorization: Bearer <key>` or `x-api-key: <key>`",
        )
        .into_response();
    };
    match app.auth.identify(&presented).await {
        Ok(caller) => {
            req.extensions_mut().insert(caller.scope);
            req.extensions_mut().insert(Attribution {
                key: Some(caller.key_id),
                key_limits: caller.limits,
                ..Attribution::default()
            });
            if let Some(agents) = caller.agents {
                req.extensions_mut()
                    .insert(super::mcp::ScopedAgents(agents.clone()));
                req = match super::agent_scope::check(&app, req, &agents).await {
                    Ok(req) => req,
                    Err(refused) => return refused.into_response(),
                };
            }
            next.run(req).await
        }
        Err(Denied::Expired(at)) => ApiError::from(KeyError::Expired(at)).into_response(),
        Err(Denied::Invalid) => ApiError::Unauthorized("invalid API key").into_response(),
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
            parts.extensions.get::<Attribution>().cloned().unwrap_or_default(),
        ))
    }
}
