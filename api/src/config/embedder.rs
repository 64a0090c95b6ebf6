//! Validating `memory.embedder`: an embeddings provider (Ollama, OpenAI) or
//! the built-in local model. As with `storage.objects`, the other kind's keys
//! are allowed and unused (the example config lists them all).

use super::ConfigError;
use super::fields::{Env, expand_home, parse_url, provider_kind};
use super::raw::RawEmbedder;
use super::types::{EmbedderConfig, LocalEmbedderConfig, ProviderEmbedderConfig, ProviderKind};

/// The local embedder's model when none is named.
const DEFAULT_LOCAL_MODEL: &str = "all-MiniLM-L6-v2";

pub(super) fn embedder(raw: RawEmbedder, env: Env) -> Result<EmbedderConfig, ConfigError> {
    if raw.kind == "local" {
        return local(raw, env).map(EmbedderConfig::Local);
    }
    let kind = provider_kind(&raw.kind, "memory.embedder").map_err(|_| {
        ConfigError::invalid(
            "memory.embedder.type",
            format!(
                "unknown embedder type {:?}; expected \"local\", \"ollama\" or \"openai\"",
                raw.kind
            ),
        )
    })?;
    if kind == ProviderKind::Anthropic {
        return Err(ConfigError::invalid(
            "memory.embedder.type",
            "anthropic offers no embeddings",
        ));
    }
    Ok(EmbedderConfig::Provider(ProviderEmbedderConfig {
        kind,
        model: raw.model.unwrap_or_else(|| "nomic-embed-text".into()),
        provider: raw.provider,
        base_url: raw
            .base_url
            .as_deref()
            .map(|u| parse_url(u, "memory.embedder.baseUrl"))
            .transpose()?,
        dimensions: raw.dimensions,
    }))
}

fn local(raw: RawEmbedder, env: Env) -> Result<LocalEmbedderConfig, ConfigError> {
    let model = raw.model.unwrap_or_else(|| DEFAULT_LOCAL_MODEL.into());
    if model.is_empty()
        || !model
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        || model.starts_with('.')
    {
        return Err(ConfigError::invalid(
            "memory.embedder.model",
            format!("{model:?} is not a model name (letters, digits, '-', '_' and '.')"),
        ));
    }
    let download_url = match raw.download_url {
        Some(url) => parse_url(&url, "memory.embedder.downloadUrl")?,
        None => parse_url(
            &format!("https://huggingface.co/sentence-transformers/{model}/resolve/main/"),
            "memory.embedder.model",
        )?,
    };
    let threads = match raw.threads {
        None => None,
        Some(n @ 1..=256) => Some(n as usize),
        Some(n) => {
            return Err(ConfigError::invalid(
                "memory.embedder.threads",
                format!("{n} is not between 1 and 256"),
            ));
        }
    };
    Ok(LocalEmbedderConfig {
        model,
        path: raw.path.filter(|p| !p.is_empty()).map(|p| expand_home(&p, env)),
        download_url,
        threads,
    })
}
