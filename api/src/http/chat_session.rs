//! What the two chat paths share (the plain proxy in `chat`, agent runs in
//! `agent_chat`): the session header, where a request comes from, and the
//! client's system messages split off the rest of its messages.

use axum::http::HeaderMap;
use serde_json::Value;

pub const SESSION_HEADER: &str = "x-onyx-session-id";

/// `api` unless the client says otherwise (the UI sends `ui`).
pub fn source(headers: &HeaderMap) -> String {
    let given = headers
        .get("x-onyx-source")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("api");
    let known = matches!(given, "api" | "ui" | "cron")
        || ["telegram:", "discord:"]
            .iter()
            .any(|p| given.starts_with(p) && given.len() <= 64);
    if known {
        given.to_string()
    } else {
        "api".to_string()
    }
}

/// The client's `system` and `developer` messages, then the others, each in order.
pub fn split_system(messages: Vec<Value>) -> (Vec<Value>, Vec<Value>) {
    messages
        .into_iter()
        .partition(|m| matches!(m["role"].as_str(), Some("system" | "developer")))
}

/// The session the `x-onyx-session-id` header names, if any.
pub fn session_header(headers: &HeaderMap) -> Result<Option<String>, super::error::ApiError> {
    let Some(value) = headers.get(SESSION_HEADER) else {
        return Ok(None);
    };
    let text = value.to_str().map_err(|_| {
        super::error::ApiError::bad_request(
            "x-onyx-session-id: not a valid header value",
            Some(SESSION_HEADER.into()),
        )
    })?;
    Ok(Some(text.trim().to_string()))
}

/// Whether the request is kept in a session (the header names one, or the
/// gateway keeps every conversation): such requests go through the chat
/// core, which adds the history and records the turn, even when the model's
/// provider could take the protocol as it is.
pub fn keeps_a_session(record_sessions: bool, headers: &HeaderMap) -> bool {
    record_sessions || headers.contains_key(SESSION_HEADER)
}
