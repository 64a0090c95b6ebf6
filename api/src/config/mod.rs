//! Loading `onyx.json5`: JSON5 parsing, `${ENV}` substitution, OpenClaw-compatible
//! keys, and validation into typed settings. No side effects beyond reading the
//! file and the environment.
//!
//! Lookup order: `--config PATH`, then `$ONYX_CONFIG`, then
//! `~/.config/onyx/onyx.json5`; with none of them present the embedded default
//! (no file at all) is used.

mod cors;
mod embedder;
mod env;
mod fields;
mod knowledge;
mod mcp;
mod proxy;
mod raw;
mod scheduling;
pub mod tool_names;
mod types;
mod usage;
mod validate;
mod workspace;

use std::path::{Path, PathBuf};

pub use cors::Cors;
pub use embedder::built_in as built_in_embedder;
pub use knowledge::{KnowledgeConfig, MenosConfig};
pub use mcp::mcp_server_from_spec;
pub use proxy::{IpNet, TrustedProxy};
pub use raw::RawMcpServer as McpServerSpec;
pub use raw::RawProvider as ProviderSpec;
pub use types::*;
pub use validate::{detected_provider, is_deployment_name, ollama_url, provider_from_spec};

/// A config that cannot be used; startup stops and prints it.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}:{line}:{column}: {message}")]
    Syntax {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
}

impl ConfigError {
    pub(crate) fn invalid(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// Where the config came from: an explicit path, or nothing (embedded default).
pub fn locate(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(path) = explicit {
        return Some(path.to_path_buf());
    }
    if let Some(path) = std::env::var_os("ONYX_CONFIG").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let home = std::env::var_os("HOME")?;
    let default = PathBuf::from(home).join(".config/onyx/onyx.json5");
    default.is_file().then_some(default)
}

/// Loads and validates the config at `path` (or the embedded default for `None`),
/// reading `${VAR}`s and zero-config providers from the process environment.
pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
    let env = |name: &str| std::env::var(name).ok();
    let text = match path {
        Some(path) => Some(std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?),
        None => None,
    };
    parse(text.as_deref(), path, &env)
}

/// Parses config text (or nothing) with an explicit environment; the pure core of [`load`].
pub fn parse(
    text: Option<&str>,
    path: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    let display_path = path
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("<config>"));
    let mut tree: serde_json::Value = match text {
        Some(text) => json5::from_str(text).map_err(|err| {
            let (line, column) = err
                .position()
                .map(|p| (p.line + 1, p.column + 1))
                .unwrap_or_else(|| end_of(text));
            ConfigError::Syntax {
                path: display_path.clone(),
                line,
                column,
                message: err.to_string(),
            }
        })?,
        None => serde_json::Value::Object(Default::default()),
    };
    if !tree.is_object() {
        return Err(ConfigError::invalid("<root>", "the config must be an object"));
    }
    env::substitute(&mut tree, env)?;
    let raw: raw::RawConfig = serde_path_to_error::deserialize(tree).map_err(|err| {
        let path = err.path().to_string();
        // `.` is the root; an empty path is an unknown key `""` at the root.
        let path = if path == "." || path.is_empty() {
            "<root>".to_string()
        } else {
            path
        };
        ConfigError::invalid(path, err.into_inner().to_string())
    })?;
    validate::validate(raw, path.map(Path::to_path_buf), env)
}

/// The line and column just past the end of `text` (where an unexpected end of input is).
fn end_of(text: &str) -> (usize, usize) {
    let line = text.split('\n').count();
    let column = text.rsplit('\n').next().map_or(0, |last| last.chars().count()) + 1;
    (line, column)
}

#[cfg(test)]
mod fuzz_tests;
#[cfg(test)]
mod tests;
