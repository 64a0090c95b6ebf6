//! `onyx-plugin-sdk`: the contract between Onyx and its chat-platform plugins
//! (Telegram, Discord, …). A plugin receives a [`PluginContext`] when started,
//! hands every incoming chat message to it, and is asked to [`Plugin::send`]
//! replies. Nothing here knows about HTTP or storage, so a plugin can later
//! move out of process without touching the core.

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

/// A message a user sent on a chat platform.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IncomingMessage {
    /// The platform, as used in bindings and session sources: `telegram`, `discord`.
    pub platform: String,
    pub chat_id: String,
    /// The server (Discord guild) the chat belongs to, if any.
    pub guild_id: Option<String>,
    pub user_id: String,
    pub user_name: Option<String>,
    pub text: String,
    /// The platform's id of the message this one replies to.
    pub reply_to: Option<String>,
    pub attachments: Vec<Attachment>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    pub file_name: Option<String>,
    pub mime_type: Option<String>,
    pub size_bytes: Option<u64>,
    /// Where the platform serves the file, when it says.
    pub url: Option<String>,
}

/// A message for the platform to deliver to one chat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutgoingMessage {
    pub chat_id: String,
    pub text: String,
    pub reply_to: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    #[error("plugin configuration: {0}")]
    Config(String),
    #[error("platform: {0}")]
    Platform(String),
}

/// The core's side: where a running plugin hands the messages it receives.
pub trait PluginContext: Send + Sync {
    /// Routes one incoming message to an agent; replies come back through `send`.
    fn deliver(&self, message: IncomingMessage) -> BoxFuture<'_, Result<(), PluginError>>;
    /// Shows (or refreshes) a typing indicator while an agent works.
    fn typing(&self, chat_id: &str) -> BoxFuture<'_, ()>;
}

/// A chat-platform connector, run by the core's plugin manager.
pub trait Plugin: Send + Sync {
    fn name(&self) -> &str;
    /// Connects and runs until `stop`; returning an error lets the manager restart it.
    fn start(&self, ctx: std::sync::Arc<dyn PluginContext>) -> BoxFuture<'_, Result<(), PluginError>>;
    fn stop(&self) -> BoxFuture<'_, ()>;
    fn send(&self, message: OutgoingMessage) -> BoxFuture<'_, Result<(), PluginError>>;
}
