//! `/v1/keys` (admin scope): create (the key is shown once), list, revoke.
//! Making and revoking a key are audit events.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;

use super::body::{JsonObject, typed};
use super::client::ClientIp;
use super::error::ApiError;
use super::middleware::Caller;
use super::ui_bodies::{CreatedKey, KeyRevoked, List};
use crate::app::App;
use crate::audit::{Action, NewEvent};
use crate::auth::{KeyBounds, KeyError, Scope, StoredKey};

#[derive(Deserialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(optional_fields))]
#[cfg_attr(test, ts(rename = "CreateKey"))]
#[schemars(rename = "CreateKey")]
#[serde(deny_unknown_fields)]
pub(super) struct Create {
    name: String,
    #[serde(default = "chat")]
    scope: Scope,
    /// Budgets and rate limits: `{ dailyUsd, monthlyUsd, rpm, tpm }`.
    #[serde(default)]
    limits: Option<crate::limits::Limits>,
    /// The only agents the key may reach (a `chat` key; all agents when absent).
    #[serde(default)]
    agents: Option<Vec<String>>,
    /// When the key stops working (RFC 3339).
    #[serde(default, rename = "expiresAt")]
    #[cfg_attr(test, ts(rename = "expiresAt"))]
    expires_at: Option<String>,
}

fn chat() -> Scope {
    Scope::Chat
}

/// Who acted, for the audit log: the key's id, or `ui` for a signed-in browser.
pub(super) fn actor(caller: &Caller) -> String {
    caller.0.key.as_deref().unwrap_or("ui").to_string()
}

pub async fn create(
    State(app): State<Arc<App>>,
    caller: Caller,
    client: ClientIp,
    JsonObject(body): JsonObject,
) -> Result<(StatusCode, Json<CreatedKey>), ApiError> {
    let request: Create = typed(&body)?;
    if let Some(agents) = &request.agents {
        for agent in agents {
            if app.agents.registry.get(agent.trim()).await?.is_none() {
                return Err(KeyError::BadAgents(format!(
                    "there is no agent {agent:?}; GET /v1/agents lists them"
                ))
                .into());
            }
        }
    }
    let bounds = KeyBounds {
        agents: request.agents,
        expires_at: request.expires_at,
    };
    let (stored, key) = app
        .auth
        .create(&request.name, request.scope, request.limits, bounds)
        .await?;
    let detail = format!(
        "name {:?}, scope {}{}{}",
        stored.name,
        if stored.scope == Scope::Admin {
            "admin"
        } else {
            "chat"
        },
        stored
            .agents
            .as_ref()
            .map(|a| format!(", agents {}", a.join(",")))
            .unwrap_or_default(),
        stored
            .expires_at
            .as_ref()
            .map(|at| format!(", expires {at}"))
            .unwrap_or_default(),
    );
    let event = NewEvent {
        action: Action::KeyCreated,
        actor: &actor(&caller),
        target: Some(&stored.id),
        ip: client.text(),
        detail: Some(detail),
    };
    crate::audit::record(&app.db, event).await;
    Ok((StatusCode::CREATED, Json(CreatedKey { stored, key })))
}

pub async fn list(State(app): State<Arc<App>>) -> Result<Json<List<StoredKey>>, ApiError> {
    Ok(Json(List::new(app.auth.list().await?)))
}

pub async fn revoke(
    State(app): State<Arc<App>>,
    caller: Caller,
    client: ClientIp,
    Path(id): Path<String>,
) -> Result<Json<KeyRevoked>, ApiError> {
    app.auth.revoke(&id).await?;
    let event = NewEvent {
        action: Action::KeyRevoked,
        actor: &actor(&caller),
        target: Some(&id),
        ip: client.text(),
        detail: None,
    };
    crate::audit::record(&app.db, event).await;
    Ok(Json(KeyRevoked {
        id,
        object: "key.revoked",
        revoked: true,
    }))
}
