//! Field parsers shared by the config's validators: URLs, provider types,
//! `~/` paths, and the environment lookup they are given.

use std::path::PathBuf;

use url::Url;

use super::ConfigError;
use super::types::ProviderKind;

pub(super) type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

pub(super) fn parse_url(text: &str, path: &str) -> Result<Url, ConfigError> {
    let url =
        Url::parse(text).map_err(|err| ConfigError::invalid(path, format!("not a URL ({err}): {text:?}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ConfigError::invalid(
            path,
            format!("not an http(s) URL: {text:?}"),
        ));
    }
    Ok(url)
}

pub(super) fn provider_kind(text: &str, path: &str) -> Result<ProviderKind, ConfigError> {
    match text {
        "openai" | "openai-compatible" => Ok(ProviderKind::OpenAi),
        "anthropic" => Ok(ProviderKind::Anthropic),
        "ollama" => Ok(ProviderKind::Ollama),
        "azure" => Ok(ProviderKind::Azure),
        "gemini" => Ok(ProviderKind::Gemini),
        "vertex" => Ok(ProviderKind::Vertex),
        "bedrock" => Ok(ProviderKind::Bedrock),
        "claude-subscription" => Ok(ProviderKind::ClaudeSubscription),
        "codex" | "chatgpt" => Ok(ProviderKind::Codex),
        "copilot" => Ok(ProviderKind::Copilot),
        other => Err(ConfigError::invalid(
            format!("{path}.type"),
            format!(
                "unknown provider type {other:?}; expected \"openai\", \"anthropic\", \"ollama\", \"azure\", \"gemini\", \"vertex\", \"bedrock\", \"claude-subscription\", \"codex\" or \"copilot\""
            ),
        )),
    }
}

pub(super) fn expand_home(path: &str, env: Env) -> PathBuf {
    match (path.strip_prefix("~/"), env("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(path),
    }
}
