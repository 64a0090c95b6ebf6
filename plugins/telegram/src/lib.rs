//! Telegram for Onyx: long polling on the Bot API (`getUpdates`), replies with
//! `sendMessage` (buttons as an inline keyboard), typing with
//! `sendChatAction`; a pressed button arrives as a callback query and is
//! answered with `answerCallbackQuery` (and, once decided, its keyboard is
//! taken off with `editMessageReplyMarkup`). The API base URL is a setting, for
//! tests and self-hosted Bot API servers.
//!
//! Settings (`plugins.telegram` in onyx.json5): `token` (or `$TELEGRAM_BOT_TOKEN`),
//! `apiUrl` (default `https://api.telegram.org`), `pollTimeoutSeconds` (default 25).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::future::BoxFuture;
use onyx_plugin_sdk::{
    Attachment, ButtonPress, IncomingMessage, OutgoingMessage, Plugin, PluginContext, PluginError,
    PressAnswer,
};
use serde::Deserialize;
use teloxide_core::Bot;
use teloxide_core::payloads::{AnswerCallbackQuerySetters, GetUpdatesSetters, SendMessageSetters};
use teloxide_core::requests::Requester;
use teloxide_core::types::{
    AllowedUpdate, CallbackQuery, ChatAction, ChatId, InlineKeyboardButton, InlineKeyboardMarkup, Message,
    MessageId, ReplyParameters, UpdateKind,
};

/// Telegram's limit on one message.
pub const MAX_MESSAGE_CHARS: usize = 4096;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Settings {
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    api_url: Option<String>,
    #[serde(default)]
    poll_timeout_seconds: Option<u32>,
}

pub struct Telegram {
    bot: Bot,
    poll_timeout: u32,
    stopping: AtomicBool,
    stop: tokio::sync::Notify,
}

impl Telegram {
    /// Builds the plugin from its settings; `env` looks up `TELEGRAM_BOT_TOKEN`
    /// when no token is set. Settings the core reads (`allowFrom`) are ignored here.
    pub fn from_settings(
        settings: &serde_json::Value,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, PluginError> {
        let settings: Settings = onyx_plugin_sdk::own_settings("telegram", settings)?;
        let token = onyx_plugin_sdk::token(
            "telegram",
            settings.token,
            "TELEGRAM_BOT_TOKEN",
            env,
            "the token @BotFather gave you",
        )?;
        let mut bot = Bot::new(token);
        if let Some(api_url) = settings.api_url.filter(|u| !u.trim().is_empty()) {
            let url = url::Url::parse(api_url.trim())
                .map_err(|e| PluginError::Config(format!("plugins.telegram.apiUrl: {e}")))?;
            bot = bot.set_api_url(url);
        }
        Ok(Self {
            bot,
            poll_timeout: settings.poll_timeout_seconds.unwrap_or(25).min(50),
            stopping: AtomicBool::new(false),
            stop: tokio::sync::Notify::new(),
        })
    }

    async fn poll(&self, ctx: Arc<dyn PluginContext>) -> Result<(), PluginError> {
        let me = self.bot.get_me().await.map_err(platform)?;
        ctx.connected(&format!("@{}", me.username.clone().unwrap_or_default()));
        let mut offset: i32 = 0;
        loop {
            let request = self
                .bot
                .get_updates()
                .offset(offset)
                .timeout(self.poll_timeout)
                .allowed_updates([AllowedUpdate::Message, AllowedUpdate::CallbackQuery]);
            let updates = tokio::select! {
                updates = request.into_future_boxed() => updates.map_err(platform)?,
                () = self.stop.notified() => return Ok(()),
            };
            for update in updates {
                offset = offset.max(update.id.as_offset());
                match update.kind {
                    UpdateKind::Message(message) => {
                        if let Some(incoming) = incoming(&message) {
                            ctx.deliver(incoming);
                        }
                    }
                    UpdateKind::CallbackQuery(query) => self.answer(&ctx, query).await,
                    _ => {}
                }
            }
            if self.stopping.load(Ordering::SeqCst) {
                return Ok(());
            }
        }
    }
}

impl Telegram {
    /// A pressed inline button: the core decides, the presser sees its
    /// answer, and a decided request's keyboard goes away.
    async fn answer(&self, ctx: &Arc<dyn PluginContext>, query: CallbackQuery) {
        let answer = match &query.data {
            Some(data) => {
                ctx.pressed(ButtonPress {
                    platform: "telegram".into(),
                    chat_id: query
                        .message
                        .as_ref()
                        .map(|m| m.chat().id.0.to_string())
                        .unwrap_or_default(),
                    user_id: query.from.id.0.to_string(),
                    data: data.clone(),
                })
                .await
            }
            None => PressAnswer {
                text: String::new(),
                close: false,
            },
        };
        if let Err(err) = self.bot.answer_callback_query(query.id).text(answer.text).await {
            tracing::warn!(error = %err, "could not answer a Telegram callback query");
        }
        if answer.close
            && let Some(message) = &query.message
            && let Err(err) = self
                .bot
                .edit_message_reply_markup(message.chat().id, message.id())
                .await
        {
            tracing::warn!(error = %err, "could not take the buttons off a decided request");
        }
    }
}

fn platform(err: impl std::fmt::Display) -> PluginError {
    PluginError::Platform(err.to_string())
}

/// A text message as the core sees it (other kinds of message are ignored).
fn incoming(message: &Message) -> Option<IncomingMessage> {
    let user = message.from.as_ref()?;
    if user.is_bot {
        return None;
    }
    let text = message.text().or_else(|| message.caption())?.to_string();
    let attachments = message
        .document()
        .map(|d| Attachment {
            file_name: d.file_name.clone(),
            mime_type: d.mime_type.as_ref().map(ToString::to_string),
            size_bytes: Some(u64::from(d.file.size)),
            url: None,
        })
        .into_iter()
        .collect();
    Some(IncomingMessage {
        platform: "telegram".into(),
        message_id: message.id.0.to_string(),
        chat_id: message.chat.id.0.to_string(),
        guild_id: None,
        direct: message.chat.is_private(),
        user_id: user.id.0.to_string(),
        user_name: Some(user.username.clone().unwrap_or_else(|| user.first_name.clone())),
        text,
        reply_to: message.reply_to_message().map(|m| m.id.0.to_string()),
        attachments,
    })
}

fn chat_id(text: &str) -> Result<ChatId, PluginError> {
    text.parse::<i64>()
        .map(ChatId)
        .map_err(|_| PluginError::Platform(format!("{text:?} is not a Telegram chat id")))
}

/// `IntoFuture` for teloxide requests, boxed so `select!` can hold it.
trait IntoFutureBoxed: std::future::IntoFuture + Sized
where
    Self::IntoFuture: Send + 'static,
{
    fn into_future_boxed(self) -> BoxFuture<'static, Self::Output> {
        Box::pin(self.into_future())
    }
}

impl<T> IntoFutureBoxed for T
where
    T: std::future::IntoFuture,
    T::IntoFuture: Send + 'static,
{
}

impl Plugin for Telegram {
    fn name(&self) -> &str {
        "telegram"
    }

    fn max_message_chars(&self) -> usize {
        MAX_MESSAGE_CHARS
    }

    fn start(&self, ctx: Arc<dyn PluginContext>) -> BoxFuture<'_, Result<(), PluginError>> {
        self.stopping.store(false, Ordering::SeqCst);
        Box::pin(self.poll(ctx))
    }

    fn stop(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.stopping.store(true, Ordering::SeqCst);
            self.stop.notify_waiters();
        })
    }

    fn send(&self, message: OutgoingMessage) -> BoxFuture<'_, Result<(), PluginError>> {
        Box::pin(async move {
            let mut request = self.bot.send_message(chat_id(&message.chat_id)?, message.text);
            if !message.buttons.is_empty() {
                let row = message
                    .buttons
                    .into_iter()
                    .map(|b| InlineKeyboardButton::callback(b.label, b.data));
                request = request.reply_markup(InlineKeyboardMarkup::new([row]));
            }
            if let Some(reply_to) = message.reply_to.and_then(|id| id.parse::<i32>().ok()) {
                request = request.reply_parameters(
                    ReplyParameters::new(MessageId(reply_to)).allow_sending_without_reply(),
                );
            }
            request.await.map(|_| ()).map_err(platform)
        })
    }

    fn typing(&self, chat: &str) -> BoxFuture<'_, Result<(), PluginError>> {
        let chat = chat.to_string();
        Box::pin(async move {
            self.bot
                .send_chat_action(chat_id(&chat)?, ChatAction::Typing)
                .await
                .map(|_| ())
                .map_err(platform)
        })
    }
}
