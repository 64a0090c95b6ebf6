//! The chat path every inbound protocol shares (`/v1/chat/completions`,
//! `/v1/responses`, `/v1/messages`): each translates its request into a
//! chat-completions body, calls [`answer`], and translates the answer back
//! into its own wire format.
//!
//! `answer` routes `model` to a provider (with the router's retries and
//! fallbacks) or, for `onyx:{agent}` / `x-onyx-agent-id`, runs that agent; it
//! keeps the session when one is asked for (`x-onyx-session-id`, as a header
//! or body field; `new` starts one, and `gateway.recordSessions` starts one
//! for every plain request).
//! Streamed chunks are passed on as they arrive: when the client goes away the
//! stream is dropped, which closes the upstream request.

use std::sync::Arc;

use axum::http::HeaderMap;
use futures::StreamExt;

use super::agent_scope::{AgentReach, CheckedAgent};
use super::chat_session::{OnyxFields, source};
use super::error::ApiError;
use crate::agents::MAIN as DEFAULT_AGENT;
use crate::app::App;
use crate::chat::{Message, Role};
use crate::providers::types::ChatRequest;
use crate::providers::{Attribution, ChatBody, ChatCall, ChatChunkStream, CompletionReply};
use crate::sessions::recorder::{self, StreamRecorder};
use crate::sessions::{LogMessage, SessionMeta, Sessions};

pub use super::answer::{Answer, Answered, Chunks};

/// Who asks, and the agent the request runs (`None`: a plain model), as
/// `agent_chat::chat_agent` decided it.
pub struct Asker<'a> {
    pub reach: &'a AgentReach,
    pub agent: Option<CheckedAgent>,
}

/// Answers one chat request. `body` is the chat-completions JSON object (what
/// OpenAI-compatible upstreams receive), `request` its typed view.
pub async fn answer(
    app: &Arc<App>,
    headers: &HeaderMap,
    asker: Asker<'_>,
    body: ChatBody,
    request: ChatRequest,
    fields: OnyxFields,
    mut who: Attribution,
) -> Result<Answered, ApiError> {
    let session_ref = fields.session;
    if request.messages.is_empty() {
        return Err(ApiError::bad_request(
            "messages: at least one message is required",
            Some("messages".into()),
        ));
    }
    // The agent and session paths are boxed: their futures are large, and
    // inline they would make every plain call's future (moved several times
    // on its way through the service stack) as large.
    if let Some(session) = session_ref.as_deref() {
        session_in_reach(app, asker.reach, session).await?;
    }
    if let Some(agent) = &asker.agent {
        return Box::pin(super::agent_chat::answer(
            app,
            headers,
            request,
            agent,
            session_ref,
            fields.include_memory,
            who,
        ))
        .await;
    }
    let targets = app.router.resolve(&request.model)?;
    let session = if session_ref.is_some() || app.record_sessions {
        Box::pin(open_session(app, session_ref.as_deref(), headers)).await?
    } else {
        None
    };
    who.session = session.as_ref().map(|s| s.id.clone());
    let mut history_missing = false;
    let (call, turn) = match &session {
        None => (
            ChatCall {
                body,
                request,
                who,
                tool_token: None,
            },
            Vec::new(),
        ),
        Some(session) => {
            let (call, turn, missing) =
                Box::pin(with_session_history(app, session, body, request, who)).await?;
            history_missing = missing;
            (call, turn)
        }
    };
    let mut cost = None;
    let answer = if call.request.stream {
        let (stream, served_by) = app.router.stream(&targets, &call).await?;
        let recorder = session
            .clone()
            .map(|s| StreamRecorder::new(app.sessions.clone(), s, turn, served_by.to_string()));
        Answer::Chunks(recorded(stream, recorder))
    } else {
        let (mut reply, served_by, priced) = app.router.complete(&targets, &call).await?;
        cost = priced;
        if let Some(session) = &session {
            // Read once: the session keeps its message, the client gets the same typed answer.
            let completion = reply.into_completion()?;
            let mut turn = turn;
            turn.push(recorder::assistant_from_completion(
                &completion,
                &served_by.to_string(),
            ));
            Box::pin(record(app.sessions.clone(), session.clone(), turn)).await;
            reply = CompletionReply::Typed(completion);
        }
        Answer::Complete(Box::new(reply))
    };
    let mut answered = Answered::new(answer);
    if let Some(cost) = cost {
        // Known only once the whole answer is in, so streams have it in the usage records.
        answered.header(super::usage::COST_HEADER, &format!("{cost:.6}"));
    }
    if let Some(session) = &session {
        answered.set_session(&session.id);
        if history_missing {
            answered.header("x-onyx-session-history", "unavailable");
        }
    }
    Ok(answered)
}

/// A scoped key continues only sessions of its agents (one that does not
/// exist is the chat path's own 404, or a new session).
async fn session_in_reach(app: &App, reach: &AgentReach, session: &str) -> Result<(), ApiError> {
    let session = session.trim();
    if !reach.is_scoped() || session == "new" {
        return Ok(());
    }
    match app.sessions.get(session).await {
        Ok(meta) => reach.check(&meta.agent_id).map(drop),
        Err(_) => Ok(()),
    }
}

/// The call with the session's stored history put before the client's
/// messages, the client's messages as the turn to record, and whether the
/// history could not be read.
async fn with_session_history(
    app: &App,
    session: &SessionMeta,
    body: ChatBody,
    mut request: ChatRequest,
    who: Attribution,
) -> Result<(ChatCall, Vec<LogMessage>, bool), ApiError> {
    let turn = recorder::client_messages(&request.messages);
    let mut history_missing = false;
    let history = match app.sessions.messages(session).await {
        Ok(history) => history,
        // The object store is down: answer without the history rather than not at all.
        Err(err) => {
            tracing::warn!(session = %session.id, error = %err, "session history unavailable; answering without it");
            history_missing = true;
            Vec::new()
        }
    };
    let body = if history.is_empty() {
        body
    } else {
        let client = std::mem::take(&mut request.messages);
        request.messages = with_history(client, history.iter().filter_map(LogMessage::to_message));
        // The body upstreams receive says the same: its other fields as they came.
        let mut tree = body.into_tree().map_err(|err| {
            ApiError::bad_request(format!("the request body could not be read: {err}"), None)
        })?;
        let messages = serde_json::to_value(&request.messages)
            .map_err(|err| ApiError::bad_request(format!("messages: {err}"), Some("messages".into())))?;
        tree.insert("messages".into(), messages);
        ChatBody::Tree(tree)
    };
    Ok((
        ChatCall {
            body,
            request,
            who,
            tool_token: None,
        },
        turn,
        history_missing,
    ))
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
fn with_history(client: Vec<Message>, history: impl Iterator<Item = Message>) -> Vec<Message> {
    let (system, rest): (Vec<_>, Vec<_>) = client
        .into_iter()
        .partition(|m| matches!(m.role, Role::System | Role::Developer));
    system.into_iter().chain(history).chain(rest).collect()
}

async fn record(sessions: Arc<Sessions>, session: SessionMeta, turn: Vec<LogMessage>) {
    // Its own task: the write finishes even if the client hangs up meanwhile.
    let _ = tokio::spawn(recorder::store(sessions, session, turn)).await;
}

/// The upstream's chunks, observed by the session recorder, which stores the
/// turn once the stream ends: before the consumer's end-of-stream marker, so a
/// client that saw it finds the turn stored.
fn recorded(stream: ChatChunkStream, mut recorder: Option<StreamRecorder>) -> Chunks {
    async_stream::stream! {
        let mut stream = stream;
        while let Some(item) = stream.next().await {
            match item {
                Ok(chunk) => {
                    if let Some(recorder) = recorder.as_mut() {
                        recorder.observe(&chunk);
                    }
                    yield Ok(chunk);
                }
                Err(err) => {
                    yield Err(ApiError::from(err));
                    break;
                }
            }
        }
        if let Some(recorder) = recorder.take() {
            recorder.finish().await;
        }
    }
    .boxed()
}
