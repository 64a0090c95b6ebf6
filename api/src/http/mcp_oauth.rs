//! OAuth sign-in for remote MCP servers: `POST /v1/mcp/servers/{name}/oauth/start`
//! (admin) answers the authorization URL the owner opens, and
//! `GET /v1/mcp/oauth/callback` is where the authorization server sends the
//! browser back. The callback needs no key or cookie (the browser arrives
//! from another site): the one-time `state` it carries is what admits it.
//! The redirect URI comes from `ONYX_PUBLIC_URL` (the gateway's public
//! address), else the address this replica listens on, never from the
//! request's `Host`.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use url::Url;

use super::client::ClientIp;
use super::error::ApiError;
use super::middleware::Caller;
use crate::app::App;
use crate::audit::Action;
use crate::mcp_client::SignInError;
use crate::mcp_client::oauth::{OAuthError, SignInStart};

/// Where the authorization server sends the browser back, under the public address.
pub const CALLBACK_PATH: &str = "/v1/mcp/oauth/callback";

impl From<SignInError> for ApiError {
    fn from(err: SignInError) -> Self {
        match err {
            err @ SignInError::NotFound(_) => ApiError::NotFound {
                message: err.to_string(),
                code: "mcp_server_not_found",
            },
            SignInError::OAuth(OAuthError::BadState(message)) => ApiError::BadRequest {
                message,
                param: Some("state".into()),
                code: Some("invalid_state"),
            },
            SignInError::OAuth(err @ (OAuthError::Refused(_) | OAuthError::Unreachable(_))) => {
                ApiError::BadGateway(err.to_string())
            }
            SignInError::OAuth(OAuthError::Store(message)) => {
                tracing::error!(error = %message, "the OAuth sign-in store failed");
                ApiError::Conflict("the sign-in could not be stored; try again".into())
            }
            other => ApiError::Conflict(other.to_string()),
        }
    }
}

/// The callback's address: `ONYX_PUBLIC_URL` or this replica's listening address.
fn redirect_uri() -> Result<Url, ApiError> {
    let base = match std::env::var("ONYX_PUBLIC_URL") {
        Ok(public) if !public.trim().is_empty() => public,
        _ => crate::providers::subscription::gateway_base_url().ok_or_else(|| {
            ApiError::Conflict("set ONYX_PUBLIC_URL to the address the browser reaches Onyx at".into())
        })?,
    };
    let base = Url::parse(base.trim())
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
        .ok_or_else(|| ApiError::Conflict(format!("ONYX_PUBLIC_URL {base:?} is not an http(s) URL")))?;
    let path = format!("{}{CALLBACK_PATH}", base.path().trim_end_matches('/'));
    let mut url = base;
    url.set_path(&path);
    url.set_query(None);
    url.set_fragment(None);
    Ok(url)
}

/// `POST /v1/mcp/servers/{name}/oauth/start`: discovery and registration
/// done, the URL to open (its state accepted once, for ten minutes).
pub async fn start(
    State(app): State<Arc<App>>,
    caller: Caller,
    client: ClientIp,
    Path(name): Path<String>,
) -> Result<Json<SignInStart>, ApiError> {
    let redirect = redirect_uri()?;
    let started = app.mcp.start_sign_in(&name, &redirect).await?;
    super::providers::audit(
        &app,
        &caller,
        client,
        Action::McpServerChanged,
        &name,
        "OAuth sign-in started".into(),
    )
    .await;
    Ok(Json(started))
}

#[derive(Deserialize)]
pub struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    iss: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

/// `GET /v1/mcp/oauth/callback`: exchanges the code and shows a small page.
pub async fn callback(State(app): State<Arc<App>>, Query(query): Query<CallbackQuery>) -> Response {
    let Some(state) = query.state.filter(|s| !s.is_empty()) else {
        return page(
            StatusCode::BAD_REQUEST,
            "Sign-in refused",
            "The answer carries no state.",
        );
    };
    if let Some(error) = query.error {
        let detail = query
            .error_description
            .map(|d| format!(" ({})", crate::text::one_line(&d, 200)))
            .unwrap_or_default();
        return page(
            StatusCode::BAD_REQUEST,
            "Sign-in refused",
            &format!("The authorization server answered {error}{detail}."),
        );
    }
    let Some(code) = query.code.filter(|c| !c.is_empty()) else {
        return page(
            StatusCode::BAD_REQUEST,
            "Sign-in refused",
            "The answer carries no code.",
        );
    };
    match app.mcp.finish_sign_in(&state, &code, query.iss.as_deref()).await {
        Ok(name) => page(
            StatusCode::OK,
            "Signed in",
            &format!("Onyx is signed in to the MCP server {name}. You can close this tab."),
        ),
        Err(err) => {
            let api = ApiError::from(err);
            let message = api.to_string();
            page(api.status(), "Sign-in failed", &message)
        }
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// A page with no script, no outside resource, not cached, and no referrer
/// (its address carries the code).
fn page(status: StatusCode, title: &str, text: &str) -> Response {
    let body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{title} · Onyx</title></head>\
         <body style=\"font-family:sans-serif;margin:3em\"><h1>{title}</h1><p>{text}</p></body></html>",
        title = escape(title),
        text = escape(text),
    );
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; style-src 'unsafe-inline'"),
    );
    response
}
