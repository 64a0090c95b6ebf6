//! One MCP server's client for the life of the replica: started (at startup
//! or at first use), its tool list kept current, restarted with backoff when
//! it dies or will not start, stopped on shutdown. Its state is what
//! `/health`, `GET /v1/mcp/servers` and the UI show.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use rmcp::service::{Peer, RoleClient};
use serde_json::Value;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use super::connect::{self, Handler, StderrTail};
use super::naming::exposed_name;
use super::oauth::{Bearer, OAuth};
use crate::backoff::Backoff;
use crate::config::{McpServerConfig, McpTransport};

/// The OAuth sign-ins, once the store is attached (shared by every server).
pub type SharedOAuth = Arc<OnceLock<Arc<OAuth>>>;

/// A server is counted as up again (its backoff reset) after this long.
const STABLE_AFTER: Duration = Duration::from_secs(60);
/// How long a server gets to exit when it is stopped.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// A server waiting for sign-in looks again this often (another replica may have signed in).
const SIGN_IN_RECHECK: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum ServerState {
    /// Lazy, and no run has needed it yet.
    Idle,
    Starting,
    Ready,
    /// Its last start failed or it died; another attempt follows.
    Failed,
    /// It wants an OAuth sign-in (`POST /v1/mcp/servers/{name}/oauth/start`).
    NeedsSignIn,
    Stopped,
}

/// One of a server's tools.
#[derive(Debug, Clone)]
pub struct RemoteTool {
    /// The server's own name for it.
    pub name: String,
    /// `mcp__{server}__{tool}`, what the model calls.
    pub exposed: String,
    pub description: String,
    pub input_schema: Value,
}

#[derive(Debug, Clone)]
pub struct Status {
    pub state: ServerState,
    pub since: DateTime<Utc>,
    pub restarts: u32,
    pub last_error: Option<String>,
    pub pid: Option<u32>,
    pub retry_at: Option<DateTime<Utc>>,
    pub tools: Arc<Vec<RemoteTool>>,
    /// Whether the first attempt to start has ended (either way).
    pub first_attempt_done: bool,
}

pub struct Server {
    pub name: String,
    pub config: McpServerConfig,
    pub status: watch::Sender<Status>,
    pub peer: RwLock<Option<Peer<RoleClient>>>,
    launched: AtomicBool,
    /// Turned true to stop this server alone (removed, replaced, restarted, shutdown).
    halt: watch::Sender<bool>,
    /// Its supervisor, once launched.
    task: Mutex<Option<JoinHandle<()>>>,
    tools_changed: Arc<Notify>,
    stderr: StderrTail,
    oauth: SharedOAuth,
}

/// Start and stop settings shared by every server.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub start_timeout: Duration,
}

enum Ended {
    /// Stopped on purpose (shutdown).
    Stopped,
    /// Its access token is about to expire: refreshed, then connected again.
    Reconnect,
    /// Died, or could not be used: why.
    Died(String),
}

/// Why a start did not give a running client.
enum Down {
    Failed(String),
    /// It wants an OAuth sign-in first: why.
    SignIn(String),
}

impl Server {
    pub fn new(name: String, config: McpServerConfig, oauth: SharedOAuth) -> Arc<Self> {
        Arc::new(Self {
            name,
            config,
            status: watch::Sender::new(Status {
                state: ServerState::Idle,
                since: Utc::now(),
                restarts: 0,
                last_error: None,
                pid: None,
                retry_at: None,
                tools: Arc::new(Vec::new()),
                first_attempt_done: false,
            }),
            peer: RwLock::new(None),
            launched: AtomicBool::new(false),
            halt: watch::Sender::new(false),
            task: Mutex::new(None),
            tools_changed: Arc::new(Notify::new()),
            stderr: Arc::new(Mutex::new(Default::default())),
            oauth,
        })
    }

    /// Whether this call is the one that should start the supervisor.
    pub fn claim_launch(&self) -> bool {
        !self.launched.swap(true, Ordering::SeqCst)
    }

    pub fn was_launched(&self) -> bool {
        self.launched.load(Ordering::SeqCst)
    }

    /// Starts the supervisor (once [`Self::claim_launch`] said so).
    pub fn spawn(self: &Arc<Self>, timing: Timing) {
        let task = tokio::spawn(self.clone().supervise(timing, self.halt.subscribe()));
        if let Ok(mut slot) = self.task.lock() {
            *slot = Some(task);
        }
    }

    /// Stops the server and waits for its supervisor (and process) to end.
    pub async fn stop(&self) {
        self.halt.send_replace(true);
        let task = self.task.lock().ok().and_then(|mut t| t.take());
        if let Some(task) = task {
            let _ = task.await;
        }
    }

    pub fn snapshot(&self) -> Status {
        self.status.borrow().clone()
    }

    pub fn current_peer(&self) -> Option<Peer<RoleClient>> {
        self.peer.read().ok().and_then(|p| p.clone())
    }

    fn set_peer(&self, peer: Option<Peer<RoleClient>>) {
        if let Ok(mut slot) = self.peer.write() {
            *slot = peer;
        }
    }

    fn update(&self, change: impl FnOnce(&mut Status)) {
        self.status.send_modify(change);
    }

    fn enter(&self, state: ServerState) {
        self.update(|s| {
            s.state = state;
            s.since = Utc::now();
        });
    }

    /// Runs until `stop` turns true: start, serve, restart after failures.
    async fn supervise(self: Arc<Self>, timing: Timing, mut stop: watch::Receiver<bool>) {
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
        loop {
            self.enter(ServerState::Starting);
            let attempt = tokio::select! {
                () = stopped(&mut stop) => break,
                attempt = tokio::time::timeout(timing.start_timeout, self.start()) => attempt,
            };
            let started_at = Instant::now();
            let reason = match attempt {
                Err(_) => connect::with_stderr(
                    format!(
                        "did not start and answer the MCP handshake within {} s",
                        timing.start_timeout.as_secs()
                    ),
                    &self.stderr,
                ),
                Ok(Err(Down::Failed(reason))) => reason,
                Ok(Err(Down::SignIn(reason))) => {
                    self.set_peer(None);
                    tracing::info!(mcp_server = %self.name, reason = %reason, "MCP server needs an OAuth sign-in");
                    self.update(|s| {
                        s.state = ServerState::NeedsSignIn;
                        s.since = Utc::now();
                        s.last_error = Some(reason);
                        s.tools = Arc::new(Vec::new());
                        s.first_attempt_done = true;
                        s.retry_at = None;
                    });
                    tokio::select! {
                        () = stopped(&mut stop) => break,
                        () = tokio::time::sleep(SIGN_IN_RECHECK) => continue,
                    }
                }
                Ok(Ok((started, refresh_at))) => {
                    match self.serve(started, timing, refresh_at, &mut stop).await {
                        Ended::Stopped => break,
                        Ended::Reconnect => continue,
                        Ended::Died(reason) => reason,
                    }
                }
            };
            self.set_peer(None);
            if started_at.elapsed() >= STABLE_AFTER {
                backoff.succeeded();
            }
            let wait = backoff.failed();
            tracing::warn!(mcp_server = %self.name, error = %reason, retry_in_s = wait.as_secs(), "MCP server is down");
            self.update(|s| {
                s.state = ServerState::Failed;
                s.since = Utc::now();
                s.last_error = Some(reason);
                s.pid = None;
                s.tools = Arc::new(Vec::new());
                s.first_attempt_done = true;
                s.retry_at = chrono::Duration::from_std(wait).ok().map(|w| Utc::now() + w);
            });
            tokio::select! {
                () = stopped(&mut stop) => break,
                () = tokio::time::sleep(wait) => {}
            }
            self.update(|s| {
                s.restarts += 1;
                s.retry_at = None;
            });
        }
        self.set_peer(None);
        self.update(|s| {
            s.state = ServerState::Stopped;
            s.since = Utc::now();
            s.pid = None;
            s.tools = Arc::new(Vec::new());
            s.first_attempt_done = true;
        });
    }

    /// The OAuth sign-ins and this server's URL, when it is remote and sends
    /// no `Authorization` header of its own.
    fn oauth_target(&self) -> Option<(Arc<OAuth>, url::Url)> {
        let (McpTransport::Http { url, headers } | McpTransport::Sse { url, headers }) =
            &self.config.transport
        else {
            return None;
        };
        if headers.keys().any(|h| h.eq_ignore_ascii_case("authorization")) {
            return None;
        }
        Some((self.oauth.get()?.clone(), url.clone()))
    }

    /// Whether it is a remote server that may sign in with OAuth (it sends
    /// no `Authorization` header of its own).
    pub fn signs_in(&self) -> bool {
        self.oauth_target().is_some()
    }

    /// Whether the server now refuses the token it was signed in with
    /// (revoked, or expired early): its challenge to that very token.
    pub async fn refuses_its_token(&self) -> bool {
        let Some((oauth, url)) = self.oauth_target() else {
            return false;
        };
        let Ok(Some(bearer)) = oauth.bearer(&self.name, &url, false).await else {
            return false;
        };
        matches!(oauth.challenge(&url, Some(&bearer)).await, Ok(Some(_)))
    }

    /// Connects, with its access token when signed in: refreshed once if
    /// the server refuses it; a server that wants a sign-in says so.
    async fn connect(&self) -> Result<(connect::Started, Option<DateTime<Utc>>), Down> {
        let target = self.oauth_target();
        let mut bearer: Option<Bearer> = match &target {
            Some((oauth, url)) => oauth
                .bearer(&self.name, url, false)
                .await
                .map_err(|err| Down::SignIn(format!("sign in again: {err}")))?,
            None => None,
        };
        let mut refreshed = false;
        loop {
            let handler = Handler {
                tools_changed: self.tools_changed.clone(),
            };
            let signed = match (&target, &bearer) {
                (Some((oauth, _)), Some(bearer)) => Some(connect::Signed {
                    http: oauth.http(),
                    token: &bearer.token,
                }),
                _ => None,
            };
            let reason =
                match connect::start(&self.name, &self.config.transport, handler, &self.stderr, signed).await
                {
                    Ok(started) => return Ok((started, bearer.and_then(|b| b.refresh_at))),
                    Err(reason) => reason,
                };
            let Some((oauth, url)) = &target else {
                return Err(Down::Failed(reason));
            };
            // Did it refuse for want of a (fresh) token?
            match oauth.challenge(url, bearer.as_ref()).await {
                Ok(Some(_)) if bearer.is_some() && !refreshed => {
                    refreshed = true;
                    bearer = oauth
                        .bearer(&self.name, url, true)
                        .await
                        .map_err(|err| Down::SignIn(format!("sign in again: {err}")))?;
                    if bearer.is_none() {
                        return Err(Down::SignIn("it requires an OAuth sign-in".into()));
                    }
                }
                Ok(Some(_)) if bearer.is_some() => {
                    return Err(Down::SignIn(
                        "it refused its access token, refreshed too; sign in again".into(),
                    ));
                }
                Ok(Some(_)) => return Err(Down::SignIn("it requires an OAuth sign-in".into())),
                _ => return Err(Down::Failed(reason)),
            }
        }
    }

    async fn start(&self) -> Result<(connect::Started, Option<DateTime<Utc>>), Down> {
        let (started, refresh_at) = self.connect().await?;
        let tools = list_tools(&self.name, started.client.peer())
            .await
            .map_err(Down::Failed)?;
        tracing::info!(mcp_server = %self.name, tools = tools.len(), pid = ?started.pid, "MCP server ready");
        self.set_peer(Some(started.client.peer().clone()));
        self.update(|s| {
            s.state = ServerState::Ready;
            s.since = Utc::now();
            s.pid = started.pid;
            s.tools = Arc::new(tools);
            s.first_attempt_done = true;
        });
        Ok((started, refresh_at))
    }

    /// Serves a started client until it ends or `stop` turns true.
    async fn serve(
        &self,
        started: connect::Started,
        timing: Timing,
        refresh_at: Option<DateTime<Utc>>,
        stop: &mut watch::Receiver<bool>,
    ) -> Ended {
        let refresh = async {
            match refresh_at {
                Some(at) => tokio::time::sleep((at - Utc::now()).to_std().unwrap_or_default()).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(refresh);
        let client = started.client;
        let cancel = client.cancellation_token();
        let peer = client.peer().clone();
        let waiting = client.waiting();
        tokio::pin!(waiting);
        loop {
            tokio::select! {
                () = stopped(stop) => {
                    cancel.cancel();
                    if tokio::time::timeout(STOP_GRACE, &mut waiting).await.is_err() {
                        tracing::warn!(mcp_server = %self.name, "MCP server did not stop in time");
                    }
                    return Ended::Stopped;
                }
                () = &mut refresh => {
                    cancel.cancel();
                    let _ = tokio::time::timeout(STOP_GRACE, &mut waiting).await;
                    return Ended::Reconnect;
                }
                () = self.tools_changed.notified() => {
                    match tokio::time::timeout(timing.start_timeout, list_tools(&self.name, &peer)).await {
                        Ok(Ok(tools)) => {
                            tracing::info!(mcp_server = %self.name, tools = tools.len(), "MCP tool list changed");
                            self.update(|s| s.tools = Arc::new(tools));
                        }
                        Ok(Err(reason)) => tracing::warn!(mcp_server = %self.name, error = %reason, "could not list the changed tools"),
                        Err(_) => tracing::warn!(mcp_server = %self.name, "listing the changed tools timed out"),
                    }
                }
                ended = &mut waiting => {
                    let how = match ended {
                        Ok(reason) => format!("{reason:?}").to_lowercase(),
                        Err(err) => err.to_string(),
                    };
                    return Ended::Died(connect::with_stderr(format!("the connection ended ({how})"), &self.stderr));
                }
            }
        }
    }
}

/// Resolves once the replica is stopping.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    // The guard `wait_for` returns is not `Send`; drop it here.
    let _ = stop.wait_for(|s| *s).await.map(|_| ());
}

async fn list_tools(server: &str, peer: &Peer<RoleClient>) -> Result<Vec<RemoteTool>, String> {
    let tools = peer
        .list_all_tools()
        .await
        .map_err(|err| format!("could not list its tools: {err}"))?;
    Ok(tools
        .into_iter()
        .filter_map(|tool| serde_json::to_value(&tool).ok())
        .map(|tool| {
            let name = tool["name"].as_str().unwrap_or_default().to_string();
            RemoteTool {
                exposed: exposed_name(server, &name),
                description: tool["description"].as_str().unwrap_or_default().to_string(),
                input_schema: match &tool["inputSchema"] {
                    Value::Object(schema) => Value::Object(schema.clone()),
                    _ => serde_json::json!({"type": "object", "properties": {}}),
                },
                name,
            }
        })
        .collect())
}
