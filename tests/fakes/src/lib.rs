//! Fake model upstreams for tests and benchmarks: OpenAI chat completions and
//! the Responses API (and Azure OpenAI's URLs for them), Google's Gemini API
//! and Vertex AI (with its OAuth2 token endpoint), AWS Bedrock's Converse API (SigV4 checked,
//! streams in AWS's binary event-stream framing), Anthropic Messages and Ollama, each speaking its real HTTP wire protocol on
//! 127.0.0.1. What the fake "model" does is decided by [`script`] from the model
//! name and the conversation, so every protocol behaves the same way.
//!
//! Beside them, [`menos`]: a stand-in for the menos content vault that
//! checks ed25519 request signatures (RFC 9421) as menos does, and
//! [`mcp_oauth`]: an OAuth 2.1 authorization server with the MCP server it protects.
//!
//! Every fake records the request bodies it received and counts streams that
//! finished or were cut off by the client (`GET /_fake/requests`, `/_fake/stats`).

pub mod anthropic;
pub mod azure;
pub mod bedrock;
pub mod discord;
pub mod eventstream;
pub mod gemini;
pub mod mcp_oauth;
pub mod menos;
pub mod ollama;
pub mod openai;
pub mod openai_responses;
pub mod script;
pub mod sigv4;
pub mod telegram;
pub mod topics;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::routing::get;
use serde_json::{Value, json};

/// The API key every fake expects unless told otherwise.
pub const DEFAULT_KEY: &str = "sk-fake-upstream-key-0001";

/// Request bodies kept, the newest (a soak would otherwise grow the fake by
/// gigabytes); every one received is counted.
const KEPT_REQUESTS: usize = 10_000;

#[derive(Default)]
pub struct FakeState {
    /// Required `Authorization: Bearer` / `x-api-key`; `None` accepts anything.
    pub key: Option<String>,
    requests: Mutex<std::collections::VecDeque<Value>>,
    received: AtomicU64,
    attempts: Mutex<std::collections::HashMap<String, u64>>,
    pub streams_completed: AtomicU64,
    pub streams_cancelled: AtomicU64,
    /// While set, embedding endpoints answer 503 (an outage, switched by
    /// `POST /_fake/embed-outage` with `{"down": true|false}`).
    pub embed_down: AtomicBool,
    /// Prompt prefixes cached by the fake Anthropic (hashes of the blocks up
    /// to each `cache_control` breakpoint it was sent).
    pub prompt_cache: Mutex<std::collections::HashSet<u64>>,
    /// The fake OpenAI's stored responses: each id's conversation (input and output items).
    pub responses: Mutex<std::collections::HashMap<String, Vec<Value>>>,
    /// The fake Google token endpoint: the service account key (PEM) whose
    /// signatures it accepts, and the access tokens it issued.
    pub service_account_pem: Mutex<Option<String>>,
    pub issued_tokens: Mutex<Vec<String>>,
}

impl FakeState {
    pub fn new(key: Option<String>) -> Arc<Self> {
        Arc::new(Self {
            key,
            ..Self::default()
        })
    }

    pub fn record(&self, body: &Value) {
        self.received.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut requests) = self.requests.lock() {
            if requests.len() == KEPT_REQUESTS {
                requests.pop_front();
            }
            requests.push_back(body.clone());
        }
    }

    /// The request bodies received (the newest 10,000), oldest first.
    pub fn requests(&self) -> Vec<Value> {
        self.requests
            .lock()
            .map(|r| r.iter().cloned().collect())
            .unwrap_or_default()
    }

    pub fn last_request(&self) -> Option<Value> {
        self.requests.lock().ok().and_then(|r| r.back().cloned())
    }

    /// Counts calls per model (1 for the first call).
    pub fn attempt(&self, model: &str) -> u64 {
        let mut attempts = match self.attempts.lock() {
            Ok(a) => a,
            Err(poisoned) => poisoned.into_inner(),
        };
        let count = attempts.entry(model.to_string()).or_insert(0);
        *count += 1;
        *count
    }

    pub fn stats(&self) -> Value {
        json!({
            "requests": self.received.load(Ordering::SeqCst),
            "streamsCompleted": self.streams_completed.load(Ordering::SeqCst),
            "streamsCancelled": self.streams_cancelled.load(Ordering::SeqCst),
        })
    }
}

/// Counts a stream as cancelled unless it was marked complete before being dropped.
pub struct StreamGuard {
    state: Arc<FakeState>,
    completed: bool,
}

impl StreamGuard {
    pub fn new(state: Arc<FakeState>) -> Self {
        Self {
            state,
            completed: false,
        }
    }

    pub fn complete(&mut self) {
        if !self.completed {
            self.completed = true;
            self.state.streams_completed.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        if !self.completed {
            self.state.streams_cancelled.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// A running fake server.
pub struct FakeServer {
    pub addr: SocketAddr,
    pub state: Arc<FakeState>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeServer {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves `routes` (plus the `/_fake/*` introspection routes) on 127.0.0.1:`port`.
pub async fn serve(
    routes: Router<Arc<FakeState>>,
    state: Arc<FakeState>,
    port: u16,
) -> std::io::Result<FakeServer> {
    let app = routes
        .route(
            "/_fake/requests",
            get(|State(s): State<Arc<FakeState>>| async move { Json(Value::Array(s.requests())) }),
        )
        .route(
            "/_fake/stats",
            get(|State(s): State<Arc<FakeState>>| async move { Json(s.stats()) }),
        )
        // SearXNG's JSON search API, for the web_search tool.
        .route(
            "/search",
            get(|axum::extract::Query(q): axum::extract::Query<std::collections::HashMap<String, String>>| async move {
                let query = q.get("q").cloned().unwrap_or_default();
                if q.get("format").map(String::as_str) != Some("json") {
                    return (axum::http::StatusCode::FORBIDDEN, Json(json!({"error": "format not allowed"})));
                }
                (axum::http::StatusCode::OK, Json(json!({"query": query, "results": [
                    {"title": format!("First result for {query}"), "url": "https://example.org/one", "content": "An extract about the query."},
                    {"title": "Second result", "url": "https://example.org/two", "content": "Another extract."}
                ]})))
            }),
        )
        // A web page and a redirect, for tests of fetching tools.
        .route(
            "/_fake/page",
            get(|| async {
                (
                    [(axum::http::header::CONTENT_TYPE, "text/html; charset=utf-8")],
                    "<html><head><title>Fake page</title><script>var hidden = 1;</script></head><body><h1>Onyx test page</h1><p>The secret word is <b>marmalade</b>.</p></body></html>",
                )
            }),
        )
        .route(
            "/_fake/redirect",
            get(|axum::extract::Query(q): axum::extract::Query<std::collections::HashMap<String, String>>| async move {
                let to = q.get("to").cloned().unwrap_or_default();
                (axum::http::StatusCode::FOUND, [(axum::http::header::LOCATION, to)])
            }),
        )
        .route(
            "/_fake/embed-outage",
            axum::routing::post(
                |State(s): State<Arc<FakeState>>, Json(body): Json<Value>| async move {
                    let down = body["down"].as_bool().unwrap_or(true);
                    s.embed_down.store(down, Ordering::SeqCst);
                    Json(json!({"embedDown": down}))
                },
            ),
        )
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(FakeServer { addr, state, task })
}

/// Whether the request carries the key the fake expects.
pub fn authorized(state: &FakeState, presented: Option<&str>) -> bool {
    match &state.key {
        None => true,
        Some(key) => presented == Some(key.as_str()),
    }
}
