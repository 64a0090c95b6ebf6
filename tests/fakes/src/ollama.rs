//! A fake Ollama: `POST /api/chat` (NDJSON stream by default, JSON with
//! `"stream": false`, tool calls with object arguments), `POST /api/embed`,
//! `GET /api/tags`, and `GET /` ("Ollama is running").

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::script::{self, Plan, Turn};
use crate::{FakeServer, FakeState, StreamGuard};

pub async fn start(port: u16) -> std::io::Result<FakeServer> {
    let state = FakeState::new(None);
    let routes = Router::new()
        .route("/", get(|| async { "Ollama is running" }))
        .route("/api/chat", post(chat))
        .route("/api/embed", post(embed))
        .route("/api/tags", get(tags));
    crate::serve(routes, state.clone(), port).await
}

fn error(status: StatusCode, message: &str) -> Response {
    (status, axum::Json(json!({"error": message}))).into_response()
}

/// Ollama names models `name:tag`; `fake-echo` means `fake-echo:latest`.
fn base_name(model: &str) -> String {
    model.strip_suffix(":latest").unwrap_or(model).to_string()
}

async fn chat(State(state): State<Arc<FakeState>>, body: Bytes) -> Response {
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return error(StatusCode::BAD_REQUEST, "invalid character in request body");
    };
    state.record(&body);
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or(Value::Null);
    let model = body["model"].as_str().unwrap_or_default().to_string();
    let turn = Turn {
        model: base_name(&model),
        last_role: last["role"].as_str().unwrap_or_default().to_string(),
        last_text: script::without_context(last["content"].as_str().unwrap_or_default()),
        tool_names: body["tools"]
            .as_array()
            .map(|t| {
                t.iter()
                    .filter_map(|t| t["function"]["name"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default(),
        prompt_words: messages
            .iter()
            .map(|m| script::words(m["content"].as_str().unwrap_or_default()))
            .sum(),
        history: messages
            .iter()
            .map(|m| {
                (
                    m["role"].as_str().unwrap_or_default().to_string(),
                    script::without_context(m["content"].as_str().unwrap_or_default()),
                )
            })
            .collect(),
    };
    let plan = script::plan(&state, &turn);
    let (content, tool_calls) = match &plan {
        Plan::NotFound => {
            return error(
                StatusCode::NOT_FOUND,
                &format!("model \"{model}\" not found, try pulling it first"),
            );
        }
        Plan::Fail { status, message } => {
            return error(
                StatusCode::from_u16(*status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                message,
            );
        }
        Plan::Reply(text) => (text.clone(), Vec::new()),
        Plan::CallTools(calls) => (
            String::new(),
            calls
                .iter()
                .map(|c| json!({"function": {"name": c.name, "arguments": c.arguments}}))
                .collect(),
        ),
    };
    let done = json!({
        "model": model, "created_at": "2025-01-01T00:00:00Z",
        "message": {"role": "assistant", "content": "", "tool_calls": tool_calls},
        "done": true, "done_reason": "stop",
        "total_duration": 1000, "load_duration": 10, "prompt_eval_count": turn.prompt_words,
        "prompt_eval_duration": 100, "eval_count": plan.completion_words(), "eval_duration": 500,
    });
    if body["stream"].as_bool() == Some(false) {
        let mut whole = done;
        whole["message"]["content"] = json!(content);
        return axum::Json(whole).into_response();
    }
    let slow = script::is_slow(&turn.model);
    let mut lines: Vec<Value> = script::pieces(&content)
        .into_iter()
        .filter(|p| !p.is_empty())
        .map(|p| json!({"model": model, "created_at": "2025-01-01T00:00:00Z", "message": {"role": "assistant", "content": p}, "done": false}))
        .collect();
    lines.push(done);
    let stream = async_stream::stream! {
        let mut guard = StreamGuard::new(state);
        for line in lines {
            if slow {
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
            yield Ok::<_, std::convert::Infallible>(Bytes::from(format!("{line}\n")));
        }
        guard.complete();
    };
    (
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        Body::from_stream(stream),
    )
        .into_response()
}

async fn embed(State(state): State<Arc<FakeState>>, body: Bytes) -> Response {
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return error(StatusCode::BAD_REQUEST, "invalid character in request body");
    };
    state.record(&body);
    let model = body["model"].as_str().unwrap_or_default();
    if state.embed_down.load(std::sync::atomic::Ordering::SeqCst) {
        return error(StatusCode::SERVICE_UNAVAILABLE, "embedding service is down");
    }
    let Some(default_dimensions) = script::embedding_dimensions(&base_name(model)) else {
        return error(
            StatusCode::NOT_FOUND,
            &format!("model \"{model}\" not found, try pulling it first"),
        );
    };
    let inputs: Vec<String> = match &body["input"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items
            .iter()
            .filter_map(|i| i.as_str().map(String::from))
            .collect(),
        _ => return error(StatusCode::BAD_REQUEST, "invalid input type"),
    };
    let dimensions = body["dimensions"]
        .as_u64()
        .map_or(default_dimensions, |d| d as usize);
    let embeddings: Vec<Vec<f32>> = inputs.iter().map(|t| script::embed(t, dimensions)).collect();
    axum::Json(
        json!({"model": model, "embeddings": embeddings, "total_duration": 1000, "prompt_eval_count": 1}),
    )
    .into_response()
}

async fn tags() -> Response {
    let models: Vec<Value> = script::MODELS
        .iter()
        .chain(script::EMBEDDING_MODELS.iter().map(|(name, _)| name))
        .map(|m| json!({"name": format!("{m}:latest"), "model": format!("{m}:latest"), "modified_at": "2025-01-01T00:00:00Z", "size": 1000, "digest": "sha256:fake", "details": {}}))
        .collect();
    axum::Json(json!({"models": models})).into_response()
}
