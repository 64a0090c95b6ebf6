//! `POST /v1/chat/completions`: JSON or server-sent events, in OpenAI's wire
//! format, over the shared chat path (`inbound_chat`). Onyx's request fields
//! (`x-onyx-agent-id`, `x-onyx-session-id`, `x-onyx-include-memory`) come as
//! headers or body fields (`OnyxFields`); a session's id comes back in the
//! `x-onyx-session-id` response header and in the body's `x_onyx.session_id`
//! (a stream's first chunk).

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
use super::answer::{self, first_with_session};
use super::body::{JsonBytes, into_map, parse_object, typed};
use super::chat_session::OnyxFields;
use super::error::ApiError;
use super::inbound_chat::{self, Answer, Answered, Asker, Chunks};
use super::middleware::Caller;
use super::sse;
use crate::app::App;
use crate::providers::types::ChatRequest;
use crate::providers::{ChatBody, CompletionReply, RawObject};

pub async fn chat_completions(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    reach: AgentReach,
    Caller(who): Caller,
    JsonBytes(json): JsonBytes,
) -> Result<Response, ApiError> {
    let (body, request, fields) = read_chat(&headers, json)?;
    let asker = Asker {
        agent: chat_agent(&reach, &fields, &request.model)?,
        reach: &reach,
    };
    let answered = inbound_chat::answer(&app, &headers, asker, body, request, fields, who).await?;
    Ok(into_response(answered))
}

/// The body, its typed view and the Onyx fields it carries (taken out of
/// it). A plainly valid object is kept as it came (forwarded without being
/// built into a tree); anything else is read into a tree, whose errors name
/// the problem.
fn read_chat(
    headers: &HeaderMap,
    json: axum::body::Bytes,
) -> Result<(ChatBody, ChatRequest, OnyxFields), ApiError> {
    // From text, serde_json does not check each string's UTF-8 again.
    if let Ok((mut raw, request)) = RawObject::parse::<ChatRequest>(json.clone()) {
        let fields = OnyxFields::take_with(headers, |name| {
            raw.remove(name)
                .map(|text| serde_json::from_str(&text))
                .transpose()
                .map_err(|err| ApiError::bad_request(format!("{name}: {err}"), Some(name.into())))
        })?;
        return Ok((ChatBody::Raw(raw), request, fields));
    }
    let mut body = into_map(parse_object(&json)?);
    let fields = OnyxFields::take(headers, &mut body)?;
    let body = Value::Object(body);
    let request: ChatRequest = typed(&body)?;
    Ok((ChatBody::Tree(into_map(body)), request, fields))
}

/// The answer in chat-completions wire format, with Onyx's headers and,
/// when the turn is kept in a session, `x_onyx.session_id` in the body.
pub fn into_response(answered: Answered) -> Response {
    let Answered {
        answer,
        headers,
        session,
    } = answered;
    let mut response = match answer {
        Answer::Chunks(chunks) => chunks_sse(first_with_session(chunks, session)),
        Answer::Complete(reply) => match (*reply, session) {
            (CompletionReply::Verbatim { bytes, .. }, None) => (
                [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))],
                bytes,
            )
                .into_response(),
            (reply, session) => match answer::completion(reply, session.as_deref()) {
                Ok(completion) => Json(completion).into_response(),
                Err(err) => err.into_response(),
            },
        },
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
