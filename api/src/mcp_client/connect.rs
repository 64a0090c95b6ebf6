//! Starting one MCP client: the transport a server's config names (a child
//! process in its own process group, streamable HTTP, or the older HTTP+SSE)
//! and the protocol handshake, through the official SDK.

use std::collections::{HashMap, VecDeque};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use process_wrap::tokio::{CommandWrap, KillOnDrop, ProcessGroup};
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::TokioChildProcess;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ServiceExt};
use secrecy::{ExposeSecret, SecretString};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::Notify;

use crate::config::McpTransport;

/// The last lines a stdio server wrote to stderr, for its error report.
pub type StderrTail = Arc<Mutex<VecDeque<String>>>;
const STDERR_LINES: usize = 20;

/// What Onyx answers to a server's notifications: a changed tool list
/// wakes the supervisor, which lists the tools again.
pub struct Handler {
    pub tools_changed: Arc<Notify>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("onyx", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.notify_one();
    }
}

pub type Client = RunningService<RoleClient, Handler>;

/// A connected client and, for stdio, the server's process id.
pub struct Started {
    pub client: Client,
    pub pid: Option<u32>,
}

/// An OAuth access token for a remote server, and the client (which
/// follows no redirect) that carries it.
pub struct Signed<'a> {
    pub http: &'a reqwest::Client,
    pub token: &'a SecretString,
}

/// Starts the transport and runs the handshake.
pub async fn start(
    server: &str,
    transport: &McpTransport,
    handler: Handler,
    stderr: &StderrTail,
    signed: Option<Signed<'_>>,
) -> Result<Started, String> {
    match transport {
        McpTransport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            // Through `onyx tethered`: the server dies with the gateway, however it ends.
            let mut cmd = crate::sandbox::tether::command(command, cwd.as_deref());
            cmd.args(args);
            // The allow-listed environment (and where home is: package
            // runners keep their caches there), plus what the server's config names.
            cmd.env_clear();
            cmd.envs(crate::sandbox::allowed_env());
            if let Some(home) = std::env::var_os("HOME") {
                cmd.env("HOME", home);
            }
            cmd.envs(env.iter().map(|(k, v)| (k, v.expose_secret())));
            if let Some(cwd) = cwd {
                cmd.current_dir(cwd);
            }
            let mut wrapped = CommandWrap::from(cmd);
            wrapped.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
            let (process, child_stderr) = TokioChildProcess::builder(wrapped)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|err| format!("cannot start {command:?}: {err}"))?;
            let pid = process.id();
            if let Some(child_stderr) = child_stderr {
                tokio::spawn(keep_stderr(server.to_string(), child_stderr, stderr.clone()));
            }
            let client = handler
                .serve(process)
                .await
                .map_err(|err| with_stderr(format!("the MCP handshake failed: {err}"), stderr))?;
            Ok(Started { client, pid })
        }
        McpTransport::Http { url, headers } => {
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                .custom_headers(header_map(headers)?);
            let http = match &signed {
                Some(signed) => {
                    config = config.auth_header(signed.token.expose_secret());
                    signed.http.clone()
                }
                None => reqwest::Client::new(),
            };
            let transport = StreamableHttpClientTransport::with_client(http, config);
            let client = handler
                .serve(transport)
                .await
                .map_err(|err| format!("the MCP handshake with {url} failed: {err}"))?;
            Ok(Started { client, pid: None })
        }
        McpTransport::Sse { url, headers } => {
            let mut headers = header_map(headers)?;
            let http = match &signed {
                Some(signed) => {
                    let mut value =
                        http::HeaderValue::from_str(&format!("Bearer {}", signed.token.expose_secret()))
                            .map_err(|_| "the access token is not a valid header value".to_string())?;
                    value.set_sensitive(true);
                    headers.insert(http::header::AUTHORIZATION, value);
                    signed.http.clone()
                }
                None => reqwest::Client::new(),
            };
            let transport = super::sse::SseTransport::connect(http, url.clone(), headers).await?;
            let client = handler
                .serve(transport)
                .await
                .map_err(|err| format!("the MCP handshake with {url} failed: {err}"))?;
            Ok(Started { client, pid: None })
        }
    }
}

fn header_map(
    headers: &std::collections::BTreeMap<String, SecretString>,
) -> Result<HashMap<http::HeaderName, http::HeaderValue>, String> {
    headers
        .iter()
        .map(|(name, value)| {
            let name = http::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("{name:?} is not a valid header name"))?;
            let mut value = http::HeaderValue::from_str(value.expose_secret())
                .map_err(|_| format!("the value of header {name} is not a valid header value"))?;
            value.set_sensitive(true);
            Ok((name, value))
        })
        .collect()
}

async fn keep_stderr(server: String, stderr: tokio::process::ChildStderr, tail: StderrTail) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(mcp_server = %server, "{line}");
        if let Ok(mut tail) = tail.lock() {
            if tail.len() == STDERR_LINES {
                tail.pop_front();
            }
            tail.push_back(crate::text::one_line(&line, 300));
        }
    }
}

/// An error with the server's last stderr line, which usually says why.
pub fn with_stderr(message: String, stderr: &StderrTail) -> String {
    let last = stderr
        .lock()
        .ok()
        .and_then(|tail| tail.iter().rev().find(|l| !l.trim().is_empty()).cloned());
    match last {
        Some(line) => format!("{message} (its stderr: {line})"),
        None => message,
    }
}
