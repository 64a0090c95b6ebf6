//! `mcp`: the MCP servers whose tools agents are offered, in the shape other
//! MCP clients use (`command`/`args`/`env`/`cwd` for stdio, `url`/`headers`
//! and an optional OAuth client for HTTP), and the client's time and size
//! limits. As written (`RawMcp`, and `RawMcpServer`, which
//! `POST /v1/mcp/servers` takes as [`McpServerSpec`](super::McpServerSpec)),
//! as validated (`McpConfig`), and the checks between.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use secrecy::SecretString;
use serde::{Deserialize, Serialize};
use url::Url;

use super::ConfigError;
use super::fields::{Env, expand_home, parse_url};

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
    /// HTTP: the OAuth client to sign in with, for an authorization server
    /// that offers no dynamic client registration.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oauth: Option<RawMcpOAuth>,
}

/// A client registered by hand with a remote server's authorization server.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawMcpOAuth {
    pub client_id: String,
    /// Sealed like `headers` when stored; a public client has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// Asked for instead of what the server's challenge names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
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
    /// HTTP: the configured OAuth client (else Onyx registers itself).
    pub oauth: Option<McpOAuthClient>,
}

/// The OAuth client a remote server signs in with, when configured.
#[derive(Debug, Clone)]
pub struct McpOAuthClient {
    pub client_id: String,
    pub client_secret: Option<SecretString>,
    pub scope: Option<String>,
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

pub(super) fn mcp(raw: RawMcp, env: Env) -> Result<McpConfig, ConfigError> {
    let defaults = McpConfig::default();
    let startup = match raw.startup.as_deref() {
        Some(text) => startup(text, "mcp.startup")?,
        None => defaults.startup,
    };
    let mut servers = BTreeMap::new();
    for (name, server) in raw.servers {
        let path = format!("mcp.servers.{name}");
        check_server_name(&name, &path)?;
        servers.insert(name, server_config(server, startup, &path, env)?);
    }
    Ok(McpConfig {
        startup,
        start_timeout: seconds(raw.start_timeout_seconds, "mcp.startTimeoutSeconds")?
            .unwrap_or(defaults.start_timeout),
        call_timeout: seconds(raw.call_timeout_seconds, "mcp.callTimeoutSeconds")?
            .unwrap_or(defaults.call_timeout),
        max_output_chars: match raw.max_output_chars {
            Some(0) => return Err(ConfigError::invalid("mcp.maxOutputChars", "must be at least 1")),
            Some(chars) => chars,
            None => defaults.max_output_chars,
        },
        servers,
    })
}

/// One server as `POST /v1/mcp/servers` takes it (the config file's entry);
/// errors name the field without the `mcp.servers.{name}` prefix.
pub fn mcp_server_from_spec(
    name: &str,
    raw: RawMcpServer,
    default_startup: McpStartup,
) -> Result<McpServerConfig, ConfigError> {
    let env = |key: &str| std::env::var(key).ok();
    check_server_name(name, "name")?;
    server_config(raw, default_startup, "", &env).map_err(|err| match err {
        ConfigError::Invalid { path, message } => ConfigError::Invalid {
            path: path.trim_start_matches('.').to_string(),
            message,
        },
        other => other,
    })
}

/// Server names become part of tool names (`mcp__{server}__{tool}`), which
/// models accept only as `[a-zA-Z0-9_-]`; `__` would make them ambiguous.
fn check_server_name(name: &str, path: &str) -> Result<(), ConfigError> {
    let ok = !name.is_empty()
        && name.len() <= 24
        && !name.contains("__")
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(ConfigError::invalid(
            path,
            "a server name is 1-24 letters, digits, '-' or '_' (no \"__\")",
        ))
    }
}

fn server_config(
    raw: RawMcpServer,
    default_startup: McpStartup,
    path: &str,
    env: Env,
) -> Result<McpServerConfig, ConfigError> {
    let kind = match (raw.kind.as_deref(), &raw.command, &raw.url) {
        (Some(kind), _, _) => kind.to_string(),
        (None, Some(_), None) => "stdio".into(),
        (None, None, Some(_)) => "http".into(),
        (None, Some(_), Some(_)) => {
            return Err(ConfigError::invalid(
                path,
                "give either command (stdio) or url (HTTP), not both",
            ));
        }
        (None, None, None) => {
            return Err(ConfigError::invalid(
                path,
                "needs a command (stdio) or a url (HTTP)",
            ));
        }
    };
    let oauth = raw.oauth.clone();
    let transport = match kind.as_str() {
        "stdio" => {
            if oauth.is_some() {
                return Err(ConfigError::invalid(
                    format!("{path}.oauth"),
                    "OAuth sign-in is for HTTP servers, not stdio",
                ));
            }
            let command = raw.command.filter(|c| !c.trim().is_empty()).ok_or_else(|| {
                ConfigError::invalid(format!("{path}.command"), "a stdio server needs a command")
            })?;
            if raw.url.is_some() || !raw.headers.is_empty() {
                return Err(ConfigError::invalid(
                    path,
                    "url and headers are for HTTP servers, not stdio",
                ));
            }
            McpTransport::Stdio {
                command,
                args: raw.args,
                env: secrets(raw.env),
                cwd: raw.cwd.map(|cwd| expand_home(&cwd, env)),
            }
        }
        "http" | "streamable-http" | "sse" => {
            let url = raw
                .url
                .ok_or_else(|| ConfigError::invalid(format!("{path}.url"), "an HTTP server needs a url"))?;
            let url = parse_url(&url, &format!("{path}.url"))?;
            if raw.command.is_some() || !raw.args.is_empty() || !raw.env.is_empty() || raw.cwd.is_some() {
                return Err(ConfigError::invalid(
                    path,
                    "command, args, env and cwd are for stdio servers, not HTTP",
                ));
            }
            for name in raw.headers.keys() {
                if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                    return Err(ConfigError::invalid(
                        format!("{path}.headers.{name}"),
                        "is not a valid HTTP header name",
                    ));
                }
            }
            let headers = secrets(raw.headers);
            if kind == "sse" {
                McpTransport::Sse { url, headers }
            } else {
                McpTransport::Http { url, headers }
            }
        }
        other => {
            return Err(ConfigError::invalid(
                format!("{path}.type"),
                format!("{other:?} is not \"stdio\", \"http\" or \"sse\""),
            ));
        }
    };
    Ok(McpServerConfig {
        transport,
        trust: match raw.trust.as_deref() {
            None => ToolTrust::Dangerous,
            Some("read") => ToolTrust::Read,
            Some("write") => ToolTrust::Write,
            Some("dangerous") => ToolTrust::Dangerous,
            Some(other) => {
                return Err(ConfigError::invalid(
                    format!("{path}.trust"),
                    format!("{other:?} is not \"read\", \"write\" or \"dangerous\""),
                ));
            }
        },
        startup: match raw.startup.as_deref() {
            Some(text) => startup(text, &format!("{path}.startup"))?,
            None => default_startup,
        },
        call_timeout: seconds(raw.call_timeout_seconds, &format!("{path}.callTimeoutSeconds"))?,
        oauth: oauth.map(|o| oauth_client(o, path)).transpose()?,
    })
}

fn oauth_client(raw: RawMcpOAuth, path: &str) -> Result<McpOAuthClient, ConfigError> {
    if raw.client_id.trim().is_empty() {
        return Err(ConfigError::invalid(
            format!("{path}.oauth.clientId"),
            "must not be empty (it is the client registered with the authorization server)",
        ));
    }
    Ok(McpOAuthClient {
        client_id: raw.client_id,
        client_secret: raw
            .client_secret
            .filter(|s| !s.is_empty())
            .map(SecretString::from),
        scope: raw.scope.filter(|s| !s.trim().is_empty()),
    })
}

fn secrets(map: BTreeMap<String, String>) -> BTreeMap<String, SecretString> {
    map.into_iter().map(|(k, v)| (k, SecretString::from(v))).collect()
}

fn startup(text: &str, path: &str) -> Result<McpStartup, ConfigError> {
    match text {
        "eager" => Ok(McpStartup::Eager),
        "lazy" => Ok(McpStartup::Lazy),
        other => Err(ConfigError::invalid(
            path,
            format!("{other:?} is not \"eager\" or \"lazy\""),
        )),
    }
}

fn seconds(value: Option<u64>, path: &str) -> Result<Option<Duration>, ConfigError> {
    match value {
        Some(0) => Err(ConfigError::invalid(path, "must be at least 1 second")),
        Some(s) => Ok(Some(Duration::from_secs(s))),
        None => Ok(None),
    }
}

/// An agent's `mcp` list: names of configured servers.
pub(super) fn agent_servers(
    names: Option<Vec<String>>,
    servers: &BTreeMap<String, McpServerConfig>,
    path: &str,
) -> Result<Option<Vec<String>>, ConfigError> {
    let Some(names) = names else { return Ok(None) };
    for (i, name) in names.iter().enumerate() {
        if !servers.contains_key(name) {
            return Err(ConfigError::invalid(
                format!("{path}[{i}]"),
                format!(
                    "there is no MCP server named {name:?} in mcp.servers (servers: {})",
                    servers.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
    }
    Ok(Some(names))
}

/// `mcp__{server}` and `mcp__{server}__{tool}` entries of allow/deny lists
/// must name a configured server (a typo in a deny list must not leave a tool on).
pub(super) fn check_tool_entries(
    entries: &[String],
    servers: &BTreeMap<String, McpServerConfig>,
    path: &str,
) -> Result<(), ConfigError> {
    for (i, entry) in entries.iter().enumerate() {
        if let Some(rest) = entry.strip_prefix("mcp__") {
            let server = rest.split("__").next().unwrap_or_default();
            if !servers.contains_key(server) {
                return Err(ConfigError::invalid(
                    format!("{path}[{i}]"),
                    format!("{entry:?} names no configured MCP server ({server:?} is not in mcp.servers)"),
                ));
            }
        }
    }
    Ok(())
}
