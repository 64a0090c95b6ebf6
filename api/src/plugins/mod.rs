//! Chat-platform plugins (Telegram, Discord) run in-process behind the
//! `onyx-plugin-sdk` trait. The manager builds the ones in `plugins.enabled`,
//! starts them with the gateway, restarts one that fails with backoff,
//! reports their state in `/health`, registers each as a delivery channel for
//! scheduled results, and stops them on shutdown.
//!
//! - `conversation`: answering one incoming message (access, commands, agent, reply)
//! - `routing`: bindings → agent
//! - `chats`: the session each chat is in

pub mod chats;
pub mod conversation;
pub mod routing;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::BoxFuture;
use onyx_plugin_sdk::{
    Button, ButtonPress, IncomingMessage, OutgoingMessage, Plugin, PluginContext, PluginError, PressAnswer,
};
use serde::Serialize;
use serde_json::Value;

pub use conversation::{AllowList, Conversations};

use crate::background::Background;
use crate::channels::{ChannelSender, Channels};
use crate::config::PluginsConfig;
use crate::health::{DependencyHealth, State};

const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// Connected this long, a plugin's next failure starts the backoff afresh.
const STABLE_AFTER: Duration = Duration::from_secs(60);

/// The plugins named in `plugins.enabled`, built, with who may talk to each.
pub struct Enabled {
    pub plugins: Vec<Arc<dyn Plugin>>,
    pub allow: HashMap<String, AllowList>,
}

/// Builds the enabled plugins and their allowlists; a plugin that cannot be
/// configured (no token) stops startup with a message saying what to set.
pub fn build(config: &PluginsConfig, env: &dyn Fn(&str) -> Option<String>) -> Result<Enabled, PluginError> {
    let mut plugins: Vec<Arc<dyn Plugin>> = Vec::new();
    let mut allow = HashMap::new();
    for name in &config.enabled {
        let settings = config
            .settings
            .get(name)
            .cloned()
            .unwrap_or(Value::Object(Default::default()));
        let plugin = construct(name, &settings, env)?;
        allow.insert(name.clone(), allow_list(&settings, name)?);
        plugins.push(plugin);
    }
    Ok(Enabled { plugins, allow })
}

/// The plugin named `name`, from its settings.
fn construct(
    name: &str,
    settings: &Value,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Arc<dyn Plugin>, PluginError> {
    // A build without a bot has nothing to give these to.
    #[cfg(not(all(feature = "telegram", feature = "discord")))]
    let _ = (settings, env);
    match name {
        #[cfg(feature = "telegram")]
        "telegram" => Ok(Arc::new(onyx_plugin_telegram::Telegram::from_settings(
            settings, env,
        )?)),
        #[cfg(not(feature = "telegram"))]
        "telegram" => Err(PluginError::Config(
            crate::features::TELEGRAM.missing("plugins.enabled: \"telegram\""),
        )),
        #[cfg(feature = "discord")]
        "discord" => Ok(Arc::new(onyx_plugin_discord::Discord::from_settings(
            settings, env,
        )?)),
        #[cfg(not(feature = "discord"))]
        "discord" => Err(PluginError::Config(
            crate::features::DISCORD.missing("plugins.enabled: \"discord\""),
        )),
        other => Err(PluginError::Config(format!(
            "plugins.enabled: there is no plugin {other:?} (available: telegram, discord)"
        ))),
    }
}

/// `allowFrom`: user ids as strings or numbers; `"*"` lets anyone in.
fn allow_list(settings: &Value, name: &str) -> Result<AllowList, PluginError> {
    let users = match settings.get("allowFrom") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => Ok(s.trim().to_string()),
                Value::Number(n) => Ok(n.to_string()),
                other => Err(PluginError::Config(format!(
                    "plugins.{name}.allowFrom: {other} is not a user id"
                ))),
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(other) => {
            return Err(PluginError::Config(format!(
                "plugins.{name}.allowFrom: expected a list of user ids, got {other}"
            )));
        }
    };
    if users.is_empty() {
        tracing::warn!(
            plugin = name,
            "plugins.{name}.allowFrom is empty: the bot will refuse everyone (add user ids, or \"*\")"
        );
    }
    Ok(AllowList::new(users))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "PluginPhase")]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "PluginPhase"))]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Starting,
    Up,
    Restarting,
    /// Misconfigured: not retried.
    Failed,
    Stopped,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Up => "up",
            Self::Restarting => "restarting",
            Self::Failed => "failed",
            Self::Stopped => "stopped",
        }
    }
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct PluginStatus {
    pub name: String,
    pub state: Phase,
    pub detail: Option<String>,
    pub restarts: u32,
}

struct Tracked {
    plugin: Arc<dyn Plugin>,
    status: Mutex<PluginStatus>,
    connected_at: Mutex<Option<Instant>>,
}

impl Tracked {
    fn update(&self, change: impl FnOnce(&mut PluginStatus)) {
        if let Ok(mut status) = self.status.lock() {
            change(&mut status);
        }
    }

    fn snapshot(&self) -> Option<PluginStatus> {
        self.status.lock().ok().map(|s| s.clone())
    }
}

/// What a plugin talks to: hands messages to the conversations, reports connection.
struct Core {
    tracked: Arc<Tracked>,
    conversations: Arc<Conversations>,
}

impl PluginContext for Core {
    fn deliver(&self, message: IncomingMessage) {
        self.conversations.enqueue(self.tracked.plugin.clone(), message);
    }

    fn pressed(&self, press: ButtonPress) -> BoxFuture<'static, PressAnswer> {
        let conversations = self.conversations.clone();
        Box::pin(async move { conversations.pressed(&press).await })
    }

    fn connected(&self, detail: &str) {
        if let Ok(mut at) = self.tracked.connected_at.lock() {
            *at = Some(Instant::now());
        }
        tracing::info!(plugin = self.tracked.plugin.name(), detail, "plugin connected");
        let detail = detail.to_string();
        self.tracked.update(|s| {
            s.state = Phase::Up;
            s.detail = Some(detail);
        });
    }
}

/// Scheduled results to `telegram:<chat>` go out through the plugin, split to fit.
struct Sender(Arc<dyn Plugin>);

impl ChannelSender for Sender {
    fn send(&self, chat: String, text: String) -> BoxFuture<'static, Result<(), PluginError>> {
        let plugin = self.0.clone();
        Box::pin(async move {
            for part in onyx_plugin_sdk::split_message(&text, plugin.max_message_chars()) {
                plugin.send(OutgoingMessage::text(chat.clone(), part)).await?;
            }
            Ok(())
        })
    }

    fn send_with_buttons(
        &self,
        chat: String,
        text: String,
        buttons: Vec<Button>,
    ) -> BoxFuture<'static, Result<(), PluginError>> {
        let plugin = self.0.clone();
        Box::pin(async move {
            let text = crate::text::ellipsize(&text, plugin.max_message_chars().saturating_sub(1));
            let message = OutgoingMessage {
                buttons,
                ..OutgoingMessage::text(chat, text)
            };
            plugin.send(message).await
        })
    }
}

#[derive(Default)]
pub struct Plugins {
    tracked: Vec<Arc<Tracked>>,
}

impl Plugins {
    /// Starts every plugin under supervision (in `background`) and registers
    /// it for delivery.
    pub fn start(
        plugins: Vec<Arc<dyn Plugin>>,
        conversations: Arc<Conversations>,
        channels: &Channels,
        background: &Background,
    ) -> Self {
        let mut tracked = Vec::new();
        for plugin in plugins {
            let entry = Arc::new(Tracked {
                status: Mutex::new(PluginStatus {
                    name: plugin.name().to_string(),
                    state: Phase::Starting,
                    detail: None,
                    restarts: 0,
                }),
                connected_at: Mutex::new(None),
                plugin: plugin.clone(),
            });
            let name = plugin.name().to_owned();
            channels.register(&name, Arc::new(Sender(plugin)));
            background.spawn(
                format!("plugin {name}"),
                supervise(entry.clone(), conversations.clone()),
            );
            tracked.push(entry);
        }
        Self { tracked }
    }

    pub fn statuses(&self) -> Vec<PluginStatus> {
        self.tracked.iter().filter_map(|t| t.snapshot()).collect()
    }

    /// One `/health` entry per plugin.
    pub fn health(&self) -> Vec<DependencyHealth> {
        self.statuses()
            .into_iter()
            .map(|s| DependencyHealth {
                name: s.name.clone(),
                kind: format!("plugin:{}", s.name),
                status: if s.state == Phase::Up {
                    State::Up
                } else {
                    State::Down
                },
                latency_ms: 0,
                detail: Some(match &s.detail {
                    Some(detail) => format!("{}: {detail} ({} restarts)", s.state.as_str(), s.restarts),
                    None => format!("{} ({} restarts)", s.state.as_str(), s.restarts),
                }),
            })
            .collect()
    }

    /// Stops every plugin (on shutdown).
    pub async fn stop(&self) {
        for tracked in &self.tracked {
            tracked.update(|s| s.state = Phase::Stopped);
            tracked.plugin.stop().await;
        }
    }
}

/// One run of a plugin; a panic counts as a crash, restarted like a dropped connection.
async fn run_once(plugin: &dyn Plugin, core: Arc<dyn PluginContext>) -> Result<(), PluginError> {
    std::panic::AssertUnwindSafe(plugin.start(core))
        .catch_unwind()
        .await
        .unwrap_or_else(|_| Err(PluginError::Platform("the plugin panicked".into())))
}

/// Runs a plugin until it is stopped; restarts it with backoff when it fails.
async fn supervise(tracked: Arc<Tracked>, conversations: Arc<Conversations>) {
    let name = tracked.plugin.name().to_string();
    let mut backoff = crate::backoff::Backoff::new(FIRST_BACKOFF, MAX_BACKOFF);
    loop {
        let core: Arc<dyn PluginContext> = Arc::new(Core {
            tracked: tracked.clone(),
            conversations: conversations.clone(),
        });
        let result = run_once(tracked.plugin.as_ref(), core).await;
        if tracked.snapshot().is_some_and(|s| s.state == Phase::Stopped) {
            return;
        }
        let stable = tracked
            .connected_at
            .lock()
            .ok()
            .and_then(|at| *at)
            .is_some_and(|at| at.elapsed() >= STABLE_AFTER);
        if stable {
            backoff.succeeded();
        }
        let error = match result {
            Err(PluginError::Config(message)) => {
                tracing::error!(plugin = %name, error = %message, "plugin misconfigured; not restarting");
                tracked.update(|s| {
                    s.state = Phase::Failed;
                    s.detail = Some(message);
                });
                return;
            }
            Err(err) => err.to_string(),
            Ok(()) => "stopped by itself".to_string(),
        };
        let wait = backoff.failed();
        tracing::warn!(plugin = %name, error = %error, retry_in = ?wait, "plugin failed; restarting");
        tracked.update(|s| {
            s.state = Phase::Restarting;
            s.detail = Some(error);
            s.restarts += 1;
        });
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Panicky;

    impl Plugin for Panicky {
        fn name(&self) -> &str {
            "panicky"
        }
        fn max_message_chars(&self) -> usize {
            100
        }
        fn start(&self, _ctx: Arc<dyn PluginContext>) -> BoxFuture<'_, Result<(), PluginError>> {
            Box::pin(async { panic!("boom") })
        }
        fn stop(&self) -> BoxFuture<'_, ()> {
            Box::pin(async {})
        }
        fn send(&self, _message: OutgoingMessage) -> BoxFuture<'_, Result<(), PluginError>> {
            Box::pin(async { Ok(()) })
        }
        fn typing(&self, _chat: &str) -> BoxFuture<'_, Result<(), PluginError>> {
            Box::pin(async { Ok(()) })
        }
    }

    struct Silent;

    impl PluginContext for Silent {
        fn deliver(&self, _message: IncomingMessage) {}
        fn pressed(&self, _press: ButtonPress) -> BoxFuture<'static, PressAnswer> {
            Box::pin(async {
                PressAnswer {
                    text: String::new(),
                    close: false,
                }
            })
        }
        fn connected(&self, _detail: &str) {}
    }

    #[tokio::test]
    async fn a_panicking_plugin_is_a_crash_to_restart_not_a_dead_supervisor() {
        let result = run_once(&Panicky, Arc::new(Silent)).await;
        assert!(matches!(result, Err(PluginError::Platform(m)) if m.contains("panicked")));
    }
}
