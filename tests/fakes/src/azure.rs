//! A fake Azure OpenAI resource, served by the fake OpenAI server:
//! `POST /openai/deployments/{deployment}/chat/completions` and
//! `…/embeddings`, `GET /openai/models`. Each needs `?api-version=` (Azure
//! answers 404 without it) and the key in the `api-key` header; a bearer
//! token is refused, as Azure does with key auth. The deployment's name is
//! the fake model that answers, so a test sees which deployment was called.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::FakeState;

pub fn routes() -> Router<Arc<FakeState>> {
    Router::new()
        .route(
            "/openai/deployments/{deployment}/{*operation}",
            post(deployment_call),
        )
        .route("/openai/models", get(models))
}

fn azure_error(status: StatusCode, code: &str, message: &str) -> Box<Response> {
    Box::new(
        (
            status,
            axum::Json(json!({"error": {"code": code, "message": message}})),
        )
            .into_response(),
    )
}

/// Azure's checks, then the headers the OpenAI handlers expect.
fn admit(
    state: &FakeState,
    headers: &HeaderMap,
    query: &HashMap<String, String>,
) -> Result<HeaderMap, Box<Response>> {
    if query.get("api-version").is_none_or(String::is_empty) {
        return Err(azure_error(StatusCode::NOT_FOUND, "404", "Resource not found"));
    }
    let key = headers.get("api-key").and_then(|v| v.to_str().ok());
    if headers.contains_key(header::AUTHORIZATION) || !crate::authorized(state, key) {
        return Err(azure_error(
            StatusCode::UNAUTHORIZED,
            "401",
            "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource.",
        ));
    }
    let mut openai = headers.clone();
    if let Ok(bearer) = HeaderValue::from_str(&format!("Bearer {}", key.unwrap_or_default())) {
        openai.insert(header::AUTHORIZATION, bearer);
    }
    Ok(openai)
}

/// `chat/completions` or `embeddings` of one deployment: the OpenAI fake's
/// answer with the deployment as the model.
async fn deployment_call(
    State(state): State<Arc<FakeState>>,
    Path((deployment, operation)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let headers = match admit(&state, &headers, &query) {
        Ok(headers) => headers,
        Err(refused) => return *refused,
    };
    let Ok(mut body) = serde_json::from_slice::<Value>(&body) else {
        return *azure_error(StatusCode::BAD_REQUEST, "BadRequest", "invalid JSON body");
    };
    body["model"] = json!(deployment);
    let body = Bytes::from(body.to_string());
    match operation.as_str() {
        "chat/completions" => crate::openai::chat(State(state), headers, body).await,
        "embeddings" => crate::openai::embeddings(State(state), headers, body).await,
        _ => *azure_error(StatusCode::NOT_FOUND, "404", "Resource not found"),
    }
}

async fn models(
    State(state): State<Arc<FakeState>>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    match admit(&state, &headers, &query) {
        Ok(headers) => crate::openai::models(State(state), headers).await,
        Err(refused) => *refused,
    }
}
