//! Chat completions answered by an agent (`"model": "onyx:{id}"` or the
//! `x-onyx-agent-id` header or body field). The request starts a durable run
//! (`x-onyx-run-id` names it) and the response follows it (`run_events`):
//! a client that hangs up leaves the run working. Every agent turn is kept in
//! a session (a new one unless `x-onyx-session-id` names one).

use std::sync::Arc;

use axum::http::HeaderMap;

use super::agent_scope::{AgentReach, CheckedAgent};
use super::answer::{Answer, Answered};
use super::chat_session::{OnyxFields, source};
use super::error::ApiError;
use super::run_events::{self, RUN_HEADER};
use crate::agents::{Thread, Turn};
use crate::app::App;
use crate::providers::types::{ChatRequest, Role};
use crate::providers::{Attribution, CompletionReply};

/// The agent a request names (`x-onyx-agent-id`, else `onyx:{agent}` in `model`), if any.
fn agent_of(fields: &OnyxFields, model: &str) -> Option<String> {
    fields
        .agent
        .clone()
        .or_else(|| model.strip_prefix("onyx:").map(String::from))
}

/// The agent a chat request runs, checked against the caller's reach, or
/// `None` for a plain model, which only a caller reaching every agent may
/// use. Every chat route decides its agent here, once.
pub fn chat_agent(
    reach: &AgentReach,
    fields: &OnyxFields,
    model: &str,
) -> Result<Option<CheckedAgent>, ApiError> {
    match agent_of(fields, model) {
        Some(agent) => reach.check(&agent).map(Some),
        None if reach.is_scoped() => Err(reach.refuse("use model \"onyx:<agent>\" with one of them")),
        None => Ok(None),
    }
}

/// Starts the agent's run; the answer follows it.
pub async fn answer(
    app: &Arc<App>,
    headers: &HeaderMap,
    chat: ChatRequest,
    agent_id: &CheckedAgent,
    session_ref: Option<String>,
    include_memory: bool,
    who: Attribution,
) -> Result<Answered, ApiError> {
    // An agent answers a user (or a client tool's result): checked before the
    // run starts, so a streaming client gets a 400 rather than an error mid-stream.
    let last = chat
        .messages
        .iter()
        .rfind(|m| !matches!(m.role, Role::System | Role::Developer));
    if !last.is_some_and(|m| matches!(m.role, Role::User | Role::Tool | Role::Function)) {
        return Err(ApiError::bad_request(
            "messages: an agent's turn must end with a user (or tool) message",
            Some("messages".into()),
        ));
    }
    let agent = app.agents.turn_agent(agent_id.as_str()).await?;
    let source = source(headers);
    let thread = match session_ref {
        Some(id) if id != "new" => Thread::Existing(id),
        _ => Thread::New(source.clone()),
    };
    let stream = chat.stream;
    let include_usage = chat.include_usage();
    let max_tokens = chat.max_output_tokens();
    let turn = Turn {
        thread,
        history: true,
        messages: chat.messages,
        note: None,
        source,
        who,
    };
    let mut request = app.agents.open_turn(agent, turn, None).await?;
    request.client_tools = chat.tools.unwrap_or_default();
    request.include_memory = include_memory;
    request.stream = stream;
    request.temperature = chat.temperature;
    request.max_tokens = max_tokens;
    let session_id = request.session.as_ref().map(|s| s.id.clone());
    let run = app.agents.start_run(request).await?;
    let mut answered = Answered::new(if stream {
        Answer::Chunks(run_events::chunks(&run, include_usage))
    } else {
        Answer::Complete(Box::new(CompletionReply::Typed(run_events::collect(&run).await?)))
    });
    if let Some(id) = &session_id {
        answered.set_session(id);
    }
    answered.header(RUN_HEADER, &run.id);
    Ok(answered)
}
