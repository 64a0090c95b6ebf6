//! JSON-RPC 2.0 with a long-lived child over its stdin and stdout, framed
//! with `Content-Length` headers (the base protocol of `vscode-jsonrpc`,
//! which the GitHub Copilot SDK speaks to `copilot --headless --stdio`).
//! Requests are matched to their responses by id; `session.event`
//! notifications are routed to whoever subscribed to their `sessionId`; the
//! child's own requests are refused (Onyx registers no handlers for them).
//! When the child's stdout closes, every pending request fails and every
//! subscription ends, so a caller waiting on a dead child learns at once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::{mpsc, oneshot};

use super::process::{Group, Spawn};

/// The largest message accepted from the child.
const MAX_MESSAGE: usize = 64 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    #[error("the connection closed")]
    Closed,
    #[error("{message} (JSON-RPC error {code})")]
    Remote { code: i64, message: String },
    #[error("cannot write to the process: {0}")]
    Write(std::io::Error),
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Value, RpcError>>>>>;
type Subscribers = Arc<Mutex<HashMap<String, mpsc::UnboundedSender<Value>>>>;

pub struct Connection {
    writer: Arc<tokio::sync::Mutex<ChildStdin>>,
    next_id: AtomicU64,
    pending: Pending,
    sessions: Subscribers,
    open: Arc<AtomicBool>,
    group: tokio::sync::Mutex<Group>,
    pid: u32,
}

impl Connection {
    /// Starts the child and reads its stdout in the background.
    pub fn start(spawn: Spawn) -> std::io::Result<Self> {
        let mut group = Group::start(spawn)?;
        let stdin = group
            .child
            .stdin()
            .take()
            .ok_or_else(|| std::io::Error::other("the child has no stdin"))?;
        let stdout = group
            .child
            .stdout()
            .take()
            .ok_or_else(|| std::io::Error::other("the child has no stdout"))?;
        let connection = Self {
            writer: Arc::new(tokio::sync::Mutex::new(stdin)),
            next_id: AtomicU64::new(0),
            pending: Pending::default(),
            sessions: Subscribers::default(),
            open: Arc::new(AtomicBool::new(true)),
            pid: group.pid,
            group: tokio::sync::Mutex::new(group),
        };
        let reader = Reader {
            writer: connection.writer.clone(),
            pending: connection.pending.clone(),
            sessions: connection.sessions.clone(),
            open: connection.open.clone(),
            pid: connection.pid,
        };
        tokio::spawn(reader.run(stdout));
        Ok(connection)
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether the child's stdout is still open.
    pub fn is_open(&self) -> bool {
        self.open.load(Ordering::SeqCst)
    }

    /// Sends a request and waits for its response.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = oneshot::channel();
        if let Ok(mut pending) = self.pending.lock() {
            pending.insert(id, tx);
        }
        if !self.is_open() {
            self.forget(id);
            return Err(RpcError::Closed);
        }
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if let Err(err) = write(&self.writer, &message).await {
            self.forget(id);
            return Err(RpcError::Write(err));
        }
        rx.await.unwrap_or(Err(RpcError::Closed))
    }

    fn forget(&self, id: u64) {
        if let Ok(mut pending) = self.pending.lock() {
            pending.remove(&id);
        }
    }

    /// The events of session `id` from now on; the channel ends with the child.
    pub fn subscribe(&self, id: &str) -> mpsc::UnboundedReceiver<Value> {
        let (tx, rx) = mpsc::unbounded_channel();
        if self.is_open()
            && let Ok(mut sessions) = self.sessions.lock()
        {
            sessions.insert(id.to_string(), tx);
        }
        rx
    }

    pub fn unsubscribe(&self, id: &str) {
        if let Ok(mut sessions) = self.sessions.lock() {
            sessions.remove(id);
        }
    }

    /// How the child ended, with its last stderr lines.
    pub async fn ended(&self) -> String {
        self.group.lock().await.ended().await
    }
}

/// The background half: reads messages and routes them.
struct Reader {
    writer: Arc<tokio::sync::Mutex<ChildStdin>>,
    pending: Pending,
    sessions: Subscribers,
    open: Arc<AtomicBool>,
    pid: u32,
}

impl Reader {
    async fn run(self, stdout: ChildStdout) {
        let mut input = BufReader::new(stdout);
        while let Some(message) = read(&mut input).await {
            self.route(message).await;
        }
        self.open.store(false, Ordering::SeqCst);
        if let Ok(mut pending) = self.pending.lock() {
            for (_, tx) in pending.drain() {
                let _ = tx.send(Err(RpcError::Closed));
            }
        }
        if let Ok(mut sessions) = self.sessions.lock() {
            sessions.clear();
        }
    }

    async fn route(&self, message: Value) {
        let method = message["method"].as_str();
        match (method, message.get("id")) {
            (None, Some(id)) => {
                let Some(id) = id.as_u64() else { return };
                let Some(tx) = self.pending.lock().ok().and_then(|mut p| p.remove(&id)) else {
                    return;
                };
                let outcome = match message.get("error") {
                    Some(error) => Err(RpcError::Remote {
                        code: error["code"].as_i64().unwrap_or(0),
                        message: error["message"].as_str().unwrap_or("error").to_string(),
                    }),
                    None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
                };
                let _ = tx.send(outcome);
            }
            (Some(method), Some(id)) => {
                tracing::debug!(pid = self.pid, method, "subscription CLI request refused");
                let refusal = json!({"jsonrpc": "2.0", "id": id, "error": {
                    "code": -32601, "message": format!("Onyx does not handle {method}"),
                }});
                let _ = write(&self.writer, &refusal).await;
            }
            (Some("session.event"), None) => {
                let params = &message["params"];
                let Some(session) = params["sessionId"].as_str() else {
                    return;
                };
                if let Ok(sessions) = self.sessions.lock()
                    && let Some(tx) = sessions.get(session)
                {
                    let _ = tx.send(params["event"].clone());
                }
            }
            _ => {}
        }
    }
}

async fn write(writer: &tokio::sync::Mutex<ChildStdin>, message: &Value) -> std::io::Result<()> {
    let body = message.to_string();
    let mut writer = writer.lock().await;
    writer
        .write_all(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes())
        .await?;
    writer.write_all(body.as_bytes()).await?;
    writer.flush().await
}

/// The next framed JSON message; `None` once the stream ends or breaks.
async fn read<R: tokio::io::AsyncBufRead + Unpin>(input: &mut R) -> Option<Value> {
    loop {
        let mut length = None;
        loop {
            let mut header = String::new();
            if input.read_line(&mut header).await.ok()? == 0 {
                return None;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse::<usize>().ok();
            }
        }
        let length = length.filter(|l| *l <= MAX_MESSAGE)?;
        let mut body = vec![0; length];
        input.read_exact(&mut body).await.ok()?;
        match serde_json::from_slice::<Value>(&body) {
            Ok(value) => return Some(value),
            Err(err) => tracing::debug!(%err, "subscription CLI: not a JSON message"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn framed_messages_are_read_one_by_one_until_the_stream_ends() {
        let first = r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":3}}"#;
        let second = r#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"s","event":{"type":"session.idle"}}}"#;
        let text = format!(
            "Content-Length: {}\r\n\r\n{first}Content-Type: application/vscode-jsonrpc\r\nContent-Length: {}\r\n\r\n{second}",
            first.len(),
            second.len()
        );
        let mut input = BufReader::new(text.as_bytes());
        assert_eq!(read(&mut input).await.unwrap()["result"]["protocolVersion"], 3);
        assert_eq!(
            read(&mut input).await.unwrap()["params"]["event"]["type"],
            "session.idle"
        );
        assert!(read(&mut input).await.is_none());
        let mut truncated = BufReader::new("Content-Length: 10\r\n\r\n{}".as_bytes());
        assert!(read(&mut truncated).await.is_none());
    }
}
