//! `POST /v1/chat/completions`: JSON or server-sent events, in OpenAI's wire
//! format, over the shared chat path (`chat_core`). The session may be named
//! by the `x-onyx-session-id` header or body field; the id comes back in the
//! `x-onyx-session-id` response header.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::Value;

use super::agent_chat::chat_agent;
use super::agent_scope::AgentReach;
use super::body::{JsonBytes, into_map, parse_object, typed};
use super::chat_core::{self, Answer, Answered, Asker, Chunks, Completion};
use super::chat_session::{SESSION_HEADER, session_header};
use super::error::ApiError;
use super::middleware::Caller;
use super::sse;
use crate::app::App;
use crate::providers::types::ChatRequest;
use crate::providers::{ChatBody, RawObject};

pub async fn chat_completions(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    reach: AgentReach,
    Caller(who): Caller,
    JsonBytes(json): JsonBytes,
) -> Result<Response, ApiError> {
    let (body, request, session_ref) = read_chat(&headers, json)?;
    let asker = Asker {
        agent: chat_agent(&reach, &headers, &request.model)?,
        reach: &reach,
    };
    let answered = chat_core::answer(&app, &headers, asker, body, request, session_ref, who).await?;
    Ok(into_response(answered))
}

/// The body, its typed view and the session it names. A plainly valid
/// object is kept as it came (forwarded without being built into a tree);
/// anything else is read into a tree, whose errors name the problem.
fn read_chat(
    headers: &HeaderMap,
    json: axum::body::Bytes,
) -> Result<(ChatBody, ChatRequest, Option<String>), ApiError> {
    // From text, serde_json does not check each string's UTF-8 again.
    if let Some((mut raw, request)) = RawObject::scan_with(json.clone(), |text| {
        serde_json::from_str::<ChatRequest>(text).ok()
    }) {
        let from_body = raw
            .remove(SESSION_HEADER)
            .and_then(|text| serde_json::from_str(&text).ok());
        let session_ref = session_ref(headers, from_body)?;
        return Ok((ChatBody::Raw(raw), request, session_ref));
    }
    let mut body = parse_object(&json)?;
    let from_body = body.as_object_mut().and_then(|b| b.remove(SESSION_HEADER));
    let session_ref = session_ref(headers, from_body)?;
    let request: ChatRequest = typed(&body)?;
    Ok((ChatBody::Tree(into_map(body)), request, session_ref))
}

/// The answer in chat-completions wire format, with Onyx's headers.
pub fn into_response(answered: Answered) -> Response {
    let Answered { answer, headers } = answered;
    let mut response = match answer {
        Answer::Complete(Completion::Parsed(completion)) => Json(completion).into_response(),
        Answer::Complete(Completion::Forwarded { json, .. }) => (
            [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))],
            json,
        )
            .into_response(),
        Answer::Chunks(chunks) => chunks_sse(chunks),
    };
    response.headers_mut().extend(headers);
    response
}

/// Chunks as server-sent events ending in `data: [DONE]`. A failure travels
/// in the stream (the headers are gone already), in the shape OpenAI uses for
/// mid-stream errors.
pub fn chunks_sse(chunks: Chunks) -> Response {
    let events = chunks
        .map(|item| {
            Ok::<_, std::convert::Infallible>(match item {
                Ok(chunk) => sse::json(&chunk),
                Err(err) => sse::json(&err.into_stream_event()),
            })
        })
        .chain(futures::stream::once(async {
            Ok::<_, std::convert::Infallible>(sse::done())
        }));
    sse::response(Body::from_stream(events))
}

/// The session the request names, from the header or the body field (taken
/// out of the body by the caller: upstreams would reject an unknown parameter).
fn session_ref(headers: &HeaderMap, from_body: Option<Value>) -> Result<Option<String>, ApiError> {
    if let Some(reference) = session_header(headers)? {
        return Ok(Some(reference));
    }
    match from_body {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(ApiError::bad_request(
            "x-onyx-session-id: must be a string",
            Some(SESSION_HEADER.into()),
        )),
    }
}
