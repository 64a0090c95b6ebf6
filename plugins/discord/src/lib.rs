//! Discord for Onyx: the gateway (twilight-gateway) for incoming messages —
//! direct messages, and messages that mention the bot in server channels —
//! and button presses (message-component interactions), and REST
//! (twilight-http) for replies (buttons as message components), typing and
//! interaction responses. Both URLs are settings, for tests and proxies.
//!
//! Settings (`plugins.discord` in onyx.json5): `token` (or `$DISCORD_BOT_TOKEN`),
//! `apiUrl` (default `https://discord.com`), `gatewayUrl` (default: Discord's).

use std::sync::Arc;

use futures::future::BoxFuture;
use onyx_plugin_sdk::{
    Attachment, ButtonPress, IncomingMessage, OutgoingMessage, Plugin, PluginContext, PluginError,
};
use serde::Deserialize;
use twilight_gateway::{CloseFrame, Event, EventTypeFlags, Intents, Shard, ShardId, StreamExt as _};
use twilight_model::application::interaction::{Interaction, InteractionData};
use twilight_model::channel::Message;
use twilight_model::channel::message::MessageFlags;
use twilight_model::channel::message::component::{ActionRow, Button, ButtonStyle, Component};
use twilight_model::http::interaction::{
    InteractionResponse, InteractionResponseData, InteractionResponseType,
};
use twilight_model::id::Id;
use twilight_model::id::marker::{ChannelMarker, UserMarker};

/// Discord's limit on one message.
pub const MAX_MESSAGE_CHARS: usize = 2000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Settings {
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    api_url: Option<String>,
    #[serde(default)]
    gateway_url: Option<String>,
}

pub struct Discord {
    token: String,
    gateway_url: Option<String>,
    http: twilight_http::Client,
    stop: tokio::sync::Notify,
}

impl Discord {
    /// Builds the plugin from its settings; `env` looks up `DISCORD_BOT_TOKEN`
    /// when no token is set. Settings the core reads (`allowFrom`) are ignored here.
    pub fn from_settings(
        settings: &serde_json::Value,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, PluginError> {
        let settings: Settings = onyx_plugin_sdk::own_settings("discord", settings)?;
        let token = onyx_plugin_sdk::token(
            "discord",
            settings.token,
            "DISCORD_BOT_TOKEN",
            env,
            "your bot's token (Developer Portal → Bot)",
        )?;
        // rustls needs one process-wide crypto provider; another may already be set.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut http = twilight_http::Client::builder().token(token.clone());
        if let Some(api_url) = settings.api_url.filter(|u| !u.trim().is_empty()) {
            let (use_http, host) = match api_url.trim().trim_end_matches('/').split_once("://") {
                Some(("http", host)) => (true, host.to_string()),
                Some(("https", host)) => (false, host.to_string()),
                _ => {
                    return Err(PluginError::Config(format!(
                        "plugins.discord.apiUrl: {api_url:?} must start with http:// or https://"
                    )));
                }
            };
            http = http.proxy(host, use_http);
        }
        Ok(Self {
            token,
            gateway_url: settings.gateway_url.filter(|u| !u.trim().is_empty()),
            http: http.build(),
            stop: tokio::sync::Notify::new(),
        })
    }

    async fn receive(&self, ctx: Arc<dyn PluginContext>) -> Result<(), PluginError> {
        let intents = Intents::GUILD_MESSAGES | Intents::DIRECT_MESSAGES | Intents::MESSAGE_CONTENT;
        let mut config = twilight_gateway::ConfigBuilder::new(self.token.clone(), intents);
        if let Some(url) = &self.gateway_url {
            config = config.proxy_url(url.trim_end_matches('/').to_string());
        }
        let mut shard = Shard::with_config(ShardId::ONE, config.build());
        let wanted = EventTypeFlags::READY
            | EventTypeFlags::RESUMED
            | EventTypeFlags::MESSAGE_CREATE
            | EventTypeFlags::INTERACTION_CREATE;
        let mut me: Option<Id<UserMarker>> = None;
        loop {
            let item = tokio::select! {
                item = shard.next_event(wanted) => item,
                () = self.stop.notified() => {
                    shard.close(CloseFrame::NORMAL);
                    return Ok(());
                }
            };
            // The shard reconnects by itself after dropped connections; it
            // only ends when it cannot go on (a bad token, say).
            let event = match item {
                None => return Err(PluginError::Platform("the gateway connection ended".into())),
                Some(Err(err)) => {
                    tracing::warn!(error = %err, "discord gateway error; reconnecting");
                    continue;
                }
                Some(Ok(event)) => event,
            };
            match event {
                Event::Ready(ready) => {
                    me = Some(ready.user.id);
                    ctx.connected(&ready.user.name);
                }
                Event::Resumed => ctx.connected("resumed"),
                Event::MessageCreate(message) => {
                    if let Some(me) = me
                        && let Some(incoming) = incoming(&message, me)
                    {
                        ctx.deliver(incoming);
                    }
                }
                Event::InteractionCreate(interaction) => self.answer(&ctx, &interaction).await,
                _ => {}
            }
        }
    }
}

impl Discord {
    /// A pressed button: the core decides, the presser gets its answer as a
    /// reply only they can see.
    async fn answer(&self, ctx: &Arc<dyn PluginContext>, interaction: &Interaction) {
        let Some(InteractionData::MessageComponent(data)) = &interaction.data else {
            return;
        };
        let press = ButtonPress {
            platform: "discord".into(),
            chat_id: interaction
                .channel
                .as_ref()
                .map(|c| c.id.to_string())
                .unwrap_or_default(),
            user_id: interaction
                .author_id()
                .map(|id| id.to_string())
                .unwrap_or_default(),
            data: data.custom_id.clone(),
        };
        let answer = ctx.pressed(press).await;
        let response = match &interaction.message {
            // Decided: the request's message says so and loses its buttons.
            Some(message) if answer.close => InteractionResponse {
                kind: InteractionResponseType::UpdateMessage,
                data: Some(InteractionResponseData {
                    content: Some(format!("{}\n\n{}", message.content, answer.text)),
                    components: Some(Vec::new()),
                    ..InteractionResponseData::default()
                }),
            },
            _ => InteractionResponse {
                kind: InteractionResponseType::ChannelMessageWithSource,
                data: Some(InteractionResponseData {
                    content: Some(answer.text),
                    flags: Some(MessageFlags::EPHEMERAL),
                    ..InteractionResponseData::default()
                }),
            },
        };
        if let Err(err) = self
            .http
            .interaction(interaction.application_id)
            .create_response(interaction.id, &interaction.token, &response)
            .await
        {
            tracing::warn!(error = %err, "could not answer a Discord interaction");
        }
    }
}

/// One row of buttons; the first is the affirmative one.
fn components(buttons: &[onyx_plugin_sdk::Button]) -> Vec<Component> {
    let buttons = buttons
        .iter()
        .enumerate()
        .map(|(i, b)| {
            Component::Button(Button {
                custom_id: Some(b.data.clone()),
                disabled: false,
                emoji: None,
                id: None,
                label: Some(b.label.clone()),
                sku_id: None,
                style: if i == 0 {
                    ButtonStyle::Success
                } else {
                    ButtonStyle::Danger
                },
                url: None,
            })
        })
        .collect();
    vec![Component::ActionRow(ActionRow {
        components: buttons,
        id: None,
    })]
}

fn platform(err: impl std::fmt::Display) -> PluginError {
    PluginError::Platform(err.to_string())
}

/// A direct message, or a server message mentioning the bot (mention removed).
fn incoming(message: &Message, me: Id<UserMarker>) -> Option<IncomingMessage> {
    if message.author.bot || message.author.id == me {
        return None;
    }
    let direct = message.guild_id.is_none();
    let mentioned = message.mentions.iter().any(|m| m.id == me);
    if !direct && !mentioned {
        return None;
    }
    let text = message
        .content
        .replace(&format!("<@{me}>"), "")
        .replace(&format!("<@!{me}>"), "")
        .trim()
        .to_string();
    if text.is_empty() && message.attachments.is_empty() {
        return None;
    }
    Some(IncomingMessage {
        platform: "discord".into(),
        message_id: message.id.to_string(),
        chat_id: message.channel_id.to_string(),
        guild_id: message.guild_id.map(|g| g.to_string()),
        direct,
        user_id: message.author.id.to_string(),
        user_name: Some(message.author.name.clone()),
        text,
        reply_to: message
            .reference
            .as_ref()
            .and_then(|r| r.message_id)
            .map(|id| id.to_string()),
        attachments: message
            .attachments
            .iter()
            .map(|a| Attachment {
                file_name: Some(a.filename.clone()),
                mime_type: a.content_type.clone(),
                size_bytes: Some(a.size),
                url: Some(a.url.clone()),
            })
            .collect(),
    })
}

fn channel(text: &str) -> Result<Id<ChannelMarker>, PluginError> {
    text.parse::<u64>()
        .ok()
        .and_then(Id::new_checked)
        .ok_or_else(|| PluginError::Platform(format!("{text:?} is not a Discord channel id")))
}

impl Plugin for Discord {
    fn name(&self) -> &str {
        "discord"
    }

    fn max_message_chars(&self) -> usize {
        MAX_MESSAGE_CHARS
    }

    fn start(&self, ctx: Arc<dyn PluginContext>) -> BoxFuture<'_, Result<(), PluginError>> {
        Box::pin(self.receive(ctx))
    }

    fn stop(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move { self.stop.notify_waiters() })
    }

    fn send(&self, message: OutgoingMessage) -> BoxFuture<'_, Result<(), PluginError>> {
        Box::pin(async move {
            let channel = channel(&message.chat_id)?;
            let reply = message
                .reply_to
                .as_deref()
                .and_then(|id| id.parse::<u64>().ok())
                .and_then(Id::new_checked);
            let components = components(&message.buttons);
            let mut request = self.http.create_message(channel).content(&message.text);
            if !message.buttons.is_empty() {
                request = request.components(&components);
            }
            if let Some(reply) = reply {
                request = request.reply(reply).fail_if_not_exists(false);
            }
            request.await.map(|_| ()).map_err(platform)
        })
    }

    fn typing(&self, chat: &str) -> BoxFuture<'_, Result<(), PluginError>> {
        let chat = chat.to_string();
        Box::pin(async move {
            self.http
                .create_typing_trigger(channel(&chat)?)
                .await
                .map(|_| ())
                .map_err(platform)
        })
    }
}
