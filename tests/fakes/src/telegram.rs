//! A fake Telegram Bot API: `getMe`, `getUpdates` (long polling), `sendMessage`,
//! `sendChatAction`, `answerCallbackQuery` and `editMessageReplyMarkup` at `/bot{token}/{method}`, as
//! teloxide calls them. Tests put user messages in with
//! [`FakeTelegram::user_says`] (or `POST /_fake/say`), press inline buttons
//! with [`FakeTelegram::press`], read what the bot sent from
//! [`FakeTelegram::sent`], and make polls fail with
//! [`FakeTelegram::fail_polls`] to test reconnecting.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

pub const BOT_ID: i64 = 4242;

#[derive(Default)]
pub struct TelegramState {
    token: String,
    updates: Mutex<VecDeque<Value>>,
    next_update: AtomicI64,
    next_message: AtomicI64,
    sent: Mutex<Vec<(String, Value)>>,
    polls: AtomicU32,
    failing_polls: AtomicU32,
    arrived: tokio::sync::Notify,
}

pub struct FakeTelegram {
    pub addr: SocketAddr,
    pub state: Arc<TelegramState>,
    _server: tokio::task::JoinHandle<()>,
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl FakeTelegram {
    pub async fn start(token: &str) -> std::io::Result<Self> {
        let state = Arc::new(TelegramState {
            token: token.into(),
            next_update: AtomicI64::new(1),
            next_message: AtomicI64::new(1),
            ..TelegramState::default()
        });
        let app = Router::new()
            .route("/{bot}/{method}", post(method).get(method))
            .route("/_fake/say", post(say))
            .route("/_fake/sent", get(sent))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self {
            addr,
            state,
            _server: server,
        })
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A user writes to the bot: in a private chat (`chat_id` = `user_id`) or in a group.
    pub fn user_says(&self, chat_id: i64, user_id: i64, name: &str, text: &str) {
        self.state.push(chat_id, user_id, name, text);
    }

    /// `(method, body)` of everything the bot called besides polling.
    pub fn sent(&self) -> Vec<(String, Value)> {
        self.state.sent.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Texts the bot sent to one chat, in order.
    pub fn messages_to(&self, chat_id: i64) -> Vec<String> {
        self.sent()
            .into_iter()
            .filter(|(m, b)| m == "sendMessage" && b["chat_id"].as_i64() == Some(chat_id))
            .filter_map(|(_, b)| b["text"].as_str().map(String::from))
            .collect()
    }

    /// `(text, [callback_data])` of the messages with an inline keyboard sent to one chat.
    pub fn keyboards_to(&self, chat_id: i64) -> Vec<(String, Vec<String>)> {
        self.sent()
            .into_iter()
            .filter(|(m, b)| m == "sendMessage" && b["chat_id"].as_i64() == Some(chat_id))
            .filter(|(_, b)| b["reply_markup"]["inline_keyboard"].is_array())
            .map(|(_, b)| {
                let data = b["reply_markup"]["inline_keyboard"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_array)
                    .flatten()
                    .filter_map(|button| button["callback_data"].as_str().map(String::from))
                    .collect();
                (b["text"].as_str().unwrap_or_default().to_string(), data)
            })
            .collect()
    }

    /// A user presses an inline button (with `data`) under a bot message in `chat_id`.
    pub fn press(&self, chat_id: i64, user_id: i64, name: &str, data: &str) {
        self.state.press(chat_id, user_id, name, data);
    }

    /// The texts the bot answered callback queries with, in order.
    pub fn callback_answers(&self) -> Vec<String> {
        self.sent()
            .into_iter()
            .filter(|(m, _)| m == "answerCallbackQuery")
            .map(|(_, b)| b["text"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// The chats and messages whose inline keyboard the bot took off.
    pub fn keyboards_removed(&self) -> Vec<(i64, i64)> {
        self.sent()
            .into_iter()
            .filter(|(m, b)| m == "editMessageReplyMarkup" && b.get("reply_markup").is_none())
            .map(|(_, b)| {
                (
                    b["chat_id"].as_i64().unwrap_or(0),
                    b["message_id"].as_i64().unwrap_or(0),
                )
            })
            .collect()
    }

    /// The next `count` polls fail with 502, as when the connection drops.
    pub fn fail_polls(&self, count: u32) {
        self.state.failing_polls.store(count, Ordering::SeqCst);
    }

    /// `getUpdates` calls so far.
    pub fn polls(&self) -> u32 {
        self.state.polls.load(Ordering::SeqCst)
    }
}

impl TelegramState {
    fn push(&self, chat_id: i64, user_id: i64, name: &str, text: &str) {
        let id = self.next_update.fetch_add(1, Ordering::SeqCst);
        let chat = if chat_id == user_id {
            json!({"id": chat_id, "type": "private", "first_name": name})
        } else {
            json!({"id": chat_id, "type": "group", "title": "Test group"})
        };
        let update = json!({"update_id": id, "message": {
            "message_id": self.next_message.fetch_add(1, Ordering::SeqCst),
            "date": now(),
            "chat": chat,
            "from": {"id": user_id, "is_bot": false, "first_name": name, "username": name.to_lowercase()},
            "text": text,
        }});
        if let Ok(mut updates) = self.updates.lock() {
            updates.push_back(update);
        }
        self.arrived.notify_waiters();
    }

    fn press(&self, chat_id: i64, user_id: i64, name: &str, data: &str) {
        let id = self.next_update.fetch_add(1, Ordering::SeqCst);
        let update = json!({"update_id": id, "callback_query": {
            "id": format!("cq{id}"),
            "from": {"id": user_id, "is_bot": false, "first_name": name, "username": name.to_lowercase()},
            "message": {
                "message_id": self.next_message.fetch_add(1, Ordering::SeqCst),
                "date": now(),
                "chat": {"id": chat_id, "type": "private", "first_name": name},
                "from": {"id": BOT_ID, "is_bot": true, "first_name": "Onyx", "username": "onyx_test_bot"},
                "text": "(the approval request)",
            },
            "chat_instance": format!("ci{chat_id}"),
            "data": data,
        }});
        if let Ok(mut updates) = self.updates.lock() {
            updates.push_back(update);
        }
        self.arrived.notify_waiters();
    }

    /// Updates at or after `offset`, dropping the confirmed ones.
    fn take(&self, offset: i64) -> Vec<Value> {
        let Ok(mut updates) = self.updates.lock() else {
            return Vec::new();
        };
        updates.retain(|u| u["update_id"].as_i64().unwrap_or(0) >= offset);
        updates.iter().cloned().collect()
    }
}

fn ok(result: Value) -> Response {
    Json(json!({"ok": true, "result": result})).into_response()
}

async fn method(
    State(state): State<Arc<TelegramState>>,
    Path((bot, method)): Path<(String, String)>,
    body: Option<Json<Value>>,
) -> Response {
    if bot.strip_prefix("bot") != Some(state.token.as_str()) {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"ok": false, "error_code": 401, "description": "Unauthorized"})),
        )
            .into_response();
    }
    let body = body.map(|Json(b)| b).unwrap_or(Value::Null);
    // Method names are case-insensitive (teloxide sends `GetMe`).
    let method = match method.to_ascii_lowercase().as_str() {
        "getme" => "getMe",
        "getupdates" => "getUpdates",
        "sendmessage" => "sendMessage",
        "sendchataction" => "sendChatAction",
        "answercallbackquery" => "answerCallbackQuery",
        "editmessagereplymarkup" => "editMessageReplyMarkup",
        _ => method.as_str(),
    }
    .to_string();
    match method.as_str() {
        "getMe" => ok(json!({
            "id": BOT_ID, "is_bot": true, "first_name": "Onyx", "username": "onyx_test_bot",
            "can_join_groups": true, "can_read_all_group_messages": false,
            "supports_inline_queries": false, "has_main_web_app": false,
        })),
        "getUpdates" => {
            state.polls.fetch_add(1, Ordering::SeqCst);
            let failing = state.failing_polls.load(Ordering::SeqCst);
            if failing > 0 {
                state.failing_polls.store(failing - 1, Ordering::SeqCst);
                return (StatusCode::BAD_GATEWAY, "<html>502 Bad Gateway</html>").into_response();
            }
            let offset = body["offset"].as_i64().unwrap_or(0);
            let timeout = Duration::from_secs(body["timeout"].as_u64().unwrap_or(0).min(30));
            let deadline = tokio::time::Instant::now() + timeout;
            loop {
                let arrived = state.arrived.notified();
                let updates = state.take(offset);
                if !updates.is_empty() || tokio::time::Instant::now() >= deadline {
                    return ok(Value::Array(updates));
                }
                let _ = tokio::time::timeout_at(deadline, arrived).await;
            }
        }
        "sendMessage" => {
            if let Ok(mut sent) = state.sent.lock() {
                sent.push((method.clone(), body.clone()));
            }
            let chat_id = body["chat_id"].as_i64().unwrap_or(0);
            ok(json!({
                "message_id": state.next_message.fetch_add(1, Ordering::SeqCst),
                "date": now(),
                "chat": {"id": chat_id, "type": "private", "first_name": "User"},
                "from": {"id": BOT_ID, "is_bot": true, "first_name": "Onyx", "username": "onyx_test_bot"},
                "text": body["text"],
            }))
        }
        "editMessageReplyMarkup" => {
            if let Ok(mut sent) = state.sent.lock() {
                sent.push((method.clone(), body.clone()));
            }
            let chat_id = body["chat_id"].as_i64().unwrap_or(0);
            ok(json!({
                "message_id": body["message_id"], "date": now(),
                "chat": {"id": chat_id, "type": "private", "first_name": "User"},
                "from": {"id": BOT_ID, "is_bot": true, "first_name": "Onyx", "username": "onyx_test_bot"},
                "text": "(the approval request)",
            }))
        }
        "sendChatAction" | "answerCallbackQuery" => {
            if let Ok(mut sent) = state.sent.lock() {
                sent.push((method.clone(), body));
            }
            ok(json!(true))
        }
        other => (
            StatusCode::NOT_FOUND,
            Json(json!({"ok": false, "error_code": 404, "description": format!("Not Found: method {other} not faked")})),
        )
            .into_response(),
    }
}

async fn say(State(state): State<Arc<TelegramState>>, Json(body): Json<Value>) -> Response {
    let user = body["user_id"].as_i64().unwrap_or(1);
    state.push(
        body["chat_id"].as_i64().unwrap_or(user),
        user,
        body["name"].as_str().unwrap_or("User"),
        body["text"].as_str().unwrap_or_default(),
    );
    ok(json!(true))
}

async fn sent(State(state): State<Arc<TelegramState>>) -> Json<Value> {
    let sent = state.sent.lock().map(|s| s.clone()).unwrap_or_default();
    Json(json!(
        sent.into_iter()
            .map(|(m, b)| json!({"method": m, "body": b}))
            .collect::<Vec<_>>()
    ))
}
