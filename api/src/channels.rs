//! Where results can go besides an HTTP response: running chat plugins
//! register a sender per platform, and scheduled tasks deliver to targets such
//! as `telegram:<chat_id>` through it.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use futures::future::BoxFuture;
use onyx_plugin_sdk::{Button, PluginError};

/// Platforms a `deliver_to` target may name.
pub const PLATFORMS: &[&str] = &["telegram", "discord"];

pub trait ChannelSender: Send + Sync {
    /// Posts `text` to one chat (split at the platform's limit by the sender).
    fn send(&self, chat: String, text: String) -> BoxFuture<'static, Result<(), PluginError>>;
    /// Posts `text` (cut to one message) with buttons under it.
    fn send_with_buttons(
        &self,
        chat: String,
        text: String,
        buttons: Vec<Button>,
    ) -> BoxFuture<'static, Result<(), PluginError>>;
}

/// Why a result could not be sent to a chat.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error("{0:?} is not a target like \"telegram:<chat_id>\"")]
    BadTarget(String),
    #[error("{platform:?} is not a chat platform ({known})", known = PLATFORMS.join(", "))]
    UnknownPlatform { platform: String },
    #[error("the {0} plugin is not running")]
    NotRunning(String),
    #[error("the {platform} plugin could not send the message")]
    Send {
        platform: String,
        #[source]
        source: PluginError,
    },
}

#[derive(Default)]
pub struct Channels {
    senders: RwLock<HashMap<String, Arc<dyn ChannelSender>>>,
}

/// Splits `platform:chat` and checks the platform is one Onyx knows.
pub fn parse_target(target: &str) -> Result<(&str, &str), ChannelError> {
    let (platform, chat) = target
        .split_once(':')
        .filter(|(_, chat)| !chat.trim().is_empty())
        .ok_or_else(|| ChannelError::BadTarget(target.into()))?;
    if !PLATFORMS.contains(&platform) {
        return Err(ChannelError::UnknownPlatform {
            platform: platform.into(),
        });
    }
    Ok((platform, chat))
}

impl Channels {
    pub fn register(&self, platform: &str, sender: Arc<dyn ChannelSender>) {
        if let Ok(mut senders) = self.senders.write() {
            senders.insert(platform.to_string(), sender);
        }
    }

    pub fn unregister(&self, platform: &str) {
        if let Ok(mut senders) = self.senders.write() {
            senders.remove(platform);
        }
    }

    /// Sends to `platform:chat`; an error says why it could not.
    pub async fn send(&self, target: &str, text: &str) -> Result<(), ChannelError> {
        let (platform, chat, sender) = self.sender(target)?;
        sender
            .send(chat.to_string(), text.to_string())
            .await
            .map_err(|source| ChannelError::Send {
                platform: platform.into(),
                source,
            })
    }

    /// Sends one message with buttons to `platform:chat`.
    pub async fn send_with_buttons(
        &self,
        target: &str,
        text: &str,
        buttons: Vec<Button>,
    ) -> Result<(), ChannelError> {
        let (platform, chat, sender) = self.sender(target)?;
        sender
            .send_with_buttons(chat.to_string(), text.to_string(), buttons)
            .await
            .map_err(|source| ChannelError::Send {
                platform: platform.into(),
                source,
            })
    }

    fn sender<'t>(
        &self,
        target: &'t str,
    ) -> Result<(&'t str, &'t str, Arc<dyn ChannelSender>), ChannelError> {
        let (platform, chat) = parse_target(target)?;
        let sender = self
            .senders
            .read()
            .ok()
            .and_then(|s| s.get(platform).cloned())
            .ok_or_else(|| ChannelError::NotRunning(platform.into()))?;
        Ok((platform, chat, sender))
    }
}
