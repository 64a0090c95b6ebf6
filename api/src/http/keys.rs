//! `/v1/keys` (admin scope): create (the key is shown once), list, revoke.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::body::{JsonObject, typed};
use super::error::ApiError;
use crate::app::App;
use crate::auth::Scope;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Create {
    name: String,
    #[serde(default = "chat")]
    scope: Scope,
}

fn chat() -> Scope {
    Scope::Chat
}

pub async fn create(
    State(app): State<Arc<App>>,
    JsonObject(body): JsonObject,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let request: Create = typed(&body)?;
    let (stored, secret) = app.auth.create(&request.name, request.scope).await?;
    let mut body = serde_json::to_value(stored).unwrap_or_default();
    body["key"] = json!(secret);
    Ok((StatusCode::CREATED, Json(body)))
}

pub async fn list(State(app): State<Arc<App>>) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!({"object": "list", "data": app.auth.list().await?})))
}

pub async fn revoke(State(app): State<Arc<App>>, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    app.auth.revoke(&id).await?;
    Ok(Json(json!({"id": id, "object": "key.revoked", "revoked": true})))
}
