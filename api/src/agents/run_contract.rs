//! What goes into an agent run (`RunRequest`) and what comes out of it
//! (`RunEvent`s, ending with `Done(Outcome)` or `Failed`): the vocabulary
//! `runtime`, `run_loop` and `runs` share.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::error::AgentError;
use super::prompt;
use super::registry::AgentDef;
use crate::chat::Completion;
use crate::providers::types::{ChatRequest, Message, ToolCall, ToolDef};
use crate::providers::{Attribution, ChatCall, ProviderError, Usage};
use crate::sessions::{History, LogMessage, ReasoningEffort, SessionMeta};

/// One run to make: the agent, the conversation, and how it is watched.
pub struct RunRequest {
    pub agent: AgentDef,
    /// The session's history this turn builds on (compacted as it grows).
    pub history: History,
    /// The client's new messages, without system messages.
    pub messages: Vec<Message>,
    /// The client's own system messages, kept after the composed prompt.
    pub client_system: Vec<Message>,
    /// Tools the client defined; a call to one ends the run and goes back to it.
    pub client_tools: Vec<ToolDef>,
    /// The messages of this turn to record (the client's new ones).
    pub turn: Vec<LogMessage>,
    pub session: Option<SessionMeta>,
    /// Where the run was started (`api`, `ui`, `telegram:…`, `task`, `inbox`).
    pub source: String,
    pub include_memory: bool,
    /// Where to post Approve/Deny buttons for a dangerous call in `ask` mode
    /// (`telegram:<chat>`, `discord:<channel>`), besides the Approvals page.
    pub ask_in: Option<String>,
    /// Stream from the upstream too (text deltas arrive as they are made).
    pub stream: bool,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u32>,
    /// Sent upstream as the chat request's `reasoning_effort` (the session's setting).
    pub reasoning_effort: Option<ReasoningEffort>,
    /// Who the run's model calls are for (key, task, run); the agent and
    /// session are filled in per call.
    pub who: Attribution,
}

impl RunRequest {
    /// Applies the session's own settings to the run: its model, its
    /// reasoning effort, and its permission mode, never above the agent's.
    /// Every turn goes through here (`conversation::open_turn`).
    pub(super) fn apply_session_settings(&mut self) {
        let Some(settings) = self.session.as_ref().map(|s| &s.settings) else {
            return;
        };
        if let Some(model) = &settings.model {
            self.agent.model = Some(model.clone());
        }
        if let Some(mode) = settings.permission_mode {
            self.agent.permission_mode = self.agent.permission_mode.stricter(mode);
        }
        if settings.reasoning_effort.is_some() {
            self.reasoning_effort = settings.reasoning_effort;
        }
    }

    /// A model call of an agent run: its model and settings, the prompt cache
    /// key of its session, the messages and tools.
    pub fn model_call(
        &self,
        messages: &[Message],
        tool_defs: &[ToolDef],
        stream: bool,
    ) -> Result<ChatCall, ProviderError> {
        let mut body = Map::new();
        body.insert("model".into(), json!(self.agent.model));
        body.insert("messages".into(), json!(messages));
        if !tool_defs.is_empty() {
            body.insert("tools".into(), json!(tool_defs));
        }
        if let Some(t) = self.temperature.or(self.agent.temperature) {
            body.insert("temperature".into(), json!(t));
        }
        if let Some(m) = self.max_tokens.or(self.agent.max_tokens) {
            body.insert("max_tokens".into(), json!(m));
        }
        if let Some(effort) = self.reasoning_effort {
            body.insert("reasoning_effort".into(), json!(effort));
        }
        let session = self.session.as_ref().map(|s| s.id.as_str());
        body.insert(
            "prompt_cache_key".into(),
            json!(prompt::cache_key(&self.agent.id, session)),
        );
        if stream {
            body.insert("stream".into(), json!(true));
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
        let parsed: ChatRequest = serde_json::from_value(Value::Object(body.clone()))
            .map_err(|e| ProviderError::InvalidRequest(format!("agent request: {e}")))?;
        let mut who = self.who.clone();
        who.agent = Some(self.agent.id.clone());
        who.session = self.session.as_ref().map(|s| s.id.clone());
        Ok(ChatCall {
            body: body.into(),
            request: parsed,
            who,
            tool_token: None,
        })
    }
}

/// What a run emits, in order; the last is `Done` or `Failed`.
#[derive(Debug)]
pub enum RunEvent {
    Text(String),
    ToolStarted {
        id: String,
        name: String,
        arguments: Value,
    },
    ToolFinished {
        id: String,
        name: String,
        summary: String,
        is_error: bool,
    },
    ApprovalRequired {
        id: String,
        tool: String,
        arguments: Value,
    },
    /// The history was compacted to fit the model's window; `notice` tells the user.
    Compacted {
        notice: String,
        before_tokens: usize,
        after_tokens: usize,
        fallback: bool,
    },
    Done(Box<Outcome>),
    /// The run could not finish (or was cancelled). Shared: every client
    /// attached to the run gets the same event.
    Failed(Arc<AgentError>),
}

#[derive(Debug, Clone)]
pub struct Outcome {
    pub content: String,
    /// `stop`, `tool_calls` (the client's tools) or `length` (iteration limit).
    pub finish_reason: &'static str,
    /// Calls to the client's own tools, when the model made any.
    pub client_tool_calls: Option<Vec<ToolCall>>,
    pub usage: Usage,
    pub model: String,
    pub iterations: u32,
    pub tools_used: Vec<String>,
    /// What the user should be told beside the answer (a compaction).
    pub notices: Vec<String>,
}

/// The text and tool calls of a completion's (first) message; none for a
/// completion without a choice.
pub(super) fn reply_of(completion: &Completion) -> (String, Vec<ToolCall>) {
    let message = completion.message();
    let content = message.map(Message::text_content).unwrap_or_default();
    let calls = message.and_then(|m| m.tool_calls.clone()).unwrap_or_default();
    (content, calls)
}
