//! Validating `mcp`: the MCP servers whose tools agents are offered, in the
//! shape other MCP clients use (`command`/`args`/`env`/`cwd` for stdio,
//! `url`/`headers` for HTTP), and the client's time and size limits.

use std::collections::BTreeMap;
use std::time::Duration;

use secrecy::SecretString;

use super::ConfigError;
use super::fields::{Env, expand_home, parse_url};
use super::mcp_settings::{
    McpConfig, McpServerConfig, McpStartup, McpTransport, RawMcp, RawMcpServer, ToolTrust,
};

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
    let transport = match kind.as_str() {
        "stdio" => {
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
