//! The control UI's login: `POST /auth/login` checks the password against
//! `gateway.auth.passwordHash` and starts a cookie session (tower-sessions,
//! stored in SurrealDB: it survives restarts and works on every replica);
//! `POST /auth/logout` ends it; `GET /auth/me` tells the UI where it stands.
//! Every login, right or wrong, is an audit event.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::json;
use tower_sessions::Session;

use super::body::{JsonObject, typed};
use super::error::ApiError;
use crate::app::App;

/// The session key set once the password was right.
const SIGNED_IN: &str = "signed_in";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Login {
    password: String,
}

pub async fn signed_in(session: &Session) -> bool {
    session.get::<bool>(SIGNED_IN).await.ok().flatten() == Some(true)
}

pub async fn login(
    State(app): State<Arc<App>>,
    session: Session,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    JsonObject(body): JsonObject,
) -> Result<Response, ApiError> {
    let request: Login = typed(&body)?;
    let Some(hash) = app.password_hash.clone() else {
        return Err(ApiError::Conflict(
            "no UI password is set: run `onyx hash-password` and put the hash in gateway.auth.passwordHash"
                .into(),
        ));
    };
    let ip = peer.map_or([127, 0, 0, 1].into(), |Extension(ConnectInfo(addr))| addr.ip());
    let throttled = app.login_throttle.blocked(ip).await?;
    if let Some(wait) = throttled {
        let body = json!({"error": {
            "message": format!("too many failed logins; try again in {} seconds", wait.as_secs().max(1)),
            "type": "rate_limit_error", "param": null, "code": "too_many_logins",
        }});
        return Ok((
            StatusCode::TOO_MANY_REQUESTS,
            [(header::RETRY_AFTER, wait.as_secs().max(1).to_string())],
            Json(body),
        )
            .into_response());
    }
    // argon2 is deliberately slow: keep it off the async workers.
    let password = request.password;
    let ok = tokio::task::spawn_blocking(move || crate::auth::verify_password(&password, &hash))
        .await
        .unwrap_or(false);
    let event = |action| crate::audit::NewEvent {
        action,
        actor: "ui",
        target: None,
        ip: Some(ip.to_string()),
        detail: None,
    };
    if !ok {
        crate::audit::record(&app.db, event(crate::audit::Action::LoginFailed)).await;
        app.login_throttle.failed(ip).await?;
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

pub async fn logout(session: Session) -> Result<Json<serde_json::Value>, ApiError> {
    session.flush().await?;
    Ok(Json(json!({"ok": true})))
}

pub async fn me(State(app): State<Arc<App>>, session: Session) -> Json<super::views::Me> {
    let required = app.auth.required();
    Json(super::views::Me {
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
