//! `POST /v1/embeddings`.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde_json::Value;

use super::body::{JsonObject, into_map, typed};
use super::error::ApiError;
use crate::app::App;
use crate::providers::{EmbeddingsCall, Usage};

pub async fn create_embeddings(
    State(app): State<Arc<App>>,
    JsonObject(body): JsonObject,
) -> Result<Json<Value>, ApiError> {
    let request = typed(&body)?;
    let call = EmbeddingsCall {
        body: into_map(body),
        request,
    };
    let targets = app.router.resolve(&call.request.model)?;
    let (response, served_by) = app.router.embeddings(&targets, &call).await?;
    if let Some(usage) = Usage::from_response(&response) {
        app.metrics.record_usage(
            &served_by.provider,
            &served_by.model,
            usage.prompt_tokens,
            usage.completion_tokens,
        );
    }
    Ok(Json(response))
}
