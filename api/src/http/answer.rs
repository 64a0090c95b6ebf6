//! What the shared chat path (`inbound_chat`) answers, before any wire
//! encoding: a completion or its chunks, Onyx's own response headers, and
//! the session id each wire protocol also puts in its body (`x_onyx`).
//! Each inbound protocol and the agent path speak these types.

use axum::http::{HeaderMap, HeaderValue};
use futures::stream::BoxStream;
use serde_json::{Map, Value};

use super::chat_session::SESSION_HEADER;
use super::error::ApiError;
use crate::chat::{ChatChunk, Completion};
use crate::providers::CompletionReply;

/// The body field Onyx's own answers carry beside the wire protocol's
/// (`{"x_onyx": {"session_id": …}}`); clients that do not know it ignore it.
pub const BODY_FIELD: &str = "x_onyx";

/// `object` with `x_onyx.session_id` set, when there is a session and `object` is a JSON object.
pub fn with_session(mut object: Value, session: Option<&str>) -> Value {
    if let Some((id, fields)) = session.zip(object.as_object_mut()) {
        set_session(fields, id);
    }
    object
}

/// Sets `x_onyx.session_id` among an object's fields (a typed answer's `extra`).
pub fn set_session(fields: &mut Map<String, Value>, id: &str) {
    // An agent's answer has its own `x_onyx` (`iterations`): added to, not replaced.
    let onyx = fields
        .entry(BODY_FIELD)
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(onyx) = onyx.as_object_mut() {
        onyx.insert("session_id".into(), Value::String(id.into()));
    }
}

/// The chunks with `x_onyx.session_id` on the first one (when there is a session).
pub fn first_with_session(chunks: Chunks, session: Option<String>) -> Chunks {
    use futures::StreamExt;
    let Some(session) = session else {
        return chunks;
    };
    let mut session = Some(session);
    chunks
        .map(move |item| match (item, session.take()) {
            (Ok(mut chunk), Some(id)) => {
                set_session(&mut chunk.extra, &id);
                Ok(chunk)
            }
            (item, _) => item,
        })
        .boxed()
}

/// `chat.completion.chunk`s in order (no `[DONE]`); an `Err` item is a
/// mid-stream failure and the last item.
pub type Chunks = BoxStream<'static, Result<ChatChunk, ApiError>>;

/// What the chat path answers, in chat-completions shape, before any wire encoding.
pub enum Answer {
    /// One `chat.completion`: typed, or a plain upstream's own bytes
    /// (boxed: a typed completion is large beside a stream).
    Complete(Box<CompletionReply>),
    Chunks(Chunks),
}

/// The answer typed, for a caller that reads it, with `x_onyx.session_id`
/// when there is a session.
pub fn completion(reply: CompletionReply, session: Option<&str>) -> Result<Completion, ApiError> {
    let mut completion = reply.into_completion()?;
    if let Some(id) = session {
        set_session(&mut completion.extra, id);
    }
    Ok(completion)
}

pub struct Answered {
    pub answer: Answer,
    /// Onyx's own response headers, sent whatever the wire protocol
    /// (`x-onyx-session-id`, `x-onyx-run-id`, `x-onyx-session-history`).
    pub headers: HeaderMap,
    /// The session the turn was kept in, also put in the body by each wire
    /// protocol ([`with_session`]).
    pub session: Option<String>,
}

impl Answered {
    pub fn new(answer: Answer) -> Self {
        Self {
            answer,
            headers: HeaderMap::new(),
            session: None,
        }
    }

    /// The session the turn is kept in: its header, and the body's `x_onyx.session_id`.
    pub fn set_session(&mut self, id: &str) {
        self.header(SESSION_HEADER, id);
        self.session = Some(id.to_string());
    }

    /// Sets an Onyx header; a value that is not a valid header is left out.
    pub fn header(&mut self, name: &'static str, value: &str) {
        if let Ok(value) = HeaderValue::from_str(value) {
            self.headers.insert(name, value);
        }
    }
}
