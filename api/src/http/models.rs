//! `GET /v1/models`: every provider's models, aliases, and the enabled agents
//! as `onyx:{id}`.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use crate::app::App;

pub async fn list_models(State(app): State<Arc<App>>) -> Json<Value> {
    let mut data: Vec<Value> = app
        .agents
        .registry
        .list()
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|a| a.enabled)
        .map(|a| json!({"id": format!("onyx:{}", a.id), "object": "model", "created": 0, "owned_by": "onyx", "name": a.name}))
        .collect();
    data.extend(
        app.catalog
            .list(&app.router)
            .await
            .into_iter()
            .filter_map(|m| serde_json::to_value(m).ok()),
    );
    Json(json!({"object": "list", "data": data}))
}
