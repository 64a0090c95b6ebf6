//! Records one chat turn into a session: the client's new messages plus the
//! assistant's answer, appended together so a turn is never split. For a
//! stream the answer is assembled from the chunks; if the client goes away
//! first, the partial answer is stored marked `"aborted": true`.

use std::sync::Arc;

use serde_json::{Value, json};

use super::service::Sessions;
use super::types::{LogMessage, SessionMeta};
use crate::clock::now_stamp;

/// The client's messages, as log lines (system prompts are not part of the log).
pub fn client_messages(messages: &[Value]) -> Vec<LogMessage> {
    messages
        .iter()
        .filter(|m| !matches!(m["role"].as_str(), Some("system" | "developer")))
        .filter_map(|m| LogMessage::from_openai(m, None))
        .collect()
}

/// The assistant message of a complete `chat.completion`.
pub fn assistant_from_completion(completion: &Value, model: &str) -> LogMessage {
    let message = &completion["choices"][0]["message"];
    LogMessage {
        ts: now_stamp(),
        role: "assistant".into(),
        content: message.get("content").cloned().unwrap_or(Value::Null),
        name: None,
        tool_calls: message.get("tool_calls").filter(|t| !t.is_null()).cloned(),
        tool_call_id: None,
        model: Some(model.to_string()),
        usage: completion.get("usage").filter(|u| u.is_object()).cloned(),
        aborted: false,
        kept_from: None,
    }
}

/// Assembles an assistant message from streamed chunks.
pub struct StreamRecorder {
    sessions: Arc<Sessions>,
    session: SessionMeta,
    turn: Vec<LogMessage>,
    model: String,
    content: String,
    tool_calls: Vec<(String, String, String)>,
    usage: Option<Value>,
    handed_off: bool,
}

impl StreamRecorder {
    pub fn new(sessions: Arc<Sessions>, session: SessionMeta, turn: Vec<LogMessage>, model: String) -> Self {
        Self {
            sessions,
            session,
            turn,
            model,
            content: String::new(),
            tool_calls: Vec::new(),
            usage: None,
            handed_off: false,
        }
    }

    pub fn observe(&mut self, chunk: &Value) {
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(usage.clone());
        }
        let delta = &chunk["choices"][0]["delta"];
        if let Some(text) = delta["content"].as_str() {
            self.content.push_str(text);
        }
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            let index = call["index"].as_u64().unwrap_or(0) as usize;
            if self.tool_calls.len() <= index {
                self.tool_calls.resize(index + 1, Default::default());
            }
            let slot = &mut self.tool_calls[index];
            if let Some(id) = call["id"].as_str() {
                slot.0 = id.to_string();
            }
            if let Some(name) = call["function"]["name"].as_str() {
                slot.1.push_str(name);
            }
            if let Some(args) = call["function"]["arguments"].as_str() {
                slot.2.push_str(args);
            }
        }
    }

    fn turn(&mut self, aborted: bool) -> Vec<LogMessage> {
        let tool_calls = (!self.tool_calls.is_empty()).then(|| {
            Value::Array(
                self.tool_calls
                    .iter()
                    .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}))
                    .collect(),
            )
        });
        let mut turn = std::mem::take(&mut self.turn);
        turn.push(LogMessage {
            ts: now_stamp(),
            role: "assistant".into(),
            content: if self.content.is_empty() && tool_calls.is_some() {
                Value::Null
            } else {
                json!(self.content)
            },
            name: None,
            tool_calls,
            tool_call_id: None,
            model: Some(self.model.clone()),
            usage: self.usage.take(),
            aborted,
            kept_from: None,
        });
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
