//! The control UI's login: `POST /auth/login` checks the password against
//! `gateway.auth.passwordHash` and starts a cookie session (tower-sessions,
//! stored in SurrealDB: it survives restarts and works on every replica);
//! `POST /auth/logout` ends it; `GET /auth/me` tells the UI where it stands.
//! Every checked login, right or wrong, is an audit event.
//!
//! A login is counted against its address before its password is checked
//! (`auth::LoginThrottle::reserve`), so a burst of guesses past the limit is
//! refused without hashing any, and passwords are checked a few at a time
//! (`auth::PasswordChecks`): argon2 allocates 19 MiB per check.

use std::net::IpAddr;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;
use tower_sessions::Session;

use super::body::{JsonObject, SentAsJson, typed};
use super::client::ClientIp;
use super::error::ApiError;
use crate::app::App;
use crate::auth::Attempt;

/// The session key set once the password was right.
const SIGNED_IN: &str = "signed_in";

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Login {
    password: String,
}

pub async fn signed_in(session: &Session) -> bool {
    session.get::<bool>(SIGNED_IN).await.ok().flatten() == Some(true)
}

pub async fn login(
    State(app): State<Arc<App>>,
    session: Session,
    client: ClientIp,
    JsonObject(body): JsonObject,
) -> Result<Response, ApiError> {
    let request: Login = typed(&body)?;
    let Some(hash) = app.password_hash.clone() else {
        return Err(ApiError::Conflict(
            "no UI password is set: run `onyx hash-password` and put the hash in gateway.auth.passwordHash"
                .into(),
        ));
    };
    // No socket (in-process tests): counted as loopback.
    let ip = client.0.unwrap_or(IpAddr::from([127, 0, 0, 1]));
    if let Attempt::Refused(wait) = app.login_throttle.reserve(ip).await? {
        return Ok(too_many(
            "too_many_logins",
            format!(
                "too many failed logins; try again in {} seconds",
                wait.as_secs().max(1)
            ),
            wait.as_secs().max(1),
        ));
    }
    let Ok(ok) = app.password_checks.verify(request.password, hash).await else {
        return Ok(too_many(
            "logins_busy",
            "too many logins are being checked right now; try again in a moment".into(),
            1,
        ));
    };
    app.metrics.record_password_check();
    let event = |action| crate::audit::NewEvent {
        action,
        actor: "ui",
        target: None,
        ip: Some(ip.to_string()),
        detail: None,
    };
    if !ok {
        crate::audit::record(&app.db, event(crate::audit::Action::LoginFailed)).await;
        app.login_throttle.failed().await?;
        tracing::warn!(%ip, "failed UI login");
        return Err(ApiError::Unauthorized("wrong password"));
    }
    app.login_throttle.succeeded(ip).await?;
    // A new id on sign-in: a session id planted before cannot be ridden.
    session.cycle_id().await?;
    session.insert(SIGNED_IN, true).await?;
    crate::audit::record(&app.db, event(crate::audit::Action::LoginSucceeded)).await;
    tracing::info!(%ip, "UI login");
    Ok(Json(json!({"ok": true})).into_response())
}

/// A 429 in OpenAI's error shape, with `Retry-After`.
fn too_many(code: &str, message: String, retry_after: u64) -> Response {
    let body = json!({"error": {
        "message": message, "type": "rate_limit_error", "param": null, "code": code,
    }});
    (
        StatusCode::TOO_MANY_REQUESTS,
        [(header::RETRY_AFTER, retry_after.to_string())],
        Json(body),
    )
        .into_response()
}

pub async fn logout(_: SentAsJson, session: Session) -> Result<Json<serde_json::Value>, ApiError> {
    session.flush().await?;
    Ok(Json(json!({"ok": true})))
}

pub async fn me(State(app): State<Arc<App>>, session: Session) -> Json<super::ui_bodies::Me> {
    let required = app.auth.required();
    Json(super::ui_bodies::Me {
        authenticated: !required || signed_in(&session).await,
        auth_required: required,
        password_configured: app.password_hash.is_some(),
    })
}

/// Cookie-authenticated requests that change something must come from the
/// UI's own origin (browsers always send `Origin` on such requests).
pub fn same_origin(method: &Method, headers: &HeaderMap) -> bool {
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return true;
    }
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
    match (host, origin) {
        (Some(host), Some(origin)) => origin
            .split_once("://")
            .is_some_and(|(_, rest)| rest.trim_end_matches('/') == host),
        _ => false,
    }
}
