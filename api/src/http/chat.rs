//! `POST /v1/chat/completions`: JSON or server-sent events. Chunks are written
//! as they arrive from the upstream; when the client goes away the stream is
//! dropped, which closes the upstream request.
//!
//! With `x-onyx-session-id` (header or body field; `new` starts one, and
//! `gateway.recordSessions` starts one for every plain request) the session's
//! history is prepended and the turn is recorded; the id comes back in the
//! `x-onyx-session-id` response header.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use futures::StreamExt;
use serde_json::Value;

use super::body::{JsonObject, into_map, typed};
use super::chat_session::{SESSION_HEADER, source, split_system};
use super::error::ApiError;
use super::sse;
use crate::agents::MAIN as DEFAULT_AGENT;
use crate::app::App;
use crate::providers::types::ChatRequest;
use crate::providers::{Attribution, ChatCall, ChunkStream};
use crate::sessions::recorder::{self, StreamRecorder};
use crate::sessions::{SessionMeta, Sessions};

pub async fn chat_completions(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    who: Option<Extension<Attribution>>,
    JsonObject(mut body): JsonObject,
) -> Result<Response, ApiError> {
    let mut who = who.map(|Extension(who)| who).unwrap_or_default();
    let session_ref = take_session_ref(&headers, &mut body)?;
    let request: ChatRequest = typed(&body)?;
    if request.messages.is_empty() {
        return Err(ApiError::bad_request(
            "messages: at least one message is required",
            Some("messages".into()),
        ));
    }
    if let Some(agent) = super::agent_chat::agent_of(&headers, &request.model) {
        return super::agent_chat::run(app, &headers, request, &agent, session_ref, who).await;
    }
    let targets = app.router.resolve(&request.model)?;
    let session = open_session(&app, session_ref.as_deref(), &headers).await?;
    let mut history_missing = false;
    let (request, turn) = match &session {
        None => (request, Vec::new()),
        Some(session) => {
            let client_messages = body["messages"].as_array().cloned().unwrap_or_default();
            let turn = recorder::client_messages(&client_messages);
            let history = match app.sessions.messages(session).await {
                Ok(history) => history,
                // The object store is down: answer without the history rather than not at all.
                Err(err) => {
                    tracing::warn!(session = %session.id, error = %err, "session history unavailable; answering without it");
                    history_missing = true;
                    Vec::new()
                }
            };
            if !history.is_empty() {
                body["messages"] = Value::Array(with_history(
                    client_messages,
                    history.iter().map(|m| m.to_openai()),
                ));
            }
            (typed(&body)?, turn)
        }
    };
    who.session = session.as_ref().map(|s| s.id.clone());
    let call = ChatCall {
        body: into_map(body),
        request,
        who,
    };
    let mut response = if call.request.stream {
        let (stream, served_by) = app.router.chat_stream(&targets, &call).await?;
        let recorder = session
            .clone()
            .map(|s| StreamRecorder::new(app.sessions.clone(), s, turn, served_by.to_string()));
        sse_response(stream, recorder)
    } else {
        let (completion, served_by, cost) = app.router.chat_metered(&targets, &call).await?;
        if let Some(session) = &session {
            let mut turn = turn;
            turn.push(recorder::assistant_from_completion(
                &completion,
                &served_by.to_string(),
            ));
            record(app.sessions.clone(), session.clone(), turn).await;
        }
        super::usage::with_cost(Json(completion).into_response(), cost)
    };
    if let Some(session) = &session
        && let Ok(value) = HeaderValue::from_str(&session.id)
    {
        response.headers_mut().insert(SESSION_HEADER, value);
        if history_missing {
            response
                .headers_mut()
                .insert("x-onyx-session-history", HeaderValue::from_static("unavailable"));
        }
    }
    Ok(response)
}

/// The session the request names, from the header or the body field (which is
/// removed: upstreams would reject an unknown parameter).
fn take_session_ref(headers: &HeaderMap, body: &mut Value) -> Result<Option<String>, ApiError> {
    let from_body = body.as_object_mut().and_then(|b| b.remove(SESSION_HEADER));
    if let Some(value) = headers.get(SESSION_HEADER) {
        let text = value.to_str().map_err(|_| {
            ApiError::bad_request(
                "x-onyx-session-id: not a valid header value",
                Some(SESSION_HEADER.into()),
            )
        })?;
        return Ok(Some(text.trim().to_string()));
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

async fn open_session(
    app: &App,
    reference: Option<&str>,
    headers: &HeaderMap,
) -> Result<Option<SessionMeta>, ApiError> {
    Ok(match reference {
        Some("new") => Some(app.sessions.create(DEFAULT_AGENT, &source(headers)).await?),
        Some(id) => Some(app.sessions.get(id).await?),
        None if app.record_sessions => Some(app.sessions.create(DEFAULT_AGENT, &source(headers)).await?),
        None => None,
    })
}

/// The client's system messages first, then the stored history, then the rest.
fn with_history(client: Vec<Value>, history: impl Iterator<Item = Value>) -> Vec<Value> {
    let (system, rest) = split_system(client);
    system.into_iter().chain(history).chain(rest).collect()
}

async fn record(sessions: Arc<Sessions>, session: SessionMeta, turn: Vec<crate::sessions::LogMessage>) {
    // Its own task: the write finishes even if the client hangs up meanwhile.
    let _ = tokio::spawn(recorder::store(sessions, session, turn)).await;
}

fn sse_response(stream: ChunkStream, mut recorder: Option<StreamRecorder>) -> Response {
    let events = async_stream::stream! {
        let mut stream = stream;
        while let Some(item) = stream.next().await {
            match item {
                Ok(chunk) => {
                    if let Some(recorder) = recorder.as_mut() {
                        recorder.observe(&chunk);
                    }
                    yield Ok::<_, std::convert::Infallible>(sse::json(&chunk));
                }
                Err(err) => {
                    // Headers are gone already: the error travels in the stream,
                    // in the shape OpenAI uses for mid-stream errors.
                    let body = ApiError::from(err).into_stream_event();
                    yield Ok(sse::json(&body));
                    break;
                }
            }
        }
        // Recorded before [DONE], so a client that saw [DONE] finds the turn stored.
        if let Some(recorder) = recorder.take() {
            recorder.finish().await;
        }
        yield Ok(sse::done());
    };
    sse::response(Body::from_stream(events))
}
