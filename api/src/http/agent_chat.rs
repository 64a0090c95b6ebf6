//! Chat completions answered by an agent (`"model": "onyx:{id}"` or the
//! `x-onyx-agent-id` header): the run's text streams as ordinary OpenAI
//! chunks; tool activity rides in an extra `x_onyx` field that OpenAI clients
//! ignore. Every agent turn is kept in a session (a new one unless
//! `x-onyx-session-id` names one).

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{Value, json};

use super::chat_session::{SESSION_HEADER, source, split_system};
use super::error::ApiError;
use super::sse;
use super::views::ToolActivity;
use crate::agents::{AgentError, Event, Outcome, RunRequest};
use crate::app::App;
use crate::sessions::recorder;

pub const AGENT_HEADER: &str = "x-onyx-agent-id";
const MEMORY_HEADER: &str = "x-onyx-include-memory";

/// The agent a request names, if any.
pub fn agent_of(headers: &HeaderMap, model: &str) -> Option<String> {
    headers
        .get(AGENT_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .or_else(|| model.strip_prefix("onyx:").map(String::from))
}

pub async fn run(
    app: Arc<App>,
    headers: &HeaderMap,
    body: Value,
    agent_id: &str,
    session_ref: Option<String>,
) -> Result<Response, ApiError> {
    let agent = app
        .agents
        .registry
        .get(agent_id)
        .await?
        .filter(|a| a.enabled)
        .ok_or_else(|| ApiError::NotFound {
            message: format!("no enabled agent {agent_id:?}; GET /v1/agents lists them"),
            code: "model_not_found",
        })?;
    app.agents.prepare(&agent).await?;
    let session = match session_ref.as_deref() {
        Some("new") | None => app.sessions.create(&agent.id, &source(headers)).await?,
        Some(id) => app.sessions.get(id).await?,
    };
    let history = app.sessions.messages(&session).await.unwrap_or_default();
    let client: Vec<Value> = body["messages"].as_array().cloned().unwrap_or_default();
    let (client_system, client_rest) = split_system(client);
    let turn = recorder::client_messages(&client_rest);
    let messages: Vec<Value> = history.iter().map(|m| m.to_openai()).chain(client_rest).collect();
    let stream = body["stream"].as_bool() == Some(true);
    let include_usage = body["stream_options"]["include_usage"].as_bool() == Some(true);
    let include_memory = headers
        .get(MEMORY_HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| matches!(v.trim(), "1" | "true" | "yes" | "on"));
    let request = RunRequest {
        agent,
        messages,
        client_system,
        client_tools: body["tools"].as_array().cloned().unwrap_or_default(),
        turn,
        session: Some(session.clone()),
        include_memory,
        attended: true,
        stream,
        temperature: body["temperature"].as_f64(),
        max_tokens: body["max_tokens"]
            .as_u64()
            .or_else(|| body["max_completion_tokens"].as_u64())
            .map(|m| m as u32),
    };
    let events = app.agents.run(request);
    let id = format!("chatcmpl-{}", uuid::Uuid::now_v7().simple());
    let model = format!("onyx:{agent_id}");
    let mut response = if stream {
        sse(events, id, model, include_usage)
    } else {
        collect(events, id, model).await?
    };
    if let Ok(value) = HeaderValue::from_str(&session.id) {
        response.headers_mut().insert(SESSION_HEADER, value);
    }
    Ok(response)
}

fn created() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// What `x_onyx` says about one event, if it is tool activity.
fn activity(event: &Event) -> Option<Value> {
    let activity = match event {
        Event::ToolStarted { id, name, arguments } => ToolActivity::ToolCallStarted {
            id: id.clone(),
            name: name.clone(),
            arguments: arguments.clone(),
        },
        Event::ToolFinished {
            id,
            name,
            summary,
            is_error,
        } => ToolActivity::ToolCallFinished {
            id: id.clone(),
            name: name.clone(),
            result_summary: summary.clone(),
            is_error: *is_error,
        },
        Event::ApprovalRequired { id, tool, arguments } => ToolActivity::ApprovalRequired {
            approval_id: id.clone(),
            name: tool.clone(),
            arguments: arguments.clone(),
        },
        _ => return None,
    };
    serde_json::to_value(activity).ok()
}

async fn collect(
    mut events: futures::stream::BoxStream<'static, Event>,
    id: String,
    model: String,
) -> Result<Response, ApiError> {
    let mut log = Vec::new();
    while let Some(event) = events.next().await {
        if let Some(entry) = activity(&event) {
            log.push(entry);
        }
        match event {
            Event::Done(outcome) => {
                let Outcome {
                    content,
                    finish_reason,
                    client_tool_calls,
                    usage,
                    iterations,
                    ..
                } = *outcome;
                let mut message = json!({"role": "assistant", "content": content, "refusal": null});
                if let Some(calls) = client_tool_calls {
                    message["tool_calls"] = calls;
                }
                return Ok(Json(json!({
                    "id": id, "object": "chat.completion", "created": created(), "model": model,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": null}],
                    "usage": usage,
                    "x_onyx": {"events": log, "iterations": iterations},
                }))
                .into_response());
            }
            Event::Failed(err) => return Err(err.into()),
            _ => {}
        }
    }
    Err(AgentError::NoAnswer.into())
}

fn sse(
    events: futures::stream::BoxStream<'static, Event>,
    id: String,
    model: String,
    include_usage: bool,
) -> Response {
    let chunk = move |choices: Value, extra: Option<(&str, Value)>| {
        let mut chunk = json!({"id": id, "object": "chat.completion.chunk", "created": created(), "model": model, "choices": choices});
        if let Some((key, value)) = extra {
            chunk[key] = value;
        }
        sse::json(&chunk)
    };
    let body = async_stream::stream! {
        let mut events = events;
        yield Ok::<_, std::convert::Infallible>(chunk(json!([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]), None));
        while let Some(event) = events.next().await {
            if let Some(entry) = activity(&event) {
                yield Ok(chunk(json!([]), Some(("x_onyx", entry))));
                continue;
            }
            match event {
                Event::Text(text) => {
                    yield Ok(chunk(json!([{"index": 0, "delta": {"content": text}, "finish_reason": null}]), None));
                }
                Event::Done(outcome) => {
                    if let Some(calls) = &outcome.client_tool_calls {
                        let indexed: Vec<Value> = calls.as_array().map(|c| c.as_slice()).unwrap_or_default().iter().enumerate().map(|(i, c)| {
                            let mut c = c.clone();
                            c["index"] = json!(i);
                            c
                        }).collect();
                        yield Ok(chunk(json!([{"index": 0, "delta": {"tool_calls": indexed}, "finish_reason": null}]), None));
                    }
                    yield Ok(chunk(json!([{"index": 0, "delta": {}, "finish_reason": outcome.finish_reason}]), Some(("x_onyx", json!({"type": "run_finished", "iterations": outcome.iterations, "tools_used": outcome.tools_used})))));
                    if include_usage {
                        yield Ok(chunk(json!([]), Some(("usage", json!(outcome.usage)))));
                    }
                }
                Event::Failed(err) => {
                    let error = ApiError::from(err).into_stream_event();
                    yield Ok(sse::json(&error));
                }
                _ => {}
            }
        }
        yield Ok(sse::done());
    };
    sse::response(Body::from_stream(body))
}
