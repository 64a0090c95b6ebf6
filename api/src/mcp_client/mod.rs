//! The MCP client: agents use the tools of outside MCP servers (`mcp.servers`
//! in the config, and those added through `/v1/mcp/servers`, stored for
//! every replica) as `mcp__{server}__{tool}`. One supervised client per
//! server per replica, never one per run, so scheduled runs start no
//! processes. A server that will not start, hangs or breaks never holds up a
//! run: its tools are simply absent, and a call that fails or outlasts its
//! timeout is an error the model reads.

pub mod api_added;
mod connect;
mod live;
mod naming;
pub mod oauth;
mod results;
mod sign_in;
mod sse;
mod supervisor;

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::watch;

pub use live::ChangeError;
pub use naming::server_of;
pub use results::CallOutcome;
pub use sign_in::SignInError;
pub use supervisor::ServerState;
use supervisor::{Server, SharedOAuth, Timing};

use crate::config::{McpConfig, McpServerConfig, McpStartup, McpTransport, ToolTrust};

/// A tool an agent can be offered.
#[derive(Debug, Clone)]
pub struct McpTool {
    /// `mcp__{server}__{tool}`.
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    pub trust: ToolTrust,
}

/// Every configured server's client.
pub struct McpClients {
    /// The config file's servers and the stored ones; a change swaps an entry.
    servers: RwLock<BTreeMap<String, Arc<Server>>>,
    /// The config file's servers: read-only through the API.
    from_file: Vec<String>,
    default_startup: McpStartup,
    timing: Timing,
    call_timeout: Duration,
    max_output_chars: usize,
    stop: watch::Sender<bool>,
    /// The servers added through the API, once attached.
    stored: OnceLock<live::Stored>,
    /// OAuth sign-ins of remote servers, once the store is attached.
    oauth: SharedOAuth,
}

/// A server as the API, `/health` and the UI show it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct McpServerView {
    pub name: String,
    /// `stdio`, `http` or `sse`.
    pub transport: String,
    /// `read`, `write` or `dangerous`: whether its tools wait for approval in `ask` mode.
    pub trust: String,
    /// `eager` or `lazy`.
    pub startup: String,
    /// `config` (the file; read-only here) or `api` (added through `/v1/mcp/servers`).
    pub source: String,
    /// stdio: the program, its arguments and working directory.
    pub command: Option<String>,
    pub args: Vec<String>,
    pub cwd: Option<String>,
    /// HTTP: the server's URL.
    pub url: Option<String>,
    /// Names of the environment variables given (stdio); values are never shown.
    pub env: Vec<String>,
    /// Names of the headers sent (HTTP); values are never shown.
    pub headers: Vec<String>,
    /// HTTP: the configured OAuth client's id, when one is configured (its
    /// secret is never shown); without one Onyx registers itself.
    pub oauth_client_id: Option<String>,
    pub call_timeout_seconds: Option<u64>,
    pub state: ServerState,
    /// When it entered `state` (RFC 3339).
    pub since: String,
    pub restarts: u32,
    pub last_error: Option<String>,
    /// The server's process (stdio).
    pub pid: Option<u32>,
    /// When the next start is tried, after a failure.
    pub retry_at: Option<String>,
    pub tools: Vec<McpToolView>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct McpToolView {
    pub name: String,
    /// What agents call it.
    pub exposed_as: String,
    pub description: String,
}

impl McpClients {
    pub fn new(config: &McpConfig) -> Arc<Self> {
        let oauth = SharedOAuth::default();
        Arc::new(Self {
            servers: RwLock::new(
                config
                    .servers
                    .iter()
                    .map(|(name, server)| {
                        (
                            name.clone(),
                            Server::new(name.clone(), server.clone(), oauth.clone()),
                        )
                    })
                    .collect(),
            ),
            from_file: config.servers.keys().cloned().collect(),
            default_startup: config.startup,
            timing: Timing {
                start_timeout: config.start_timeout,
            },
            call_timeout: config.call_timeout,
            max_output_chars: config.max_output_chars,
            stop: watch::Sender::new(false),
            stored: OnceLock::new(),
            oauth,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.all().is_empty()
    }

    /// Every server's client as it is now.
    fn all(&self) -> Vec<Arc<Server>> {
        self.servers
            .read()
            .map(|servers| servers.values().cloned().collect())
            .unwrap_or_default()
    }

    fn get(&self, name: &str) -> Option<Arc<Server>> {
        self.servers.read().ok().and_then(|s| s.get(name).cloned())
    }

    /// Starts the clients of the eager servers.
    pub fn start(&self) {
        for server in self.all() {
            if server.config.startup == McpStartup::Eager {
                self.launch(&server);
            }
        }
    }

    fn launch(&self, server: &Arc<Server>) {
        if *self.stop.borrow() || !server.claim_launch() {
            return;
        }
        server.spawn(self.timing);
    }

    /// Stops every client and waits for the servers to exit.
    pub async fn shutdown(&self) {
        self.stop.send_replace(true);
        futures::future::join_all(self.all().iter().map(|server| server.stop())).await;
    }

    /// The servers an agent may use (`None`: all).
    fn for_agent(&self, allowed: Option<&[String]>) -> Vec<Arc<Server>> {
        self.servers
            .read()
            .map(|servers| {
                servers
                    .iter()
                    .filter(|(name, _)| allowed.is_none_or(|list| list.iter().any(|a| a == *name)))
                    .map(|(_, server)| server.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Starts the agent's lazy servers and waits (up to the start timeout)
    /// for servers still on their first start, so a run right after startup
    /// sees their tools. A server that is restarting is not waited for.
    pub async fn ready_for(&self, allowed: Option<&[String]>) {
        let waits: Vec<_> = self
            .for_agent(allowed)
            .into_iter()
            .map(|server| {
                self.launch(&server);
                let mut status = server.status.subscribe();
                async move {
                    let _ = status.wait_for(|s| s.first_attempt_done).await;
                }
            })
            .collect();
        if waits.is_empty() {
            return;
        }
        let _ = tokio::time::timeout(self.timing.start_timeout, futures::future::join_all(waits)).await;
    }

    /// The tools of the agent's servers that are up.
    pub fn tools(&self, allowed: Option<&[String]>) -> Vec<McpTool> {
        self.for_agent(allowed)
            .into_iter()
            .flat_map(|server| {
                let tools = server.snapshot().tools;
                tools
                    .iter()
                    .map(|tool| McpTool {
                        name: tool.exposed.clone(),
                        description: format!("[MCP server {}] {}", server.name, tool.description),
                        input_schema: tool.input_schema.clone(),
                        trust: server.config.trust,
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Calls the tool the model knows as `exposed`.
    pub async fn call(&self, exposed: &str, arguments: &Value) -> CallOutcome {
        let Some(server) = server_of(exposed).and_then(|name| self.get(name)) else {
            return CallOutcome::error(format!("there is no MCP tool named {exposed:?}"));
        };
        let status = server.snapshot();
        let Some(tool) = status.tools.iter().find(|t| t.exposed == exposed) else {
            return CallOutcome::error(match status.state {
                ServerState::Ready => {
                    format!("the MCP server {} no longer has a tool {exposed:?}", server.name)
                }
                _ => not_running(&server.name, &status),
            });
        };
        let Some(peer) = server.current_peer() else {
            return CallOutcome::error(not_running(&server.name, &status));
        };
        let mut params = CallToolRequestParams::new(tool.name.clone());
        params.arguments = arguments.as_object().cloned();
        let timeout = server.config.call_timeout.unwrap_or(self.call_timeout);
        match tokio::time::timeout(timeout, peer.call_tool(params)).await {
            Err(_) => CallOutcome::error(format!(
                "the MCP server {} did not answer {} within {} s; the call was cancelled",
                server.name,
                tool.name,
                timeout.as_secs()
            )),
            Ok(Err(err)) if self.token_refused(&server, &err).await => {
                // Reconnecting refreshes the token, or asks the owner to sign in again.
                if let Err(restart) = self.restart(&server.name).await {
                    tracing::warn!(mcp_server = %server.name, error = %restart, "could not reconnect after a refused token");
                }
                CallOutcome::error(format!(
                    "the MCP server {} refused Onyx's access token (revoked or expired); it is \
                     reconnecting, and if the sign-in was withdrawn the MCP page asks for a new one",
                    server.name
                ))
            }
            Ok(Err(err)) => CallOutcome::error(format!(
                "the MCP server {} failed on {}: {}",
                server.name,
                tool.name,
                results::cut(&err.to_string(), 2000)
            )),
            Ok(Ok(result)) => match serde_json::to_value(&result) {
                Ok(result) => results::render(&result, self.max_output_chars),
                Err(err) => CallOutcome::error(format!("the MCP server's answer could not be read: {err}")),
            },
        }
    }

    /// Whether a failed call was refused for its OAuth token (a server's own
    /// JSON-RPC error never is).
    async fn token_refused(&self, server: &Server, err: &rmcp::ServiceError) -> bool {
        match err {
            rmcp::ServiceError::McpError(_) => false,
            _ if !server.signs_in() => false,
            err if err.auth_challenge().is_some() => true,
            _ => server.refuses_its_token().await,
        }
    }

    pub fn views(&self) -> Vec<McpServerView> {
        self.all().iter().map(|server| self.view(server)).collect()
    }

    pub fn server_view(&self, name: &str) -> Option<McpServerView> {
        self.get(name).map(|server| self.view(&server))
    }

    fn view(&self, server: &Server) -> McpServerView {
        let source = if self.from_file.contains(&server.name) {
            "config"
        } else {
            "api"
        };
        view(server, source)
    }
}

fn not_running(name: &str, status: &supervisor::Status) -> String {
    let state = format!("{:?}", status.state).to_lowercase();
    match &status.last_error {
        Some(error) => format!("the MCP server {name} is not running ({state}: {error})"),
        None => format!("the MCP server {name} is not running ({state})"),
    }
}

fn view(server: &Server, source: &str) -> McpServerView {
    let status = server.snapshot();
    let config: &McpServerConfig = &server.config;
    let (command, args, cwd, url, env, headers) = match &config.transport {
        McpTransport::Stdio {
            command,
            args,
            env,
            cwd,
        } => (
            Some(command.clone()),
            args.clone(),
            cwd.as_ref().map(|c| c.display().to_string()),
            None,
            env.keys().cloned().collect(),
            Vec::new(),
        ),
        McpTransport::Http { url, headers } | McpTransport::Sse { url, headers } => (
            None,
            Vec::new(),
            None,
            Some(url.to_string()),
            Vec::new(),
            headers.keys().cloned().collect(),
        ),
    };
    McpServerView {
        source: source.into(),
        command,
        args,
        cwd,
        url,
        env,
        headers,
        oauth_client_id: config.oauth.as_ref().map(|o| o.client_id.clone()),
        call_timeout_seconds: config.call_timeout.map(|t| t.as_secs()),
        name: server.name.clone(),
        transport: server.config.transport.kind().into(),
        trust: match server.config.trust {
            ToolTrust::Read => "read",
            ToolTrust::Write => "write",
            ToolTrust::Dangerous => "dangerous",
        }
        .into(),
        startup: match server.config.startup {
            McpStartup::Eager => "eager",
            McpStartup::Lazy => "lazy",
        }
        .into(),
        state: status.state,
        since: status.since.to_rfc3339(),
        restarts: status.restarts,
        last_error: status.last_error.clone(),
        pid: status.pid,
        retry_at: status.retry_at.map(|t| t.to_rfc3339()),
        tools: status
            .tools
            .iter()
            .map(|t| McpToolView {
                name: t.name.clone(),
                exposed_as: t.exposed.clone(),
                description: t.description.clone(),
            })
            .collect(),
    }
}
