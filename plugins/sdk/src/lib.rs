//! `onyx-plugin-sdk`: the contract between Onyx and its chat-platform plugins
//! (Telegram, Discord, …). A plugin receives a [`PluginContext`] when started,
//! hands every incoming chat message to it, and is asked to [`Plugin::send`]
//! replies and show typing. Nothing here knows about HTTP or storage, so a
//! plugin can later move out of process without touching the core.

mod settings;
mod split;

use std::sync::Arc;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

pub use settings::{own_settings, token};
pub use split::split_message;

/// A message a user sent on a chat platform.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IncomingMessage {
    /// The platform, as used in bindings and session names: `telegram`, `discord`.
    pub platform: String,
    /// The platform's id of this message (replies point at it).
    pub message_id: String,
    pub chat_id: String,
    /// The server (Discord guild) the chat belongs to, if any.
    pub guild_id: Option<String>,
    /// A one-to-one chat with the bot (not a group or a server channel).
    pub direct: bool,
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

/// A message for the platform to deliver to one chat; already within
/// [`Plugin::max_message_chars`] (the core splits longer replies).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutgoingMessage {
    pub chat_id: String,
    pub text: String,
    pub reply_to: Option<String>,
    /// Buttons under the message, in one row (Telegram's inline keyboard,
    /// Discord's message components). A press comes back as a [`ButtonPress`].
    #[serde(default)]
    pub buttons: Vec<Button>,
}

impl OutgoingMessage {
    /// Plain text to one chat.
    pub fn text(chat_id: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            chat_id: chat_id.into(),
            text: text.into(),
            reply_to: None,
            buttons: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Button {
    pub label: String,
    /// What the press carries back (Telegram allows 64 bytes, Discord 100).
    pub data: String,
}

/// Someone pressed a button the bot posted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ButtonPress {
    pub platform: String,
    pub chat_id: String,
    pub user_id: String,
    /// The pressed button's [`Button::data`].
    pub data: String,
}

/// The core's answer to a button press.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PressAnswer {
    /// The short answer the presser sees (a callback answer, an ephemeral reply).
    pub text: String,
    /// The buttons are done with (the request was decided, or is no longer
    /// open): the plugin takes them off the message so nobody presses again.
    pub close: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The plugin's settings are unusable; restarting will not help.
    #[error("plugin configuration: {0}")]
    Config(String),
    /// The platform failed or the connection dropped; worth a restart.
    #[error("platform: {0}")]
    Platform(String),
}

/// The core's side: where a running plugin hands what it receives.
pub trait PluginContext: Send + Sync {
    /// Hands one incoming message to the core, which answers through
    /// [`Plugin::send`]. Returns at once; the agent works in the background.
    fn deliver(&self, message: IncomingMessage);
    /// Hands a button press to the core; resolves to what the plugin shows
    /// the presser, and whether to take the buttons off the message.
    fn pressed(&self, press: ButtonPress) -> BoxFuture<'static, PressAnswer>;
    /// The plugin is connected (again) and receiving.
    fn connected(&self, detail: &str);
}

/// A chat-platform connector, run by the core's plugin manager.
pub trait Plugin: Send + Sync {
    /// The platform name: `telegram`, `discord`.
    fn name(&self) -> &str;
    /// The platform's limit on one message, in characters.
    fn max_message_chars(&self) -> usize;
    /// Connects and receives until [`stop`](Plugin::stop) (then `Ok`); an
    /// error (a dropped connection) lets the manager restart it with backoff.
    fn start(&self, ctx: Arc<dyn PluginContext>) -> BoxFuture<'_, Result<(), PluginError>>;
    fn stop(&self) -> BoxFuture<'_, ()>;
    fn send(&self, message: OutgoingMessage) -> BoxFuture<'_, Result<(), PluginError>>;
    /// Shows a typing indicator in a chat for a few seconds.
    fn typing(&self, chat_id: &str) -> BoxFuture<'_, Result<(), PluginError>>;
}
