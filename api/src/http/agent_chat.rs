//! Chat completions answered by an agent (`"model": "onyx:{id}"` or the
//! `x-onyx-agent-id` header). The request starts a durable run
//! (`x-onyx-run-id` names it) and the response follows it (`run_events`):
//! a client that hangs up leaves the run working. Every agent turn is kept in
//! a session (a new one unless `x-onyx-session-id` names one).

use std::sync::Arc;

use axum::http::{HeaderMap, HeaderValue};
use axum::response::Response;
use serde_json::Value;

use super::chat_session::{SESSION_HEADER, source, split_system};
use super::error::ApiError;
use super::run_events::{self, RUN_HEADER};
use crate::agents::RunRequest;
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
    let source = source(headers);
    let session = match session_ref.as_deref() {
        Some("new") | None => app.sessions.create(&agent.id, &source).await?,
        Some(id) => app.sessions.get(id).await?,
    };
    let history = app.sessions.history(&session).await.unwrap_or_default();
    let client: Vec<Value> = body["messages"].as_array().cloned().unwrap_or_default();
    let (client_system, client_rest) = split_system(client);
    let turn = recorder::client_messages(&client_rest);
    let stream = body["stream"].as_bool() == Some(true);
    let include_usage = body["stream_options"]["include_usage"].as_bool() == Some(true);
    let include_memory = headers
        .get(MEMORY_HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| matches!(v.trim(), "1" | "true" | "yes" | "on"));
    let request = RunRequest {
        agent,
        history,
        messages: client_rest,
        client_system,
        client_tools: body["tools"].as_array().cloned().unwrap_or_default(),
        turn,
        session: Some(session.clone()),
        source,
        include_memory,
        ask_in: None,
        stream,
        temperature: body["temperature"].as_f64(),
        max_tokens: body["max_tokens"]
            .as_u64()
            .or_else(|| body["max_completion_tokens"].as_u64())
            .map(|m| m as u32),
    };
    let run = app.agents.start_run(request).await?;
    let mut response = if stream {
        run_events::sse(&run, include_usage)
    } else {
        run_events::collect(&run).await?
    };
    let headers = response.headers_mut();
    for (name, value) in [(SESSION_HEADER, &session.id), (RUN_HEADER, &run.id)] {
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.insert(name, value);
        }
    }
    Ok(response)
}
