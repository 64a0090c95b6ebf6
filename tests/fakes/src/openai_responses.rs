//! The fake OpenAI's Responses API: `POST /v1/responses` (JSON, or SSE with
//! `event:` lines and `sequence_number`s, no `[DONE]`), function calls and
//! their outputs, usage, `instructions`, and `previous_response_id` answered
//! like OpenAI: it keeps every response it made (unless `store: false`) and
//! answers 404 `previous_response_not_found` for one it does not know. Tools
//! in a `namespace` (how the Codex CLI offers an MCP server's tools) are seen
//! as `{namespace}__{name}` and called with the `namespace` field.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::openai::{accept, refusal, text_of};
use crate::script::{self, Plan, Turn};
use crate::{FakeState, StreamGuard};

/// The input as items (a string is one user message).
fn items_of(input: &Value) -> Vec<Value> {
    match input {
        Value::String(text) => vec![json!({"type": "message", "role": "user", "content": text})],
        Value::Array(items) => items.clone(),
        _ => Vec::new(),
    }
}

/// (role, text) of an item as the script reads it; function results are `tool`.
fn role_text(item: &Value) -> Option<(String, String)> {
    match item["type"].as_str().unwrap_or("message") {
        "message" => Some((
            item["role"].as_str().unwrap_or_default().to_string(),
            script::without_context(&text_of(&item["content"])),
        )),
        "function_call" => Some(("assistant".into(), String::new())),
        "function_call_output" => Some(("tool".into(), text_of(&item["output"]))),
        _ => None,
    }
}

fn turn(body: &Value, conversation: &[Value]) -> Turn {
    let mut history: Vec<(String, String)> = Vec::new();
    if let Some(instructions) = body["instructions"].as_str() {
        history.push(("system".into(), instructions.to_string()));
    }
    history.extend(conversation.iter().filter_map(role_text));
    let (last_role, last_text) = history.last().cloned().unwrap_or_default();
    Turn {
        model: body["model"].as_str().unwrap_or_default().to_string(),
        last_role,
        last_text,
        tool_names: body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(tool_names)
            .collect(),
        prompt_words: history.iter().map(|(_, text)| script::words(text)).sum(),
        history,
    }
}

/// A tool's name, or each of a namespace's tools as `{namespace}__{name}`.
fn tool_names(tool: &Value) -> Vec<String> {
    let name = tool["name"].as_str().unwrap_or_default();
    if tool["type"] != "namespace" {
        return vec![name.to_string()];
    }
    tool["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .map(|inner| format!("{name}__{inner}"))
        .collect()
}

/// The `namespace` and `name` a call of `qualified` goes out with.
fn split_namespace(tools: &Value, qualified: &str) -> (Option<String>, String) {
    for tool in tools.as_array().into_iter().flatten() {
        let namespace = tool["name"].as_str().unwrap_or_default();
        if tool["type"] == "namespace"
            && let Some(inner) = qualified.strip_prefix(&format!("{namespace}__"))
        {
            return (Some(namespace.to_string()), inner.to_string());
        }
    }
    (None, qualified.to_string())
}

fn output_items(state: &FakeState, plan: &Plan, tools: &Value) -> Vec<Value> {
    let n = state.attempt("response-item-ids");
    match plan {
        Plan::Reply(text) => vec![
            json!({"id": format!("msg_fake_{n}"), "type": "message", "status": "completed",
            "role": "assistant", "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]}),
        ],
        Plan::CallTools(calls) => calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let (namespace, name) = split_namespace(tools, &c.name);
                let mut item = json!({"id": format!("fc_fake_{n}_{i}"), "type": "function_call", "status": "completed",
                "call_id": c.id, "name": name, "arguments": c.arguments.to_string()});
                if let Some(namespace) = namespace {
                    item["namespace"] = json!(namespace);
                }
                item
            })
            .collect(),
        Plan::Fail { .. } | Plan::NotFound => Vec::new(),
    }
}

pub async fn create(State(state): State<Arc<FakeState>>, headers: HeaderMap, body: Bytes) -> Response {
    let body = match accept(&state, &headers, &body) {
        Ok(body) => body,
        Err(refused) => return *refused,
    };
    let mut conversation = Vec::new();
    if let Some(previous) = body["previous_response_id"].as_str() {
        let stored = state.responses.lock().ok().and_then(|r| r.get(previous).cloned());
        match stored {
            Some(items) => conversation = items,
            None => {
                let message = format!("Previous response with id '{previous}' not found.");
                let body = json!({"error": {"message": message, "type": "invalid_request_error",
                    "param": "previous_response_id", "code": "previous_response_not_found"}});
                return (axum::http::StatusCode::NOT_FOUND, axum::Json(body)).into_response();
            }
        }
    }
    conversation.extend(items_of(&body["input"]));
    let turn = turn(&body, &conversation);
    let plan = script::plan(&state, &turn);
    if let Some(refused) = refusal(&plan, &turn.model) {
        return refused;
    }
    let output = output_items(&state, &plan, &body["tools"]);
    let id = format!("resp_fake_{}", state.attempt("response-ids"));
    if body["store"].as_bool() != Some(false)
        && let Ok(mut responses) = state.responses.lock()
    {
        let mut kept = conversation;
        kept.extend(output.iter().cloned());
        responses.insert(id.clone(), kept);
    }
    let (input_tokens, output_tokens) = (turn.prompt_words, plan.completion_words());
    let response = json!({
        "id": id, "object": "response", "created_at": 1_700_000_000u64, "status": "completed",
        "background": false, "error": null, "incomplete_details": null,
        "instructions": body["instructions"], "max_output_tokens": body["max_output_tokens"],
        "metadata": body.get("metadata").cloned().unwrap_or(json!({})), "model": turn.model,
        "output": output, "parallel_tool_calls": true, "previous_response_id": body["previous_response_id"],
        "reasoning": {"effort": null, "summary": null}, "store": body["store"].as_bool().unwrap_or(true),
        "temperature": 1.0, "text": {"format": {"type": "text"}}, "tool_choice": "auto",
        "tools": body.get("tools").cloned().unwrap_or(json!([])), "top_p": 1.0, "truncation": "disabled",
        "usage": {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens},
        "user": null,
    });
    if body["stream"].as_bool() == Some(true) {
        return stream(state, response);
    }
    axum::Json(response).into_response()
}

/// The events OpenAI sends for `response`, one item after the other.
fn events(response: &Value) -> Vec<Value> {
    let mut started = response.clone();
    started["status"] = json!("in_progress");
    started["output"] = json!([]);
    started["usage"] = Value::Null;
    let mut events = vec![
        json!({"type": "response.created", "response": started}),
        json!({"type": "response.in_progress", "response": started}),
    ];
    for (index, item) in response["output"].as_array().into_iter().flatten().enumerate() {
        let id = &item["id"];
        let mut added = item.clone();
        added["status"] = json!("in_progress");
        if item["type"] == "message" {
            added["content"] = json!([]);
            events.push(json!({"type": "response.output_item.added", "output_index": index, "item": added}));
            let text = item["content"][0]["text"].as_str().unwrap_or_default();
            let empty = json!({"type": "output_text", "text": "", "annotations": [], "logprobs": []});
            events.push(json!({"type": "response.content_part.added", "item_id": id, "output_index": index, "content_index": 0, "part": empty}));
            for piece in script::pieces(text) {
                events.push(json!({"type": "response.output_text.delta", "item_id": id, "output_index": index, "content_index": 0, "delta": piece, "logprobs": []}));
            }
            events.push(json!({"type": "response.output_text.done", "item_id": id, "output_index": index, "content_index": 0, "text": text, "logprobs": []}));
            events.push(json!({"type": "response.content_part.done", "item_id": id, "output_index": index, "content_index": 0, "part": item["content"][0]}));
        } else {
            added["arguments"] = json!("");
            events.push(json!({"type": "response.output_item.added", "output_index": index, "item": added}));
            let arguments = item["arguments"].as_str().unwrap_or_default();
            let (a, b) = arguments.split_at(arguments.len() / 2);
            for piece in [a, b] {
                events.push(json!({"type": "response.function_call_arguments.delta", "item_id": id, "output_index": index, "delta": piece}));
            }
            events.push(json!({"type": "response.function_call_arguments.done", "item_id": id, "output_index": index, "name": item["name"], "arguments": arguments}));
        }
        events.push(json!({"type": "response.output_item.done", "output_index": index, "item": item}));
    }
    events.push(json!({"type": "response.completed", "response": response}));
    for (n, event) in events.iter_mut().enumerate() {
        event["sequence_number"] = json!(n);
    }
    events
}

fn stream(state: Arc<FakeState>, response: Value) -> Response {
    let slow = script::is_slow(response["model"].as_str().unwrap_or_default());
    let events = events(&response);
    let body = async_stream::stream! {
        let mut guard = StreamGuard::new(state);
        for event in events {
            if slow {
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
            let kind = event["type"].as_str().unwrap_or_default().to_string();
            yield Ok::<_, std::convert::Infallible>(Bytes::from(format!("event: {kind}\ndata: {event}\n\n")));
        }
        guard.complete();
    };
    (
        [(header::CONTENT_TYPE, "text/event-stream")],
        Body::from_stream(body),
    )
        .into_response()
}
