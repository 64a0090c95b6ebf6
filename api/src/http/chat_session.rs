//! What the chat paths share (the plain proxy in `chat`, agent runs in
//! `agent_chat`, the translated `/v1/responses` and `/v1/messages`): Onyx's
//! request fields ([`OnyxFields`]), where a request comes from, and the
//! client's system messages split off the rest of its messages.

use axum::http::HeaderMap;
use serde_json::{Map, Value};

use super::error::ApiError;

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

/// The session the `x-onyx-session-id` header names, if any.
pub fn session_header(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(value) = headers.get(SESSION_HEADER) else {
        return Ok(None);
    };
    let text = value.to_str().map_err(|_| {
        ApiError::bad_request(
            "x-onyx-session-id: not a valid header value",
            Some(SESSION_HEADER.into()),
        )
    })?;
    Ok(Some(text.trim().to_string()))
}

/// Whether the request is kept in a session (it names one, or the gateway
/// keeps every conversation): such requests go through the chat core, which
/// adds the history and records the turn, even when the model's provider
/// could take the protocol as it is.
pub fn keeps_a_session(record_sessions: bool, fields: &OnyxFields) -> bool {
    record_sessions || fields.session.is_some()
}

/// The Onyx request fields, each sent as a header or as the body field of
/// the same name (seed 003): the agent to run, the session to continue, and
/// whether the agent's memory is put in its context.
#[derive(Debug, Default)]
pub struct OnyxFields {
    pub agent: Option<String>,
    pub session: Option<String>,
    pub include_memory: bool,
}

impl OnyxFields {
    /// Reads the fields from the headers and takes them out of the body
    /// (upstreams refuse a parameter they do not know). A field given both
    /// ways with different values is a 400 naming both: neither silently wins.
    pub fn take(headers: &HeaderMap, body: &mut Map<String, Value>) -> Result<Self, ApiError> {
        Self::take_with(headers, |name| Ok(body.remove(name)))
    }

    /// As [`take`](Self::take), with `remove` taking a body field out.
    pub fn take_with(
        headers: &HeaderMap,
        mut remove: impl FnMut(&str) -> Result<Option<Value>, ApiError>,
    ) -> Result<Self, ApiError> {
        let agent = one_of(
            AGENT_FIELD,
            header_text(headers, AGENT_FIELD)?,
            body_text(AGENT_FIELD, remove(AGENT_FIELD)?)?,
        )?;
        let session = one_of(
            SESSION_HEADER,
            session_header(headers)?.filter(|s| !s.is_empty()),
            body_text(SESSION_HEADER, remove(SESSION_HEADER)?)?,
        )?;
        let include_memory = one_of(
            MEMORY_FIELD,
            header_flag(headers)?,
            body_flag(remove(MEMORY_FIELD)?)?,
        )?;
        Ok(Self {
            agent,
            session,
            include_memory: include_memory.unwrap_or(false),
        })
    }
}

pub const AGENT_FIELD: &str = "x-onyx-agent-id";
pub const MEMORY_FIELD: &str = "x-onyx-include-memory";

/// The value given, from the header or the body; both given and different is a 400.
fn one_of<T: PartialEq + std::fmt::Debug>(
    name: &str,
    header: Option<T>,
    body: Option<T>,
) -> Result<Option<T>, ApiError> {
    match (header, body) {
        (Some(header), Some(body)) if header != body => Err(ApiError::bad_request(
            format!(
                "{name}: the {name} header says {header:?} and the body's {name} field says {body:?}; send one, or the same in both"
            ),
            Some(name.into()),
        )),
        (header, body) => Ok(header.or(body)),
    }
}

fn header_text(headers: &HeaderMap, name: &str) -> Result<Option<String>, ApiError> {
    let Some(value) = headers.get(name) else {
        return Ok(None);
    };
    let text = value
        .to_str()
        .map_err(|_| ApiError::bad_request(format!("{name}: not a valid header value"), Some(name.into())))?;
    Ok(Some(text.trim().to_string()).filter(|t| !t.is_empty()))
}

fn body_text(name: &str, value: Option<Value>) -> Result<Option<String>, ApiError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.trim().to_string()).filter(|t| !t.is_empty())),
        Some(_) => Err(ApiError::bad_request(
            format!("{name}: must be a string"),
            Some(name.into()),
        )),
    }
}

fn header_flag(headers: &HeaderMap) -> Result<Option<bool>, ApiError> {
    let Some(text) = header_text(headers, MEMORY_FIELD)? else {
        return Ok(None);
    };
    match text.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(Some(true)),
        "0" | "false" | "no" | "off" => Ok(Some(false)),
        _ => Err(ApiError::bad_request(
            format!("{MEMORY_FIELD}: {text:?} is not true or false"),
            Some(MEMORY_FIELD.into()),
        )),
    }
}

fn body_flag(value: Option<Value>) -> Result<Option<bool>, ApiError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(flag)) => Ok(Some(flag)),
        Some(_) => Err(ApiError::bad_request(
            format!("{MEMORY_FIELD}: must be a boolean"),
            Some(MEMORY_FIELD.into()),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use serde_json::json;

    fn take(headers: &[(&'static str, &'static str)], body: Value) -> (Result<OnyxFields, ApiError>, Value) {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.insert(*name, HeaderValue::from_static(value));
        }
        let mut body = match body {
            Value::Object(body) => body,
            _ => Map::new(),
        };
        let fields = OnyxFields::take(&map, &mut body);
        (fields, Value::Object(body))
    }

    #[test]
    fn fields_come_from_headers_or_body_and_leave_the_body() {
        let (fields, rest) = take(
            &[("x-onyx-session-id", "s1")],
            json!({"model": "m", "x-onyx-agent-id": " ops ", "x-onyx-include-memory": true, "x-onyx-session-id": "s1"}),
        );
        let fields = fields.unwrap();
        assert_eq!(fields.agent.as_deref(), Some("ops"));
        assert_eq!(fields.session.as_deref(), Some("s1"));
        assert!(fields.include_memory);
        assert_eq!(rest, json!({"model": "m"}));
        let (fields, _) = take(&[("x-onyx-include-memory", "On")], json!({"x-onyx-agent-id": ""}));
        let fields = fields.unwrap();
        assert!(fields.include_memory && fields.agent.is_none() && fields.session.is_none());
    }

    #[test]
    fn different_values_both_ways_or_wrong_types_are_400s_naming_the_field() {
        for (headers, body, field) in [
            (
                vec![("x-onyx-agent-id", "main")],
                json!({"x-onyx-agent-id": "ops"}),
                AGENT_FIELD,
            ),
            (
                vec![("x-onyx-session-id", "a")],
                json!({"x-onyx-session-id": "b"}),
                SESSION_HEADER,
            ),
            (
                vec![("x-onyx-include-memory", "no")],
                json!({"x-onyx-include-memory": true}),
                MEMORY_FIELD,
            ),
            (
                vec![("x-onyx-include-memory", "perhaps")],
                json!({}),
                MEMORY_FIELD,
            ),
            (vec![], json!({"x-onyx-include-memory": 1}), MEMORY_FIELD),
            (vec![], json!({"x-onyx-agent-id": ["ops"]}), AGENT_FIELD),
        ] {
            let err = take(&headers, body.clone()).0.unwrap_err();
            assert_eq!(err.status(), 400, "{body}");
            assert!(err.to_string().contains(field), "{body}: {err}");
        }
    }
}
