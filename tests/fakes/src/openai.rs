//! A fake OpenAI API: `POST /v1/chat/completions` (JSON and SSE, tool calls,
//! `stream_options.include_usage`, OpenAI error bodies; prompt caching
//! simulated per `prompt_cache_key`), `GET /v1/models`,
//! `POST /v1/embeddings` (float and base64); `POST /v1/responses` is in
//! [`crate::openai_responses`], Azure OpenAI's URLs in [`crate::azure`].

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use serde_json::{Value, json};

use crate::script::{self, Plan, Turn};
use crate::{FakeServer, FakeState, StreamGuard};

pub async fn start(key: Option<String>, port: u16) -> std::io::Result<FakeServer> {
    let state = FakeState::new(key);
    let routes = Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/responses", post(crate::openai_responses::create))
        .route("/v1/models", get(models))
        .route("/v1/embeddings", post(embeddings))
        .merge(crate::azure::routes());
    crate::serve(routes, state.clone(), port).await
}

fn error(status: u16, message: &str, kind: &str, code: Option<&str>) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = json!({"error": {"message": message, "type": kind, "param": null, "code": code}});
    (status, axum::Json(body)).into_response()
}

fn check_auth(state: &FakeState, headers: &HeaderMap) -> Option<Response> {
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    (!crate::authorized(state, presented)).then(|| {
        error(
            401,
            "Incorrect API key provided",
            "invalid_request_error",
            Some("invalid_api_key"),
        )
    })
}

pub(crate) fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

fn turn(body: &Value) -> Turn {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or(Value::Null);
    let prompt_words = messages
        .iter()
        .map(|m| script::words(&text_of(&m["content"])))
        .sum();
    Turn {
        model: body["model"].as_str().unwrap_or_default().to_string(),
        last_role: last["role"].as_str().unwrap_or_default().to_string(),
        last_text: script::without_context(&text_of(&last["content"])),
        tool_names: body["tools"]
            .as_array()
            .map(|t| {
                t.iter()
                    .filter_map(|t| t["function"]["name"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default(),
        prompt_words,
        history: messages
            .iter()
            .map(|m| {
                (
                    m["role"].as_str().unwrap_or_default().to_string(),
                    script::without_context(&text_of(&m["content"])),
                )
            })
            .collect(),
    }
}

/// Checks the key, parses the JSON body and records it, as every POST route does.
pub(crate) fn accept(state: &FakeState, headers: &HeaderMap, body: &[u8]) -> Result<Value, Box<Response>> {
    if let Some(denied) = check_auth(state, headers) {
        return Err(Box::new(denied));
    }
    let Ok(body) = serde_json::from_slice::<Value>(body) else {
        return Err(Box::new(error(
            400,
            "We could not parse the JSON body of your request.",
            "invalid_request_error",
            None,
        )));
    };
    state.record(&body);
    Ok(body)
}

pub(crate) async fn chat(State(state): State<Arc<FakeState>>, headers: HeaderMap, body: Bytes) -> Response {
    let body = match accept(&state, &headers, &body) {
        Ok(body) => body,
        Err(refused) => return *refused,
    };
    let turn = turn(&body);
    if turn.model == script::GARBLED {
        // A 200 whose JSON stops mid-object, as a broken proxy in between may leave it.
        return (
            [(header::CONTENT_TYPE, "application/json")],
            r#"{"id":"chatcmpl-fake","object":"chat.completion","choices":["#,
        )
            .into_response();
    }
    let plan = script::plan(&state, &turn);
    if let Some(refused) = refusal(&plan, &turn.model) {
        return refused;
    }
    let mut usage = json!({
        "prompt_tokens": turn.prompt_words,
        "completion_tokens": plan.completion_words(),
        "total_tokens": turn.prompt_words + plan.completion_words(),
    });
    if let Some(cached) = cached_words(&state, &body) {
        usage["prompt_tokens_details"] = json!({"cached_tokens": cached});
    }
    let id = "chatcmpl-fake";
    if body["stream"].as_bool() == Some(true) {
        let include_usage = body["stream_options"]["include_usage"].as_bool() == Some(true);
        return stream(state, plan, turn.model, usage, include_usage);
    }
    if script::is_slow(&turn.model) {
        // A non-streaming slow answer arrives all at once, late (for timeout tests).
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    let (message, finish) = match plan {
        Plan::Reply(text) => (
            json!({"role": "assistant", "content": text, "refusal": null}),
            "stop",
        ),
        Plan::CallTools(calls) => {
            let calls: Vec<Value> = calls
                .iter()
                .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments.to_string()}}))
                .collect();
            (
                json!({"role": "assistant", "content": null, "tool_calls": calls}),
                "tool_calls",
            )
        }
        Plan::Fail { .. } | Plan::NotFound => (Value::Null, "stop"),
    };
    axum::Json(json!({
        "id": id, "object": "chat.completion", "created": 1_700_000_000u64, "model": turn.model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": null}],
        "usage": usage, "system_fingerprint": "fp_fake",
    }))
    .into_response()
}

/// The error OpenAI answers for a model that does not exist or a planned failure.
pub(crate) fn refusal(plan: &Plan, model: &str) -> Option<Response> {
    match plan {
        Plan::NotFound => {
            let message = format!("The model `{model}` does not exist or you do not have access to it.");
            Some(error(
                404,
                &message,
                "invalid_request_error",
                Some("model_not_found"),
            ))
        }
        Plan::Fail { status, message } => {
            let kind = if *status == 429 {
                "rate_limit_error"
            } else {
                "server_error"
            };
            Some(error(*status, message, kind, None))
        }
        _ => None,
    }
}

/// OpenAI's automatic prompt caching, simulated for requests with a
/// `prompt_cache_key`: the longest run of leading messages (after the tools)
/// that an earlier request with the same key also began with is read from the
/// cache; its words (a word is a token) are the cached tokens.
fn cached_words(state: &FakeState, body: &Value) -> Option<u64> {
    use std::hash::{DefaultHasher, Hasher};
    let key = body["prompt_cache_key"].as_str()?;
    let mut hash = {
        let mut hasher = DefaultHasher::new();
        hasher.write(key.as_bytes());
        hasher.write(body["tools"].to_string().as_bytes());
        hasher.finish()
    };
    let (mut prefixes, mut total) = (Vec::new(), 0);
    for message in body["messages"].as_array().into_iter().flatten() {
        let mut hasher = DefaultHasher::new();
        hasher.write_u64(hash);
        hasher.write(message.to_string().as_bytes());
        hash = hasher.finish();
        total += script::words(&text_of(&message["content"]));
        prefixes.push((hash, total));
    }
    let mut cache = state.prompt_cache.lock().ok()?;
    let read = prefixes
        .iter()
        .rev()
        .find(|(hash, _)| cache.contains(hash))
        .map_or(0, |(_, words)| *words);
    cache.extend(prefixes.iter().map(|(hash, _)| *hash));
    Some(read)
}

fn chunk(model: &str, delta: Value, finish: Option<&str>) -> Value {
    json!({
        "id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1_700_000_000u64, "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": null}],
    })
}

fn stream(state: Arc<FakeState>, plan: Plan, model: String, usage: Value, include_usage: bool) -> Response {
    let slow = script::is_slow(&model);
    let mut chunks = vec![chunk(&model, json!({"role": "assistant", "content": ""}), None)];
    let finish = match plan {
        Plan::Reply(text) => {
            chunks.extend(
                script::pieces(&text)
                    .into_iter()
                    .map(|p| chunk(&model, json!({"content": p}), None)),
            );
            "stop"
        }
        Plan::CallTools(calls) => {
            for (index, call) in calls.iter().enumerate() {
                let args = call.arguments.to_string();
                let (a, b) = args.split_at(args.len() / 2);
                chunks.push(chunk(&model, json!({"tool_calls": [{"index": index, "id": call.id, "type": "function", "function": {"name": call.name, "arguments": ""}}]}), None));
                for part in [a, b] {
                    chunks.push(chunk(
                        &model,
                        json!({"tool_calls": [{"index": index, "function": {"arguments": part}}]}),
                        None,
                    ));
                }
            }
            "tool_calls"
        }
        Plan::Fail { .. } | Plan::NotFound => "stop",
    };
    chunks.push(chunk(&model, json!({}), Some(finish)));
    if include_usage {
        chunks.push(json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1_700_000_000u64, "model": model, "choices": [], "usage": usage}));
    }
    let events = async_stream::stream! {
        let mut guard = StreamGuard::new(state);
        for chunk in chunks {
            if slow {
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
            yield Ok::<_, std::convert::Infallible>(Bytes::from(format!("data: {chunk}\n\n")));
        }
        yield Ok(Bytes::from_static(b"data: [DONE]\n\n"));
        guard.complete();
    };
    (
        [(header::CONTENT_TYPE, "text/event-stream")],
        Body::from_stream(events),
    )
        .into_response()
}

pub(crate) async fn models(State(state): State<Arc<FakeState>>, headers: HeaderMap) -> Response {
    if let Some(denied) = check_auth(&state, &headers) {
        return denied;
    }
    let data: Vec<Value> = script::MODELS
        .iter()
        .chain(script::EMBEDDING_MODELS.iter().map(|(name, _)| name))
        .map(|m| json!({"id": m, "object": "model", "created": 1_700_000_000u64, "owned_by": "fake"}))
        .collect();
    axum::Json(json!({"object": "list", "data": data})).into_response()
}

pub(crate) async fn embeddings(
    State(state): State<Arc<FakeState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body = match accept(&state, &headers, &body) {
        Ok(body) => body,
        Err(refused) => return *refused,
    };
    let model = body["model"].as_str().unwrap_or_default();
    if state.embed_down.load(std::sync::atomic::Ordering::SeqCst) {
        return error(503, "embedding service is down", "server_error", None);
    }
    let Some(default_dimensions) = script::embedding_dimensions(model) else {
        let message = format!("The model `{model}` does not exist or you do not have access to it.");
        return error(404, &message, "invalid_request_error", Some("model_not_found"));
    };
    let inputs: Vec<String> = match &body["input"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items
            .iter()
            .map(|i| i.as_str().map(String::from).unwrap_or_else(|| i.to_string()))
            .collect(),
        _ => {
            return error(
                400,
                "'input' is a required property",
                "invalid_request_error",
                None,
            );
        }
    };
    let dimensions = body["dimensions"]
        .as_u64()
        .map_or(default_dimensions, |d| d as usize);
    let base64 = body["encoding_format"].as_str() == Some("base64");
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(index, text)| {
            let vector = script::embed(text, dimensions);
            let embedding = if base64 {
                let bytes: Vec<u8> = vector.iter().flat_map(|v| v.to_le_bytes()).collect();
                json!(base64::engine::general_purpose::STANDARD.encode(bytes))
            } else {
                json!(vector)
            };
            json!({"object": "embedding", "index": index, "embedding": embedding})
        })
        .collect();
    let tokens: u64 = inputs.iter().map(|t| script::words(t)).sum();
    axum::Json(json!({
        "object": "list", "data": data, "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens}
    }))
    .into_response()
}
