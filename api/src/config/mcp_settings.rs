//! The `mcp` section's shapes: as written (`RawMcp`, and `RawMcpServer`,
//! which `POST /v1/mcp/servers` takes as [`McpServerSpec`](super::McpServerSpec))
//! and as validated (`McpConfig`). Their checks are in `mcp.rs`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use secrecy::SecretString;
use serde::{Deserialize, Serialize};
use url::Url;

/// MCP servers whose tools agents are offered, and the client's limits.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawMcp {
    /// `eager` (connect at startup, the default) or `lazy` (at first use).
    pub startup: Option<String>,
    pub start_timeout_seconds: Option<u64>,
    pub call_timeout_seconds: Option<u64>,
    pub max_output_chars: Option<usize>,
    #[serde(default)]
    pub servers: BTreeMap<String, RawMcpServer>,
}

/// One server, as Claude Desktop, Claude Code and VS Code write it (and as
/// `POST /v1/mcp/servers` takes it).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawMcpServer {
    /// `stdio`, `http` (streamable HTTP) or `sse` (the older HTTP+SSE);
    /// inferred from `command` / `url` when absent.
    #[serde(rename = "type")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// `read`, `write` or `dangerous` (the default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trust: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub startup: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_timeout_seconds: Option<u64>,
}

/// `mcp`: the MCP servers agents can use, and the client's limits.
#[derive(Debug, Clone)]
pub struct McpConfig {
    pub startup: McpStartup,
    /// How long a server may take to start and answer the handshake.
    pub start_timeout: Duration,
    /// How long one tool call may take (a server may set its own).
    pub call_timeout: Duration,
    /// Characters of a tool result the model sees; the rest is cut.
    pub max_output_chars: usize,
    pub servers: BTreeMap<String, McpServerConfig>,
}

impl Default for McpConfig {
    fn default() -> Self {
        Self {
            startup: McpStartup::Eager,
            start_timeout: Duration::from_secs(30),
            call_timeout: Duration::from_secs(60),
            max_output_chars: 20_000,
            servers: BTreeMap::new(),
        }
    }
}

/// When a server's client is started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McpStartup {
    /// With the gateway.
    Eager,
    /// When an agent run first needs its tools.
    Lazy,
}

#[derive(Debug, Clone)]
pub struct McpServerConfig {
    pub transport: McpTransport,
    pub trust: ToolTrust,
    pub startup: McpStartup,
    pub call_timeout: Option<Duration>,
}

/// How to reach a server. `env` and `headers` values hold secrets.
#[derive(Debug, Clone)]
pub enum McpTransport {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, SecretString>,
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP.
    Http {
        url: Url,
        headers: BTreeMap<String, SecretString>,
    },
    /// The older HTTP+SSE transport.
    Sse {
        url: Url,
        headers: BTreeMap<String, SecretString>,
    },
}

impl McpTransport {
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Stdio { .. } => "stdio",
            Self::Http { .. } => "http",
            Self::Sse { .. } => "sse",
        }
    }
}

/// How far an outside tool is trusted: `Read` and `Write` run without a
/// prompt, `Dangerous` waits for approval in `ask` mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolTrust {
    Read,
    Write,
    Dangerous,
}
