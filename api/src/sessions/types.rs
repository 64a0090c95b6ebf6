//! Session data: the metadata row and its settings (a log line is
//! `log_message`).

use serde::{Deserialize, Serialize};

use crate::config::PermissionMode;

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
