//! A fake Anthropic Messages API: `POST /v1/messages` (JSON and the SSE event
//! stream with `tool_use`, `input_json_delta`, `message_delta` usage), Anthropic
//! error bodies, `POST /v1/messages/count_tokens`, `GET /v1/models`. A request
//! with `thinking: {type: "enabled"}` gets a `thinking` block (with a
//! signature) before its text. A client's `anthropic-beta` header is recorded
//! with the body as `_fake_headers`, for tests. It checks `x-api-key`, `anthropic-version`,
//! `max_tokens` and that roles alternate starting with `user`, as the real API does.
//! Prompt caching is simulated: a request with `cache_control` breakpoints
//! reads from the cache the longest prefix (tools, system, messages, block by
//! block) that an earlier request marked, looking back up to 20 blocks from each
//! breakpoint, and writes the rest up to its last breakpoint; the usage reports
//! `cache_read_input_tokens` and `cache_creation_input_tokens` (one word is a token).

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::script::{self, Plan, Turn};
use crate::{FakeServer, FakeState, StreamGuard};

pub async fn start(key: Option<String>, port: u16) -> std::io::Result<FakeServer> {
    let state = FakeState::new(key);
    let routes = Router::new()
        .route("/v1/messages", post(messages))
        .route("/v1/messages/count_tokens", post(count_tokens))
        .route("/v1/models", get(models));
    crate::serve(routes, state.clone(), port).await
}

fn error(status: u16, kind: &str, message: &str) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = json!({"type": "error", "error": {"type": kind, "message": message}});
    (status, axum::Json(body)).into_response()
}

fn check_headers(state: &FakeState, headers: &HeaderMap) -> Option<Response> {
    let key = headers.get("x-api-key").and_then(|v| v.to_str().ok());
    if !crate::authorized(state, key) {
        return Some(error(401, "authentication_error", "invalid x-api-key"));
    }
    if headers.get("anthropic-version").is_none() {
        return Some(error(
            400,
            "invalid_request_error",
            "anthropic-version: header is required",
        ));
    }
    None
}

fn text_of(content: &Value) -> (String, bool) {
    match content {
        Value::String(s) => (s.clone(), false),
        Value::Array(blocks) => {
            let is_tool_result = blocks.iter().any(|b| b["type"] == "tool_result");
            let text = blocks
                .iter()
                .filter_map(|b| match b["type"].as_str() {
                    Some("text") => b["text"].as_str().map(String::from),
                    Some("tool_result") => Some(text_of(&b["content"]).0),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join(" ");
            (text, is_tool_result)
        }
        _ => (String::new(), false),
    }
}

fn validate(body: &Value) -> Result<(), String> {
    if body["max_tokens"].as_u64().is_none() {
        return Err("max_tokens: Field required".into());
    }
    let messages = body["messages"].as_array().ok_or("messages: Field required")?;
    let mut expected = "user";
    for (i, message) in messages.iter().enumerate() {
        let role = message["role"].as_str().unwrap_or_default();
        // Mid-conversation system turns (a beta Claude Code uses) sit between the others.
        if role == "system" {
            continue;
        }
        if role != expected {
            return Err(format!(
                "messages.{i}.role: roles must alternate between \"user\" and \"assistant\", starting with \"user\""
            ));
        }
        expected = if role == "user" { "assistant" } else { "user" };
    }
    Ok(())
}

async fn messages(State(state): State<Arc<FakeState>>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(denied) = check_headers(&state, &headers) {
        return denied;
    }
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return error(400, "invalid_request_error", "request body is not valid JSON");
    };
    record(&state, &headers, &body);
    if let Err(message) = validate(&body) {
        return error(400, "invalid_request_error", &message);
    }
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let last = messages
        .iter()
        .rev()
        .find(|m| m["role"] != "system")
        .cloned()
        .unwrap_or(Value::Null);
    let (last_text, is_tool_result) = text_of(&last["content"]);
    let turn = Turn {
        model: body["model"].as_str().unwrap_or_default().to_string(),
        last_role: if is_tool_result {
            "tool".into()
        } else {
            last["role"].as_str().unwrap_or_default().to_string()
        },
        last_text: script::without_context(&last_text),
        tool_names: body["tools"]
            .as_array()
            .map(|t| {
                t.iter()
                    .filter_map(|t| t["name"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default(),
        prompt_words: messages
            .iter()
            .map(|m| script::words(&text_of(&m["content"]).0))
            .sum::<u64>()
            + script::words(&text_of(&body["system"]).0),
        history: messages
            .iter()
            .map(|m| {
                let (text, tool_result) = text_of(&m["content"]);
                let role = if tool_result {
                    "tool"
                } else {
                    m["role"].as_str().unwrap_or_default()
                };
                (role.to_string(), script::without_context(&text))
            })
            .collect(),
    };
    let plan = script::plan(&state, &turn);
    let (content, stop_reason) = match &plan {
        Plan::NotFound => return error(404, "not_found_error", &format!("model: {}", turn.model)),
        Plan::Fail { status: 429, message } => return error(429, "rate_limit_error", message),
        Plan::Fail { status: 503, message } => return error(529, "overloaded_error", message),
        Plan::Fail { status, message } => return error(*status, "api_error", message),
        Plan::Reply(text) if body["thinking"]["type"] == "enabled" => (
            vec![
                json!({"type": "thinking", "thinking": format!("The user said: {}", turn.last_text), "signature": "sig_fake"}),
                json!({"type": "text", "text": text}),
            ],
            "end_turn",
        ),
        Plan::Reply(text) => (vec![json!({"type": "text", "text": text})], "end_turn"),
        Plan::CallTools(calls) => (
            std::iter::once(json!({"type": "text", "text": "Let me look that up."}))
                .chain(calls.iter().map(|c| {
                    json!({"type": "tool_use", "id": c.id.replace("call_", "toolu_"), "name": c.name, "input": c.arguments})
                }))
                .collect(),
            "tool_use",
        ),
    };
    let mut usage = json!({"input_tokens": turn.prompt_words, "output_tokens": plan.completion_words()});
    if let Some((read, written)) = prompt_cache(&state, &body) {
        usage["input_tokens"] = json!(turn.prompt_words.saturating_sub(read + written));
        usage["cache_read_input_tokens"] = json!(read);
        usage["cache_creation_input_tokens"] = json!(written);
    }
    if body["stream"].as_bool() == Some(true) {
        return stream(state, turn.model, content, stop_reason, usage);
    }
    axum::Json(json!({
        "id": "msg_fake", "type": "message", "role": "assistant", "model": turn.model,
        "content": content, "stop_reason": stop_reason, "stop_sequence": null, "usage": usage,
    }))
    .into_response()
}

/// How far back from a breakpoint a cache lookup goes, in blocks.
const CACHE_LOOKBACK: usize = 20;

/// `(read, written)` cache tokens of a request; `None` without breakpoints.
fn prompt_cache(state: &FakeState, body: &Value) -> Option<(u64, u64)> {
    use std::hash::{DefaultHasher, Hasher};
    let as_blocks = |content: &Value| match content {
        Value::String(text) => vec![json!({"type": "text", "text": text})],
        Value::Array(blocks) => blocks.clone(),
        _ => Vec::new(),
    };
    let mut blocks: Vec<(String, Value)> = Vec::new();
    for tool in body["tools"].as_array().into_iter().flatten() {
        blocks.push(("tool".into(), tool.clone()));
    }
    for block in as_blocks(&body["system"]) {
        blocks.push(("system".into(), block));
    }
    for message in body["messages"].as_array().into_iter().flatten() {
        let role = message["role"].as_str().unwrap_or_default();
        for block in as_blocks(&message["content"]) {
            blocks.push((role.into(), block));
        }
    }
    let (mut hashes, mut words, mut marks) = (Vec::new(), Vec::new(), Vec::new());
    let (mut hash, mut total) = (0u64, 0u64);
    for (i, (role, mut block)) in blocks.into_iter().enumerate() {
        if let Some(object) = block.as_object_mut()
            && object.remove("cache_control").is_some()
        {
            marks.push(i);
        }
        if role != "tool" {
            total += script::words(&text_of(&Value::Array(vec![block.clone()])).0);
        }
        let mut hasher = DefaultHasher::new();
        hasher.write_u64(hash);
        hasher.write(role.as_bytes());
        hasher.write(block.to_string().as_bytes());
        hash = hasher.finish();
        hashes.push(hash);
        words.push(total);
    }
    let last = *marks.last()?;
    let mut cache = state.prompt_cache.lock().ok()?;
    let hit = marks
        .iter()
        .flat_map(|&m| m.saturating_sub(CACHE_LOOKBACK - 1)..=m)
        .filter(|&j| cache.contains(&hashes[j]))
        .max();
    let read = hit.map_or(0, |j| words[j]);
    for &m in &marks {
        cache.insert(hashes[m]);
    }
    Some((read, words[last] - read))
}

fn event(name: &str, data: Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

fn stream(
    state: Arc<FakeState>,
    model: String,
    content: Vec<Value>,
    stop_reason: &str,
    usage: Value,
) -> Response {
    let slow = script::is_slow(&model);
    let mut events = vec![event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": [], "stop_reason": null, "usage": {"input_tokens": usage["input_tokens"], "cache_read_input_tokens": usage["cache_read_input_tokens"], "cache_creation_input_tokens": usage["cache_creation_input_tokens"], "output_tokens": 1}}}),
    )];
    events.push(event("ping", json!({"type": "ping"})));
    for (index, block) in content.iter().enumerate() {
        if block["type"] == "text" {
            events.push(event("content_block_start", json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})));
            for piece in script::pieces(block["text"].as_str().unwrap_or_default()) {
                events.push(event("content_block_delta", json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}})));
            }
        } else if block["type"] == "thinking" {
            events.push(event("content_block_start", json!({"type": "content_block_start", "index": index, "content_block": {"type": "thinking", "thinking": "", "signature": ""}})));
            events.push(event("content_block_delta", json!({"type": "content_block_delta", "index": index, "delta": {"type": "thinking_delta", "thinking": block["thinking"]}})));
            events.push(event("content_block_delta", json!({"type": "content_block_delta", "index": index, "delta": {"type": "signature_delta", "signature": block["signature"]}})));
        } else {
            events.push(event("content_block_start", json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}})));
            let args = block["input"].to_string();
            let (a, b) = args.split_at(args.len() / 2);
            for part in [a, b] {
                events.push(event("content_block_delta", json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": part}})));
            }
        }
        events.push(event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
    }
    events.push(event("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": {"output_tokens": usage["output_tokens"]}})));
    events.push(event("message_stop", json!({"type": "message_stop"})));
    let body = async_stream::stream! {
        let mut guard = StreamGuard::new(state);
        for event in events {
            if slow {
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
            yield Ok::<_, std::convert::Infallible>(event);
        }
        guard.complete();
    };
    (
        [(header::CONTENT_TYPE, "text/event-stream")],
        Body::from_stream(body),
    )
        .into_response()
}

/// Records the body, with the client's `anthropic-beta` header when it sent one.
fn record(state: &FakeState, headers: &HeaderMap, body: &Value) {
    match headers.get("anthropic-beta").and_then(|v| v.to_str().ok()) {
        Some(beta) => {
            let mut body = body.clone();
            body["_fake_headers"] = json!({"anthropic-beta": beta});
            state.record(&body);
        }
        None => state.record(body),
    }
}

/// `{"input_tokens": N}`: one word is a token, as in the usage of answers.
async fn count_tokens(State(state): State<Arc<FakeState>>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(denied) = check_headers(&state, &headers) {
        return denied;
    }
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return error(400, "invalid_request_error", "request body is not valid JSON");
    };
    record(&state, &headers, &body);
    let Some(messages) = body["messages"].as_array() else {
        return error(400, "invalid_request_error", "messages: Field required");
    };
    let words: u64 = messages
        .iter()
        .map(|m| script::words(&text_of(&m["content"]).0))
        .sum::<u64>()
        + script::words(&text_of(&body["system"]).0);
    axum::Json(json!({"input_tokens": words})).into_response()
}

async fn models(State(state): State<Arc<FakeState>>, headers: HeaderMap) -> Response {
    if let Some(denied) = check_headers(&state, &headers) {
        return denied;
    }
    let data: Vec<Value> = script::MODELS
        .iter()
        .map(|m| json!({"type": "model", "id": m, "display_name": m, "created_at": "2025-01-01T00:00:00Z"}))
        .collect();
    axum::Json(json!({"data": data, "has_more": false, "first_id": null, "last_id": null})).into_response()
}
