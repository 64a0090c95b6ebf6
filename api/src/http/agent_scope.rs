//! What a key scoped to agents (`POST /v1/keys` with `agents`) may reach: chat
//! (`/v1/chat/completions`, `/v1/responses`, `/v1/messages`) only with one of
//! its agents (`onyx:{agent}` or `x-onyx-agent-id`) and only that agent's
//! sessions and stored responses; `/v1/agents/{agent}…` and `/v1/memory…` of its agents; sessions
//! and runs of its agents; the model list; `/mcp` tool calls for its agents. Everything else is refused with
//! 403: a key that reaches one agent must not see another's history, memory
//! or workspace, nor use the providers directly.

use std::collections::HashMap;

use axum::body::Body;
use axum::extract::{FromRequestParts, MatchedPath, RawPathParams, Request};
use axum::http::request::Parts;
use serde_json::Value;

use super::agent_chat::agent_of;
use super::chat_session::SESSION_HEADER;
use super::error::ApiError;
use crate::agents::MAIN;
use crate::app::App;
use crate::auth::KeyError;
use crate::responses::ResponseStore;

fn refuse(agents: &[String], what: impl std::fmt::Display) -> ApiError {
    KeyError::OutOfScope(format!(
        "this API key is scoped to the agents {}: {what}",
        agents.join(", ")
    ))
    .into()
}

fn allow(agents: &[String], agent: &str) -> Result<(), ApiError> {
    if agents.iter().any(|a| a == agent) {
        Ok(())
    } else {
        Err(refuse(agents, format_args!("agent {agent:?} is not one of them")))
    }
}

fn path_param(params: &RawPathParams, name: &str) -> Option<String> {
    params
        .iter()
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
}

fn query_param(parts: &Parts, name: &str) -> Option<String> {
    let query = parts.uri.query().unwrap_or_default();
    url::form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
        .filter(|v| !v.trim().is_empty())
}

/// Checks `req` against the scope; the request (its body read and put back) when allowed.
pub async fn check(app: &App, req: Request, agents: &[String]) -> Result<Request, ApiError> {
    let (mut parts, body) = req.into_parts();
    let route = parts
        .extensions
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_default();
    let params = RawPathParams::from_request_parts(&mut parts, &())
        .await
        .ok()
        .map(|p| path_param_map(&p))
        .unwrap_or_default();
    let mut body = Some(body);
    match route.as_str() {
        "/v1/models" => {}
        "/v1/chat/completions" | "/v1/responses" | "/v1/messages" | "/v1/messages/count_tokens" => {
            let (json, bytes) = read_json(app, body.take()).await?;
            let model = json.get("model").and_then(Value::as_str).unwrap_or_default();
            let Some(agent) = agent_of(&parts.headers, model) else {
                return Err(refuse(agents, "use model \"onyx:<agent>\" with one of them"));
            };
            allow(agents, &agent)?;
            let session = parts
                .headers
                .get(SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(String::from)
                .or_else(|| json.get(SESSION_HEADER).and_then(Value::as_str).map(String::from));
            if let Some(session) = session.filter(|s| s.trim() != "new") {
                session_agent(app, agents, session.trim()).await?;
            }
            if let Some(previous) = json.get("previous_response_id").and_then(Value::as_str) {
                previous_response_agent(app, agents, previous).await?;
            }
            body = Some(Body::from(bytes));
        }
        // MCP tool calls run as their `agent` argument, else the key's first agent.
        "/mcp" => {
            let (json, bytes) = read_json(app, body.take()).await?;
            let messages = match json {
                Value::Array(messages) => messages,
                message => vec![message],
            };
            for message in &messages {
                if let Some(agent) = message["params"]["arguments"]["agent"].as_str() {
                    allow(agents, agent)?;
                }
            }
            body = Some(Body::from(bytes));
        }
        "/v1/agents/{id}" | "/v1/agents/{id}/files/{name}" => {
            allow(agents, params.get("id").map_or("", String::as_str))?;
        }
        "/v1/memory/files/{agent}/{*path}" => {
            allow(agents, params.get("agent").map_or("", String::as_str))?;
        }
        "/v1/memory/files" | "/v1/memory/search" | "/v1/memory/status" | "/v1/memory/sync" => {
            allow(
                agents,
                &query_param(&parts, "agent").unwrap_or_else(|| MAIN.into()),
            )?;
        }
        "/v1/memory" => {
            let (json, bytes) = read_json(app, body.take()).await?;
            allow(agents, json.get("agent").and_then(Value::as_str).unwrap_or(MAIN))?;
            body = Some(Body::from(bytes));
        }
        "/v1/sessions" | "/v1/runs" => match query_param(&parts, "agent") {
            Some(agent) => allow(agents, &agent)?,
            None => return Err(refuse(agents, "name one with ?agent=")),
        },
        "/v1/sessions/{id}" | "/v1/sessions/{id}/export" | "/v1/sessions/{id}/compact" => {
            session_agent(app, agents, params.get("id").map_or("", String::as_str)).await?;
        }
        "/v1/runs/{id}" | "/v1/runs/{id}/cancel" | "/v1/runs/{id}/events" => {
            let id = params.get("id").map_or("", String::as_str);
            if let Ok(Some(run)) = app.agents.runs.store().get(id).await {
                allow(agents, &run.agent)?;
            }
        }
        other => return Err(refuse(agents, format_args!("{other} is not open to it"))),
    }
    Ok(Request::from_parts(parts, body.unwrap_or_default()))
}

fn path_param_map(params: &RawPathParams) -> HashMap<String, String> {
    ["id", "agent"]
        .into_iter()
        .filter_map(|name| path_param(params, name).map(|v| (name.to_string(), v)))
        .collect()
}

/// A session that exists must belong to one of the agents (one that does not
/// is the handler's 404).
async fn session_agent(app: &App, agents: &[String], id: &str) -> Result<(), ApiError> {
    match app.sessions.get(id).await {
        Ok(session) => allow(agents, &session.agent_id),
        Err(_) => Ok(()),
    }
}

/// A stored response the request continues must be one of the agents' own
/// (its `model` is `onyx:{agent}`); one that does not exist is the handler's 404.
async fn previous_response_agent(app: &App, agents: &[String], id: &str) -> Result<(), ApiError> {
    let Ok(Some(stored)) = ResponseStore::new(app.db.clone()).get(id).await else {
        return Ok(());
    };
    let model = stored.response["model"].as_str().unwrap_or_default();
    match model.strip_prefix("onyx:") {
        Some(agent) => allow(agents, agent),
        None => Err(refuse(
            agents,
            "previous_response_id names a response of no agent of it",
        )),
    }
}

/// The body, read (up to the body limit) and parsed; `Null` when it is not JSON.
async fn read_json(app: &App, body: Option<Body>) -> Result<(Value, bytes::Bytes), ApiError> {
    let bytes = axum::body::to_bytes(body.unwrap_or_default(), app.max_body_bytes)
        .await
        .map_err(|_| ApiError::PayloadTooLarge {
            limit: app.max_body_bytes,
        })?;
    let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Ok((json, bytes))
}
