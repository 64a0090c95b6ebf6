//! Onyx as an MCP server at `/mcp` (the streamable HTTP transport, answering
//! each POSTed JSON-RPC message with JSON; no server-initiated stream, so GET
//! is 405). Its tools are the agents' own: `memory_search`, `memory_get`,
//! `memory_write`, `sessions_list`, `sessions_history`, `send_to_agent`,
//! `schedule_task`, `list_tasks`, each run as the agent named by its `agent`
//! argument, else the key's first agent (a key scoped to agents), else
//! `main`. Bearer auth applies as on every route; every call's agent is
//! checked against the caller's reach before any call of the message runs.
//!
//! A run token (a subscription model's CLI during one agent run) gets that
//! run's whole toolset instead, for its permission mode, each call made by
//! the run (`Agents::call_for_run`: approvals, events, the session's record).

use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{Map, Value, json};

use super::agent_scope::{AgentReach, CheckedAgent};
use super::body::JsonBytes;
use super::error::ApiError;
use crate::agents::tools::{self, ToolSpec};
use crate::app::App;
use crate::auth::RunGrant;

/// The protocol versions this server speaks, newest first.
const VERSIONS: [&str; 3] = ["2025-06-18", "2025-03-26", "2024-11-05"];

fn offered(app: &App) -> Vec<ToolSpec> {
    tools::over_mcp(app.agents.tool_settings())
}

/// A tool's schema with the `agent` argument added.
fn input_schema(spec: &ToolSpec) -> Value {
    let mut schema = spec.parameters.clone();
    if let Some(properties) = schema["properties"].as_object_mut() {
        properties.insert(
            "agent".into(),
            json!({"type": "string", "description": "The agent whose memory, sessions and tasks to use (default: main, or the key's agent)"}),
        );
    }
    schema
}

fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn error(id: &Value, code: i64, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}})
}

/// `POST /mcp`: one JSON-RPC message (or a batch); notifications get 202.
/// A batch naming any agent out of the caller's reach is refused whole (403).
pub async fn post(
    State(app): State<Arc<App>>,
    reach: AgentReach,
    grant: Option<Extension<RunGrant>>,
    JsonBytes(body): JsonBytes,
) -> Result<Response, ApiError> {
    let grant = grant.map(|Extension(grant)| grant);
    let body: Value = match serde_json::from_slice(&body) {
        Ok(body) => body,
        Err(err) => {
            let answer = error(&Value::Null, -32700, format!("the body is not JSON: {err}"));
            return Ok((StatusCode::BAD_REQUEST, Json(answer)).into_response());
        }
    };
    let (messages, batch) = match body {
        Value::Array(messages) => (messages, true),
        message => (vec![message], false),
    };
    let agents = messages
        .iter()
        .map(|message| call_agent(&reach, message))
        .collect::<Result<Vec<_>, _>>()?;
    let mut answers = Vec::new();
    for (message, agent) in messages.into_iter().zip(agents) {
        if let Some(answer) = handle(&app, grant.as_ref(), &agent, message).await {
            answers.push(answer);
        }
    }
    Ok(match (answers.is_empty(), batch) {
        (true, _) => StatusCode::ACCEPTED.into_response(),
        (false, true) => Json(Value::Array(answers)).into_response(),
        (false, false) => Json(answers.remove(0)).into_response(),
    })
}

/// The agent a message's tool call runs as: its `agent` argument, else the
/// caller's default agent, checked against the caller's reach. A non-string
/// `agent` is left for `call` to answer with a JSON-RPC error.
fn call_agent(reach: &AgentReach, message: &Value) -> Result<Result<CheckedAgent, String>, ApiError> {
    match &message["params"]["arguments"]["agent"] {
        Value::Null => Ok(Ok(reach.default_agent())),
        Value::String(agent) => reach.check(agent).map(Ok),
        _ => Ok(Err("arguments.agent must be a string".into())),
    }
}

/// `GET` and `DELETE /mcp`: this server opens no stream and keeps no session.
pub async fn not_offered() -> Response {
    (
        StatusCode::METHOD_NOT_ALLOWED,
        [(header::ALLOW, "POST")],
        Json(json!({"error": {"message": "this MCP server answers POSTed messages only (no server-initiated stream)", "type": "invalid_request_error", "code": "method_not_allowed"}})),
    )
        .into_response()
}

/// Answers one message; `None` for a notification or a response.
async fn handle(
    app: &App,
    grant: Option<&RunGrant>,
    agent: &Result<CheckedAgent, String>,
    message: Value,
) -> Option<Value> {
    let Value::Object(message) = message else {
        return Some(error(&Value::Null, -32600, "a JSON-RPC message is an object"));
    };
    let id = message.get("id").cloned()?;
    let Some(method) = message.get("method").and_then(Value::as_str) else {
        return message
            .get("result")
            .or(message.get("error"))
            .is_none()
            .then(|| error(&id, -32600, "missing method"));
    };
    let params = message.get("params").cloned().unwrap_or(json!({}));
    Some(match method {
        "initialize" => {
            let asked = params["protocolVersion"].as_str().unwrap_or(VERSIONS[0]);
            let version = VERSIONS.iter().find(|v| **v == asked).unwrap_or(&VERSIONS[0]);
            result(
                &id,
                json!({
                    "protocolVersion": version,
                    "capabilities": {"tools": {"listChanged": false}},
                    "serverInfo": {"name": "onyx", "title": "Onyx", "version": env!("CARGO_PKG_VERSION")},
                    "instructions": "Tools of Onyx's agents: search, read and write an agent's memory, read its sessions, schedule its tasks and message it. Pass `agent` to choose one (default: main).",
                }),
            )
        }
        "ping" => result(&id, json!({})),
        "tools/list" => {
            let tools: Vec<Value> = match grant {
                Some(grant) => app
                    .agents
                    .run_tools(grant)
                    .iter()
                    .map(|t| json!({"name": t.name, "description": t.description, "inputSchema": t.parameters}))
                    .collect(),
                None => offered(app)
                .iter()
                .map(
                    |t| json!({"name": t.name, "description": t.description, "inputSchema": input_schema(t)}),
                )
                .collect(),
            };
            result(&id, json!({"tools": tools}))
        }
        "tools/call" => match grant {
            Some(grant) => call_for_run(app, grant, &id, &params).await,
            None => call(app, agent, &id, &params).await,
        },
        other => error(&id, -32601, format!("method {other:?} is not offered")),
    })
}

async fn call(app: &App, agent: &Result<CheckedAgent, String>, id: &Value, params: &Value) -> Value {
    let Some(name) = params["name"].as_str() else {
        return error(id, -32602, "params.name: the tool's name is required");
    };
    if !tools::is_over_mcp(name) {
        return error(
            id,
            -32602,
            format!("there is no tool {name:?}; tools/list names them"),
        );
    }
    let mut arguments = match params.get("arguments") {
        Some(Value::Object(map)) => map.clone(),
        None | Some(Value::Null) => Map::new(),
        Some(_) => return error(id, -32602, "params.arguments must be an object"),
    };
    arguments.remove("agent");
    let agent = match agent {
        Ok(agent) => agent.as_str(),
        Err(message) => return error(id, -32602, message.clone()),
    };
    let context = match app.agents.tools_for(agent).await {
        Ok(Some(context)) => context,
        Ok(None) => return tool_result(id, format!("there is no agent {agent:?}"), true),
        Err(err) => {
            tracing::warn!(error = %err, "MCP: could not read the agent");
            return tool_result(
                id,
                "storage is unavailable right now; try again later".into(),
                true,
            );
        }
    };
    let output = tools::call(&context, name, &Value::Object(arguments)).await;
    tool_result(id, output.content, output.is_error)
}

/// A call of a run's CLI, made by the run. (Its `agent`, if any, was checked
/// against the run's agent with the whole message.)
async fn call_for_run(app: &App, grant: &RunGrant, id: &Value, params: &Value) -> Value {
    let Some(name) = params["name"].as_str() else {
        return error(id, -32602, "params.name: the tool's name is required");
    };
    let mut arguments = match params.get("arguments") {
        Some(Value::Object(map)) => map.clone(),
        None | Some(Value::Null) => Map::new(),
        Some(_) => return error(id, -32602, "params.arguments must be an object"),
    };
    arguments.remove("agent");
    let output = app
        .agents
        .call_for_run(grant, name, &Value::Object(arguments))
        .await;
    tool_result(id, output.content, output.is_error)
}

fn tool_result(id: &Value, text: String, is_error: bool) -> Value {
    result(
        id,
        json!({"content": [{"type": "text", "text": text}], "isError": is_error}),
    )
}
