//! `/v1/keys` (admin scope): create (the key is shown once), list, revoke.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;

use super::body::{JsonObject, typed};
use super::error::ApiError;
use super::views::{CreatedKey, KeyRevoked, List};
use crate::app::App;
use crate::auth::{Scope, StoredKey};

#[derive(Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(optional_fields))]
#[cfg_attr(test, ts(rename = "CreateKey"))]
#[serde(deny_unknown_fields)]
pub(super) struct Create {
    name: String,
    #[serde(default = "chat")]
    scope: Scope,
    /// Budgets and rate limits: `{ dailyUsd, monthlyUsd, rpm, tpm }`.
    #[serde(default)]
    limits: Option<crate::limits::Limits>,
}

fn chat() -> Scope {
    Scope::Chat
}

pub async fn create(
    State(app): State<Arc<App>>,
    JsonObject(body): JsonObject,
) -> Result<(StatusCode, Json<CreatedKey>), ApiError> {
    let request: Create = typed(&body)?;
    let (stored, key) = app
        .auth
        .create(&request.name, request.scope, request.limits)
        .await?;
    Ok((StatusCode::CREATED, Json(CreatedKey { stored, key })))
}

pub async fn list(State(app): State<Arc<App>>) -> Result<Json<List<StoredKey>>, ApiError> {
    Ok(Json(List::new(app.auth.list().await?)))
}

pub async fn revoke(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
) -> Result<Json<KeyRevoked>, ApiError> {
    app.auth.revoke(&id).await?;
    Ok(Json(KeyRevoked {
        id,
        object: "key.revoked",
        revoked: true,
    }))
}
