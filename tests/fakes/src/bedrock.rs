//! A fake AWS Bedrock Runtime: `POST /model/{modelId}/converse` (JSON) and
//! `/model/{modelId}/converse-stream` (the binary event stream of
//! [`crate::eventstream`]), the model id percent-encoded in the path as the
//! SDK sends it (`us.anthropic.fake-echo:0`; the fake model that answers is
//! the id without its `vendor.` prefixes and `:N` version).
//!
//! Every request must be signed with SigV4 for [`ACCESS_KEY_ID`] and
//! [`SECRET_ACCESS_KEY`] (checked by [`crate::sigv4`]), or carry the fake's
//! key as a Bedrock API key (`Authorization: Bearer`). Refusals and failures
//! come in Bedrock's error shape: the status, `x-amzn-ErrorType` and
//! `{"message"}`. Answers follow [`crate::script`]; recorded bodies get the
//! decoded model id as `modelId`. `fake-midstream-throttle` starts a
//! stream, then fails it with a `throttlingException` event, as Bedrock does
//! when a stream hits a quota.

/// The model whose stream fails after its first words.
pub const MIDSTREAM_THROTTLE: &str = "fake-midstream-throttle";

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{OriginalUri, Path, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

use crate::eventstream;
use crate::script::{self, Plan, Turn};
use crate::{FakeServer, FakeState, StreamGuard};

/// The AWS credentials the fake accepts (also printed by `onyx-fake-upstream`).
pub const ACCESS_KEY_ID: &str = "AKIAFAKEUPSTREAM0001";
pub const SECRET_ACCESS_KEY: &str = "fakeUpstreamSecretAccessKey/0001+bedrock";

pub async fn start(key: Option<String>, port: u16) -> std::io::Result<FakeServer> {
    let state = FakeState::new(key);
    let routes = Router::new().route("/model/{model}/{operation}", post(call));
    crate::serve(routes, state, port).await
}

pub fn aws_error(status: u16, code: &str, message: &str) -> Response {
    let http = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        http,
        [("x-amzn-errortype", code), ("content-type", "application/json")],
        json!({"message": message}).to_string(),
    )
        .into_response()
}

fn authenticate(
    state: &FakeState,
    method: &Method,
    uri: &axum::http::Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Option<Response> {
    let authorization = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    if let Some(token) = authorization.and_then(|a| a.strip_prefix("Bearer ")) {
        return (!crate::authorized(state, Some(token))).then(|| {
            aws_error(
                403,
                "UnrecognizedClientException",
                "Invalid API Key format: Must start with pre-defined prefix",
            )
        });
    }
    let request = crate::sigv4::Request {
        method: method.as_str(),
        raw_path: uri.path(),
        raw_query: uri.query().unwrap_or_default(),
        headers: headers
            .iter()
            .filter_map(|(n, v)| Some((n.as_str().to_ascii_lowercase(), v.to_str().ok()?.to_string())))
            .collect(),
        body,
    };
    crate::sigv4::verify(&request, ACCESS_KEY_ID, SECRET_ACCESS_KEY, "bedrock")
        .err()
        .map(|refusal| aws_error(403, refusal.code, &refusal.message))
}

/// `us.anthropic.fake-echo:0` → `fake-echo`.
fn fake_model(model_id: &str) -> &str {
    let without_version = model_id.split(':').next().unwrap_or_default();
    without_version.rsplit('.').next().unwrap_or_default()
}

fn block_text(block: &Value) -> Option<String> {
    if let Some(text) = block["text"].as_str() {
        return Some(text.to_string());
    }
    let result = block.get("toolResult")?;
    let texts: Vec<&str> = result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect();
    Some(texts.join(" "))
}

fn message_text(message: &Value) -> (String, &'static str) {
    let blocks = message["content"].as_array().cloned().unwrap_or_default();
    let text: Vec<String> = blocks.iter().filter_map(block_text).collect();
    let role = if blocks.iter().any(|b| b.get("toolResult").is_some()) {
        "tool"
    } else if message["role"] == "assistant" {
        "assistant"
    } else {
        "user"
    };
    (text.join(" "), role)
}

fn turn(model: &str, body: &Value) -> Turn {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let (last_text, last_role) = messages.last().map(message_text).unwrap_or_default();
    let system_words: u64 = body["system"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b["text"].as_str())
        .map(script::words)
        .sum();
    Turn {
        model: model.to_string(),
        last_role: last_role.to_string(),
        last_text: script::without_context(&last_text),
        tool_names: body["toolConfig"]["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["toolSpec"]["name"].as_str().map(String::from))
            .collect(),
        prompt_words: messages
            .iter()
            .map(|m| script::words(&message_text(m).0))
            .sum::<u64>()
            + system_words,
        history: messages
            .iter()
            .map(|m| {
                let (text, role) = message_text(m);
                (role.to_string(), script::without_context(&text))
            })
            .collect(),
    }
}

async fn call(
    State(state): State<Arc<FakeState>>,
    Path((model_id, operation)): Path<(String, String)>,
    method: Method,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(denied) = authenticate(&state, &method, &uri, &headers, &body) {
        return denied;
    }
    let Ok(mut body) = serde_json::from_slice::<Value>(&body) else {
        return aws_error(400, "SerializationException", "the request body is not JSON");
    };
    body["modelId"] = json!(model_id);
    state.record(&body);
    if body["messages"].as_array().is_none_or(Vec::is_empty) {
        return aws_error(400, "ValidationException", "The messages field is required.");
    }
    let model = fake_model(&model_id);
    if model == MIDSTREAM_THROTTLE && operation == "converse-stream" {
        return midstream_throttle(state);
    }
    let turn = turn(model, &body);
    let plan = script::plan(&state, &turn);
    match &plan {
        Plan::NotFound => {
            return aws_error(
                400,
                "ValidationException",
                "The provided model identifier is invalid.",
            );
        }
        Plan::Fail { status: 429, message } => return aws_error(429, "ThrottlingException", message),
        Plan::Fail { status: 503, message } => return aws_error(503, "ServiceUnavailableException", message),
        Plan::Fail { status, message } => return aws_error(*status, "InternalServerException", message),
        Plan::Reply(_) | Plan::CallTools(_) => {}
    }
    let completion_words = plan.completion_words();
    let usage = json!({"inputTokens": turn.prompt_words, "outputTokens": completion_words,
        "totalTokens": turn.prompt_words + completion_words});
    match operation.as_str() {
        "converse" => converse(plan, usage),
        "converse-stream" => converse_stream(state, model, plan, usage),
        _ => aws_error(404, "UnknownOperationException", "no such operation"),
    }
}

fn converse(plan: Plan, usage: Value) -> Response {
    let (content, stop): (Vec<Value>, &str) = match plan {
        Plan::CallTools(calls) => (
            calls
                .iter()
                .map(|c| json!({"toolUse": {"toolUseId": c.id, "name": c.name, "input": c.arguments}}))
                .collect(),
            "tool_use",
        ),
        Plan::Reply(text) => (vec![json!({"text": text})], "end_turn"),
        Plan::Fail { .. } | Plan::NotFound => (Vec::new(), "end_turn"),
    };
    axum::Json(json!({
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop, "usage": usage, "metrics": {"latencyMs": 1},
    }))
    .into_response()
}

fn converse_stream(state: Arc<FakeState>, model: &str, plan: Plan, usage: Value) -> Response {
    let slow = script::is_slow(model);
    let mut events = vec![eventstream::event("messageStart", &json!({"role": "assistant"}))];
    let stop = match plan {
        Plan::CallTools(calls) => {
            for (index, call) in calls.iter().enumerate() {
                let arguments = call.arguments.to_string();
                let (first, rest) = arguments.split_at(arguments.len() / 2);
                events.push(eventstream::event(
                    "contentBlockStart",
                    &json!({"contentBlockIndex": index, "start": {"toolUse": {"toolUseId": call.id, "name": call.name}}}),
                ));
                for piece in [first, rest] {
                    events.push(eventstream::event(
                        "contentBlockDelta",
                        &json!({"contentBlockIndex": index, "delta": {"toolUse": {"input": piece}}}),
                    ));
                }
                events.push(eventstream::event(
                    "contentBlockStop",
                    &json!({"contentBlockIndex": index}),
                ));
            }
            "tool_use"
        }
        Plan::Reply(text) => {
            for piece in script::pieces(&text) {
                events.push(eventstream::event(
                    "contentBlockDelta",
                    &json!({"contentBlockIndex": 0, "delta": {"text": piece}}),
                ));
            }
            events.push(eventstream::event(
                "contentBlockStop",
                &json!({"contentBlockIndex": 0}),
            ));
            "end_turn"
        }
        Plan::Fail { .. } | Plan::NotFound => "end_turn",
    };
    events.push(eventstream::event("messageStop", &json!({"stopReason": stop})));
    events.push(eventstream::event(
        "metadata",
        &json!({"usage": usage, "metrics": {"latencyMs": 1}}),
    ));
    let body = async_stream::stream! {
        let mut guard = StreamGuard::new(state);
        for event in events {
            if slow {
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
            yield Ok::<_, std::convert::Infallible>(Bytes::from(event));
        }
        guard.complete();
    };
    (
        [(header::CONTENT_TYPE, "application/vnd.amazon.eventstream")],
        Body::from_stream(body),
    )
        .into_response()
}

fn midstream_throttle(state: Arc<FakeState>) -> Response {
    let frames = [
        eventstream::event("messageStart", &json!({"role": "assistant"})),
        eventstream::event(
            "contentBlockDelta",
            &json!({"contentBlockIndex": 0, "delta": {"text": "partial"}}),
        ),
        eventstream::exception(
            "throttlingException",
            "Too many tokens per minute, please wait before trying again.",
        ),
    ];
    let body = async_stream::stream! {
        let mut guard = StreamGuard::new(state);
        for frame in frames {
            yield Ok::<_, std::convert::Infallible>(Bytes::from(frame));
        }
        guard.complete();
    };
    (
        [(header::CONTENT_TYPE, "application/vnd.amazon.eventstream")],
        Body::from_stream(body),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_ids_and_profiles_name_the_fake_model() {
        assert_eq!(fake_model("fake-echo"), "fake-echo");
        assert_eq!(fake_model("us.anthropic.fake-tools:0"), "fake-tools");
    }
}
