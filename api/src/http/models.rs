//! `GET /v1/models`.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use crate::app::App;

pub async fn list_models(State(app): State<Arc<App>>) -> Json<Value> {
    let data = app.catalog.list(&app.router).await;
    Json(json!({"object": "list", "data": data}))
}
