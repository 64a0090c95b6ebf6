//! What the shared chat path (`chat_core`) answers, before any wire
//! encoding: a completion or its chunks, and Onyx's own response headers.
//! Each inbound protocol and the agent path speak these types.

use axum::http::{HeaderMap, HeaderValue};
use futures::stream::BoxStream;
use serde_json::Value;

pub use crate::providers::Completion;

use super::error::ApiError;

/// `chat.completion.chunk` objects in order (no `[DONE]`); an `Err` item is a
/// mid-stream failure and the last item.
pub type Chunks = BoxStream<'static, Result<Value, ApiError>>;

/// What the chat path answers, in chat-completions shape, before any wire encoding.
pub enum Answer {
    /// One `chat.completion` object.
    Complete(Completion),
    Chunks(Chunks),
}

pub struct Answered {
    pub answer: Answer,
    /// Onyx's own response headers, sent whatever the wire protocol
    /// (`x-onyx-session-id`, `x-onyx-run-id`, `x-onyx-session-history`).
    pub headers: HeaderMap,
}

impl Answered {
    pub fn new(answer: Answer) -> Self {
        Self {
            answer,
            headers: HeaderMap::new(),
        }
    }

    /// Sets an Onyx header; a value that is not a valid header is left out.
    pub fn header(&mut self, name: &'static str, value: &str) {
        if let Ok(value) = HeaderValue::from_str(value) {
            self.headers.insert(name, value);
        }
    }
}
