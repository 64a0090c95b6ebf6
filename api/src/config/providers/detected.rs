//! Zero-config providers: `OPENAI_API_KEY`, `ANTHROPIC_API_KEY`,
//! `OPENROUTER_API_KEY` (each with its `*_BASE_URL`) and `OLLAMA_HOST` add a
//! provider of that name unless the config file already has one.

use std::collections::BTreeMap;
use std::time::Duration;

use secrecy::SecretString;
use url::Url;

use super::{CircuitBreakerConfig, ProviderConfig, ProviderKind, default_base_url};
use crate::config::ConfigError;
use crate::config::fields::{Env, parse_url};

/// A provider detected from the environment, with defaults for everything else.
pub fn detected_provider(
    name: &str,
    kind: ProviderKind,
    base_url: Url,
    api_key: Option<String>,
) -> ProviderConfig {
    let responses = kind == ProviderKind::OpenAi && base_url.host_str() == Some("api.openai.com");
    ProviderConfig {
        name: name.to_string(),
        kind,
        base_url,
        api_key: api_key.map(SecretString::from),
        headers: Vec::new(),
        timeout: Duration::from_secs(600),
        connect_timeout: Duration::from_secs(10),
        max_retries: 2,
        models: Vec::new(),
        api_version: None,
        deployments: BTreeMap::new(),
        vertex: None,
        bedrock: None,
        context_window: None,
        prompt_cache_key: true,
        responses,
        detected: true,
        circuit_breaker: Some(CircuitBreakerConfig::default()),
        command: None,
    }
}

/// `OLLAMA_HOST` accepts `host`, `host:port` or a URL, like the ollama CLI does.
pub fn ollama_url(host: &str) -> Option<Url> {
    let with_scheme = if host.contains("://") {
        host.to_string()
    } else {
        format!("http://{host}")
    };
    let mut url = Url::parse(&with_scheme).ok()?;
    if url.port().is_none() && !host.contains("://") {
        url.set_port(Some(11434)).ok()?;
    }
    Some(url)
}

pub(in crate::config) fn add_env_providers(
    providers: &mut BTreeMap<String, ProviderConfig>,
    env: Env,
) -> Result<(), ConfigError> {
    let detected = [
        (
            "openai",
            ProviderKind::OpenAi,
            "OPENAI_API_KEY",
            "OPENAI_BASE_URL",
        ),
        (
            "anthropic",
            ProviderKind::Anthropic,
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_BASE_URL",
        ),
        (
            "openrouter",
            ProviderKind::OpenAi,
            "OPENROUTER_API_KEY",
            "OPENROUTER_BASE_URL",
        ),
    ];
    for (name, kind, key_var, url_var) in detected {
        let Some(key) = env(key_var)
            .map(|k| k.trim().to_string())
            .filter(|k| !k.is_empty())
        else {
            continue;
        };
        if !key.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(ConfigError::invalid(
                key_var,
                "contains spaces or control characters",
            ));
        }
        if providers.contains_key(name) {
            continue;
        }
        let url_text = env(url_var)
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| default_base_url(name, kind).into());
        let base_url = parse_url(&url_text, url_var)?;
        providers.insert(name.into(), detected_provider(name, kind, base_url, Some(key)));
    }
    if let Some(host) = env("OLLAMA_HOST").filter(|h| !h.is_empty())
        && !providers.contains_key("ollama")
    {
        let url = ollama_url(&host)
            .ok_or_else(|| ConfigError::invalid("OLLAMA_HOST", format!("not a host or URL: {host:?}")))?;
        providers.insert(
            "ollama".into(),
            detected_provider("ollama", ProviderKind::Ollama, url, None),
        );
    }
    Ok(())
}
