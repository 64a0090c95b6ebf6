//! Server-sent events: the one encoder every streaming endpoint uses (chat
//! completions, agent runs, the console's log tail). Each event is one
//! `data:` line of JSON and a blank line; a completion stream ends with
//! `data: [DONE]`. Imports nothing else from the crate.

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use serde::Serialize;

/// One event carrying `data` (which must not contain a blank line).
pub fn event(data: &[u8]) -> Bytes {
    let mut event = Vec::with_capacity(data.len() + 8);
    event.extend_from_slice(b"data: ");
    event.extend_from_slice(data);
    event.extend_from_slice(b"\n\n");
    Bytes::from(event)
}

/// One event carrying a value as JSON (compact, so on one line). A value
/// that cannot be written (a map with non-string keys) is sent as `null`.
pub fn json<T: Serialize + ?Sized>(value: &T) -> Bytes {
    event(&serde_json::to_vec(value).unwrap_or_else(|_| b"null".to_vec()))
}

/// One event carrying a JSON value under `id` (what a reconnecting browser
/// sends back as `Last-Event-ID`; `id` must be one line).
pub fn json_with_id<T: Serialize + ?Sized>(id: &str, value: &T) -> Bytes {
    let mut event = format!("id: {id}\n").into_bytes();
    event.extend_from_slice(&json(value));
    Bytes::from(event)
}

/// How long a long-lived feed may stay silent before it sends [`keep_alive`].
pub const KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(15);

/// A comment line: keeps idle proxies and browsers from closing the stream.
pub fn keep_alive() -> Bytes {
    Bytes::from_static(b": keep-alive\n\n")
}

/// The end of an OpenAI-style completion stream.
pub fn done() -> Bytes {
    Bytes::from_static(b"data: [DONE]\n\n")
}

/// A `text/event-stream` response that proxies will not buffer.
pub fn response(body: Body) -> Response {
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_data_lines() {
        assert_eq!(
            &json(&serde_json::json!({"a": [1, "x"]}))[..],
            b"data: {\"a\":[1,\"x\"]}\n\n"
        );
        assert_eq!(&done()[..], b"data: [DONE]\n\n");
        assert_eq!(
            &json_with_id("7", &serde_json::json!(1))[..],
            b"id: 7\ndata: 1\n\n"
        );
    }
}
