//! Session data: log lines (one message each) and the metadata row.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::clock::now_stamp;
use crate::config::PermissionMode;
use crate::providers::types::{Content, Message, Role};

/// One message of a session log, as a JSONL line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct LogMessage {
    /// RFC 3339 UTC.
    pub ts: String,
    pub role: String,
    #[serde(default)]
    pub content: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Value>,
    /// Set on an assistant message cut short by the client going away.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub aborted: bool,
    /// On a compaction record: the log segment the history restarts at (so
    /// a reindex restores where the history starts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(skip))]
    pub kept_from: Option<u64>,
}

impl LogMessage {
    /// A message with plain text content, stamped now.
    pub fn plain(role: &str, text: impl Into<String>) -> Self {
        Self {
            ts: now_stamp(),
            role: role.to_string(),
            content: Value::String(text.into()),
            name: None,
            tool_calls: None,
            tool_call_id: None,
            model: None,
            usage: None,
            aborted: false,
            kept_from: None,
        }
    }

    /// A log line for an OpenAI-shaped chat message, stamped now (`None`
    /// without a role).
    pub fn from_openai(message: &Value, model: Option<&str>) -> Option<Self> {
        let mut line = Self::plain(message["role"].as_str()?, "");
        line.content = message.get("content").cloned().unwrap_or(Value::Null);
        line.name = message["name"].as_str().map(String::from);
        line.tool_calls = message.get("tool_calls").filter(|t| !t.is_null()).cloned();
        line.tool_call_id = message["tool_call_id"].as_str().map(String::from);
        line.model = model.map(String::from);
        Some(line)
    }

    /// A log line for a chat message, stamped now.
    pub fn from_message(message: &Message, model: Option<&str>) -> Self {
        let mut line = Self::plain(message.role.as_str(), "");
        line.content = message
            .content
            .as_ref()
            .and_then(|c| serde_json::to_value(c).ok())
            .unwrap_or(Value::Null);
        line.name = message.name.clone();
        line.tool_calls = message
            .tool_calls
            .as_ref()
            .and_then(|calls| serde_json::to_value(calls).ok());
        line.tool_call_id = message.tool_call_id.clone();
        line.model = model.map(String::from);
        line
    }

    /// The line as a chat message, for replaying history to a model (`None`
    /// for records that are not messages, such as compactions).
    pub fn to_message(&self) -> Option<Message> {
        let role = Role::parse(&self.role)?;
        Some(Message {
            role,
            // A log line is what a client or model sent; content or calls no
            // longer in a known shape replay as their text.
            content: match serde_json::from_value::<Option<Content>>(self.content.clone()) {
                Ok(content) => content,
                Err(_) => Some(Content::Text(self.text())),
            },
            name: self.name.clone(),
            tool_calls: self
                .tool_calls
                .as_ref()
                .and_then(|calls| serde_json::from_value(calls.clone()).ok()),
            tool_call_id: self.tool_call_id.clone(),
            extra: serde_json::Map::new(),
        })
    }

    /// The text of the content (string content, or the text parts joined).
    pub fn text(&self) -> String {
        crate::text::content_text(&self.content)
    }

    /// The message as an OpenAI chat message, for replaying history upstream.
    pub fn to_openai(&self) -> Value {
        let mut message = serde_json::json!({"role": self.role, "content": self.content});
        if let Some(name) = &self.name {
            message["name"] = Value::String(name.clone());
        }
        if let Some(calls) = &self.tool_calls {
            message["tool_calls"] = calls.clone();
        }
        if let Some(id) = &self.tool_call_id {
            message["tool_call_id"] = Value::String(id.clone());
        }
        message
    }

    /// The message with the usage (OpenAI's shape) of the model call that made it.
    pub fn with_usage(mut self, usage: Option<Value>) -> Self {
        self.usage = usage;
        self
    }

    pub fn tokens(&self) -> u64 {
        self.usage
            .as_ref()
            .and_then(|u| u["total_tokens"].as_u64())
            .unwrap_or(0)
    }

    /// Prompt tokens the provider read from its prompt cache
    /// (`usage.prompt_tokens_details.cached_tokens`).
    pub fn cached_tokens(&self) -> u64 {
        self.usage
            .as_ref()
            .and_then(|u| u["prompt_tokens_details"]["cached_tokens"].as_u64())
            .unwrap_or(0)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "SessionStatus")]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "SessionStatus"))]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Active,
    Archived,
}

/// A session's metadata (the `session` table; rebuildable from the log).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct SessionMeta {
    pub id: String,
    pub agent_id: String,
    pub title: String,
    pub created_at: String,
    pub updated_at: String,
    pub message_count: u64,
    pub token_count: u64,
    /// Of the prompt tokens, those read from the provider's prompt cache.
    #[serde(default)]
    pub cached_tokens: u64,
    pub last_message_preview: String,
    pub status: Status,
    pub source: String,
    /// What this conversation overrides of its agent (none: the agent's own).
    #[serde(default)]
    pub settings: SessionSettings,
}

/// A session's own model, reasoning effort and permission mode, applied to
/// every later turn of it (`RunRequest::apply_session_settings`). Unset: the
/// agent's. The mode is never above the agent's own.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct SessionSettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub reasoning_effort: Option<ReasoningEffort>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional, type = "\"safe\" | \"ask\" | \"allow-all\""))]
    pub permission_mode: Option<PermissionMode>,
}

/// How hard a reasoning model thinks (the chat request's `reasoning_effort`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum ReasoningEffort {
    Minimal,
    Low,
    Medium,
    High,
}

/// Filters of `GET /v1/sessions`.
#[derive(Debug, Default, Clone)]
pub struct ListFilter {
    pub agent: Option<String>,
    pub status: Option<Status>,
    pub source: Option<String>,
    pub updated_since: Option<String>,
    pub query: Option<String>,
    pub limit: usize,
    pub cursor: Option<String>,
}
