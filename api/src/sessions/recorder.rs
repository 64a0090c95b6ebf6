//! Records one chat turn into a session: the client's new messages plus the
//! assistant's answer, appended together so a turn is never split. For a
//! stream the answer is assembled from the chunks; if the client goes away
//! first, the partial answer is stored marked `"aborted": true`.

use std::sync::Arc;

use super::log_message::LogMessage;
use super::service::Sessions;
use super::types::SessionMeta;
use crate::chat::{Assembler, ChatChunk, Completion, Message, Role};

/// The client's messages, as log lines (system prompts are not part of the log).
pub fn client_messages(messages: &[Message]) -> Vec<LogMessage> {
    messages
        .iter()
        .filter(|m| !matches!(m.role, Role::System | Role::Developer))
        .cloned()
        .map(LogMessage::new)
        .collect()
}

/// The assistant message of a complete `chat.completion` (an answer without
/// a choice is an empty one).
pub fn assistant_from_completion(completion: &Completion, model: &str) -> LogMessage {
    let mut message = completion
        .message()
        .cloned()
        .unwrap_or_else(|| Message::answer(None, Vec::new()));
    message.role = Role::Assistant;
    LogMessage::new(message)
        .with_model(model)
        .with_usage(completion.usage.clone())
}

/// Assembles an assistant message from streamed chunks.
pub struct StreamRecorder {
    sessions: Arc<Sessions>,
    session: SessionMeta,
    turn: Vec<LogMessage>,
    model: String,
    answer: Assembler,
    handed_off: bool,
}

impl StreamRecorder {
    pub fn new(sessions: Arc<Sessions>, session: SessionMeta, turn: Vec<LogMessage>, model: String) -> Self {
        Self {
            sessions,
            session,
            turn,
            model,
            answer: Assembler::new(),
            handed_off: false,
        }
    }

    /// Adds a chunk of the answer.
    pub fn observe(&mut self, chunk: &ChatChunk) {
        self.answer.push(chunk);
    }

    fn turn(&mut self, aborted: bool) -> Vec<LogMessage> {
        let assembled = std::mem::take(&mut self.answer).finish();
        let mut answer = LogMessage::new(assembled.message)
            .with_model(self.model.clone())
            .with_usage(assembled.usage);
        answer.aborted = aborted;
        let mut turn = std::mem::take(&mut self.turn);
        turn.push(answer);
        turn
    }

    /// Stores the finished turn. The write runs in its own task, so it completes
    /// even if the client disconnects while it is under way.
    pub async fn finish(mut self) {
        self.handed_off = true;
        let turn = self.turn(false);
        let task = tokio::spawn(store(self.sessions.clone(), self.session.clone(), turn));
        let _ = task.await;
    }
}

impl Drop for StreamRecorder {
    fn drop(&mut self) {
        if self.handed_off {
            return;
        }
        let turn = self.turn(true);
        tokio::spawn(store(self.sessions.clone(), self.session.clone(), turn));
    }
}

pub async fn store(sessions: Arc<Sessions>, session: SessionMeta, turn: Vec<LogMessage>) {
    if let Err(err) = sessions.append(&session, turn).await {
        tracing::error!(session = %session.id, error = %err, "could not record the turn");
    }
}
