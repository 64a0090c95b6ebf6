//! A fake Discord: the gateway WebSocket (HELLO, IDENTIFY → READY, RESUME →
//! RESUMED, heartbeats every second and their ACKs, MESSAGE_CREATE and
//! INTERACTION_CREATE dispatch) at `/`, and the REST endpoints the bot uses
//! (`POST /api/v10/channels/{id}/messages`, `POST /api/v10/channels/{id}/typing`,
//! `POST /api/v10/interactions/{id}/{token}/callback`). Tests put user
//! messages in with [`FakeDiscord::user_says`], press buttons with
//! [`FakeDiscord::press`], read what the bot posted from
//! [`FakeDiscord::posted`] and how it answered presses from
//! [`FakeDiscord::interaction_replies`], and cut the connection with
//! [`FakeDiscord::drop_connection`].

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::Router;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

pub const BOT_ID: &str = "900000000000000001";

/// What the gateway connection is told to do next.
#[derive(Debug, Clone)]
enum Push {
    Dispatch(String, Value),
    Drop,
}

#[derive(Default)]
pub struct DiscordState {
    token: String,
    url: Mutex<String>,
    sequence: AtomicU64,
    next_id: AtomicU64,
    posted: Mutex<Vec<(String, Value)>>,
    typing: Mutex<Vec<String>>,
    interaction_replies: Mutex<Vec<Value>>,
    identifies: AtomicU64,
    resumes: AtomicU64,
    heartbeats: AtomicU64,
    push: Mutex<Option<tokio::sync::broadcast::Sender<Push>>>,
}

pub struct FakeDiscord {
    pub addr: SocketAddr,
    pub state: Arc<DiscordState>,
    _server: tokio::task::JoinHandle<()>,
}

fn user(id: &str, name: &str, bot: bool) -> Value {
    json!({"id": id, "username": name, "discriminator": "0", "avatar": null, "bot": bot, "global_name": name})
}

impl FakeDiscord {
    pub async fn start(token: &str) -> std::io::Result<Self> {
        let (push, _) = tokio::sync::broadcast::channel(64);
        let state = Arc::new(DiscordState {
            token: token.into(),
            next_id: AtomicU64::new(1_000_000_000_000_000_000),
            push: Mutex::new(Some(push)),
            ..DiscordState::default()
        });
        let app = Router::new()
            .route("/", get(gateway))
            .route("/api/v10/channels/{id}/messages", post(create_message))
            .route("/api/v10/channels/{id}/typing", post(typing))
            .route(
                "/api/v10/interactions/{id}/{token}/callback",
                post(interaction_callback),
            )
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        if let Ok(mut url) = state.url.lock() {
            *url = format!("ws://{addr}");
        }
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self {
            addr,
            state,
            _server: server,
        })
    }

    pub fn api_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn gateway_url(&self) -> String {
        format!("ws://{}", self.addr)
    }

    fn push(&self, push: Push) {
        if let Ok(sender) = self.state.push.lock()
            && let Some(sender) = sender.as_ref()
        {
            let _ = sender.send(push);
        }
    }

    /// A user posts in a channel: a DM (`guild` = `None`) or a server channel,
    /// optionally mentioning the bot (`<@BOT_ID>` is put in front).
    pub fn user_says(
        &self,
        guild: Option<&str>,
        channel: &str,
        user_id: &str,
        text: &str,
        mention_bot: bool,
    ) {
        let id = self.state.next_id.fetch_add(1, Ordering::SeqCst).to_string();
        let content = if mention_bot {
            format!("<@{BOT_ID}> {text}")
        } else {
            text.to_string()
        };
        let mentions = if mention_bot {
            json!([{"id": BOT_ID, "username": "onyx", "discriminator": "0", "avatar": null, "bot": true, "public_flags": 0}])
        } else {
            json!([])
        };
        let mut message = json!({
            "id": id, "channel_id": channel, "author": user(user_id, &format!("user{user_id}"), false),
            "content": content, "timestamp": "2026-11-22T10:00:00.000000+00:00", "edited_timestamp": null,
            "tts": false, "mention_everyone": false, "mentions": mentions, "mention_roles": [],
            "attachments": [], "embeds": [], "pinned": false, "type": 0,
        });
        if let Some(guild) = guild {
            message["guild_id"] = json!(guild);
        }
        self.push(Push::Dispatch("MESSAGE_CREATE".into(), message));
    }

    /// A user presses the button with `custom_id` under a bot message in a DM channel.
    pub fn press(&self, channel: &str, user_id: &str, custom_id: &str) {
        let id = self.state.next_id.fetch_add(1, Ordering::SeqCst).to_string();
        // The bot's message the button is on, as Discord sends it along.
        let message = json!({
            "id": format!("{id}0"), "channel_id": channel, "author": user(BOT_ID, "onyx", true),
            "content": "(the approval request)", "timestamp": "2026-11-22T10:00:00.000000+00:00",
            "edited_timestamp": null, "tts": false, "mention_everyone": false, "mentions": [],
            "mention_roles": [], "attachments": [], "embeds": [], "pinned": false, "type": 0,
        });
        let interaction = json!({
            "id": id, "application_id": "900000000000000002", "type": 3, "token": format!("token-{id}"),
            "version": 1, "attachment_size_limit": 8_388_608, "authorizing_integration_owners": {},
            "entitlements": [], "channel": {"id": channel, "type": 1},
            "data": {"component_type": 2, "custom_id": custom_id},
            "message": message,
            "user": user(user_id, &format!("user{user_id}"), false),
        });
        self.push(Push::Dispatch("INTERACTION_CREATE".into(), interaction));
    }

    /// `(content, [custom_id])` of the bot's messages with buttons in one channel.
    pub fn buttons_in(&self, channel: &str) -> Vec<(String, Vec<String>)> {
        self.posted()
            .into_iter()
            .filter(|(c, b)| c == channel && b["components"].is_array())
            .map(|(_, b)| {
                let ids = b["components"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|row| row["components"].as_array())
                    .flatten()
                    .filter_map(|button| button["custom_id"].as_str().map(String::from))
                    .collect();
                (b["content"].as_str().unwrap_or_default().to_string(), ids)
            })
            .collect()
    }

    /// The contents the bot answered button presses with, in order.
    pub fn interaction_replies(&self) -> Vec<String> {
        self.interaction_responses()
            .iter()
            .map(|body| body["data"]["content"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// The whole interaction responses (`type` 4: a reply, 7: the message updated).
    pub fn interaction_responses(&self) -> Vec<Value> {
        self.state
            .interaction_replies
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }

    /// Closes the gateway connection abruptly; the bot must reconnect.
    pub fn drop_connection(&self) {
        self.push(Push::Drop);
    }

    /// `(channel_id, body)` of every message the bot posted.
    pub fn posted(&self) -> Vec<(String, Value)> {
        self.state.posted.lock().map(|p| p.clone()).unwrap_or_default()
    }

    pub fn contents_in(&self, channel: &str) -> Vec<String> {
        self.posted()
            .into_iter()
            .filter(|(c, _)| c == channel)
            .filter_map(|(_, b)| b["content"].as_str().map(String::from))
            .collect()
    }

    /// Channels the bot showed typing in.
    pub fn typing(&self) -> Vec<String> {
        self.state.typing.lock().map(|t| t.clone()).unwrap_or_default()
    }

    /// Heartbeats the bot sent (each was acknowledged).
    pub fn heartbeats(&self) -> u64 {
        self.state.heartbeats.load(Ordering::SeqCst)
    }

    /// Sessions started (IDENTIFY) and resumed (RESUME) so far.
    pub fn connections(&self) -> (u64, u64) {
        (
            self.state.identifies.load(Ordering::SeqCst),
            self.state.resumes.load(Ordering::SeqCst),
        )
    }
}

fn authorized(state: &DiscordState, headers: &HeaderMap) -> bool {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == format!("Bot {}", state.token))
}

async fn create_message(
    State(state): State<Arc<DiscordState>>,
    Path(channel): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    if !authorized(&state, &headers) {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"message": "401: Unauthorized", "code": 0})),
        )
            .into_response();
    }
    if let Ok(mut posted) = state.posted.lock() {
        posted.push((channel.clone(), body.clone()));
    }
    let id = state.next_id.fetch_add(1, Ordering::SeqCst).to_string();
    Json(json!({
        "id": id, "channel_id": channel, "author": user(BOT_ID, "onyx", true),
        "content": body["content"], "timestamp": "2026-11-22T10:00:01.000000+00:00", "edited_timestamp": null,
        "tts": false, "mention_everyone": false, "mentions": [], "mention_roles": [],
        "attachments": [], "embeds": [], "pinned": false, "type": 0,
    }))
    .into_response()
}

async fn typing(
    State(state): State<Arc<DiscordState>>,
    Path(channel): Path<String>,
    headers: HeaderMap,
) -> Response {
    if !authorized(&state, &headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    if let Ok(mut typing) = state.typing.lock() {
        typing.push(channel);
    }
    StatusCode::NO_CONTENT.into_response()
}

/// Interaction callbacks are authorized by their token, not the bot's.
async fn interaction_callback(
    State(state): State<Arc<DiscordState>>,
    Path((_id, _token)): Path<(String, String)>,
    Json(body): Json<Value>,
) -> Response {
    if let Ok(mut replies) = state.interaction_replies.lock() {
        replies.push(body);
    }
    StatusCode::NO_CONTENT.into_response()
}

async fn gateway(State(state): State<Arc<DiscordState>>, upgrade: WebSocketUpgrade) -> Response {
    upgrade.on_upgrade(move |socket| session(state, socket))
}

fn frame(op: u8, data: Value, seq: Option<u64>, kind: Option<&str>) -> Message {
    Message::Text(
        json!({"op": op, "d": data, "s": seq, "t": kind})
            .to_string()
            .into(),
    )
}

/// One gateway connection, until the bot leaves or the test drops it.
async fn session(state: Arc<DiscordState>, mut socket: WebSocket) {
    let mut pushes = match state
        .push
        .lock()
        .ok()
        .and_then(|p| p.as_ref().map(|s| s.subscribe()))
    {
        Some(receiver) => receiver,
        None => return,
    };
    if socket
        // Discord asks for ~41 s; one second makes the bot heartbeat within a test.
        .send(frame(10, json!({"heartbeat_interval": 1000}), None, None))
        .await
        .is_err()
    {
        return;
    }
    let mut ready = false;
    loop {
        tokio::select! {
            incoming = socket.recv() => {
                let Some(Ok(Message::Text(text))) = incoming else {
                    if matches!(incoming, Some(Ok(Message::Ping(_) | Message::Pong(_)))) {
                        continue;
                    }
                    return;
                };
                let Ok(payload) = serde_json::from_str::<Value>(&text) else { continue };
                let reply = match payload["op"].as_u64() {
                    Some(1) => {
                        state.heartbeats.fetch_add(1, Ordering::SeqCst);
                        Some(frame(11, Value::Null, None, None))
                    }
                    Some(2) if payload["d"]["token"].as_str().map(|t| t.trim_start_matches("Bot ")) == Some(state.token.as_str()) => {
                        state.identifies.fetch_add(1, Ordering::SeqCst);
                        ready = true;
                        let url = state.url.lock().map(|u| u.clone()).unwrap_or_default();
                        let seq = state.sequence.fetch_add(1, Ordering::SeqCst) + 1;
                        Some(frame(0, json!({
                            "v": 10, "user": {"id": BOT_ID, "username": "onyx", "discriminator": "0", "avatar": null,
                                              "bot": true, "mfa_enabled": false, "global_name": "Onyx"},
                            "guilds": [], "session_id": "fake-session", "resume_gateway_url": url,
                            "shard": [0, 1], "application": {"id": "900000000000000002", "flags": 0},
                        }), Some(seq), Some("READY")))
                    }
                    Some(2) => {
                        let _ = socket.send(Message::Close(Some(axum::extract::ws::CloseFrame {
                            code: 4004,
                            reason: "Authentication failed.".into(),
                        }))).await;
                        return;
                    }
                    Some(6) => {
                        state.resumes.fetch_add(1, Ordering::SeqCst);
                        ready = true;
                        let seq = state.sequence.fetch_add(1, Ordering::SeqCst) + 1;
                        Some(frame(0, json!({}), Some(seq), Some("RESUMED")))
                    }
                    _ => None,
                };
                if let Some(reply) = reply && socket.send(reply).await.is_err() {
                    return;
                }
            }
            push = pushes.recv() => match push {
                Ok(Push::Dispatch(kind, data)) if ready => {
                    let seq = state.sequence.fetch_add(1, Ordering::SeqCst) + 1;
                    if socket.send(frame(0, data, Some(seq), Some(&kind))).await.is_err() {
                        return;
                    }
                }
                Ok(Push::Drop) => return, // no close frame: the TCP connection just ends
                Ok(Push::Dispatch(..)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(_) => return,
            }
        }
    }
}
