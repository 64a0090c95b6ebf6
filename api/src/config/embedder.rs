//! `memory.embedder`: an embeddings provider (Ollama, OpenAI), the
//! built-in local model, or `none`, as written, validated and checked. As with `storage.objects`, the other
//! kind's keys are allowed and unused (the example config lists them all).
//! Without the block the embedder is chosen at start (`memory::embedder`):
//! the built-in model ([`built_in`]) when no provider offers embeddings.
//! `memory.reranker` (a reranking endpoint) is here too.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use url::Url;

use super::ConfigError;
use super::fields::{Env, expand_home, parse_url};
use super::providers::{ProviderKind, provider_kind};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawEmbedder {
    #[serde(rename = "type")]
    pub kind: String,
    pub model: Option<String>,
    pub provider: Option<String>,
    pub base_url: Option<String>,
    pub dimensions: Option<u32>,
    /// `local` only: a directory holding the model files.
    pub path: Option<String>,
    /// `local` only: where the model files are downloaded from.
    pub download_url: Option<String>,
    /// `local` only: the most CPU threads inference uses.
    pub threads: Option<u32>,
}

/// `memory.reranker`: a reranking endpoint in the Cohere / Jina shape.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawReranker {
    pub url: String,
    pub model: String,
    pub api_key: Option<String>,
    pub candidates: Option<u32>,
    pub timeout_ms: Option<u64>,
}

#[derive(Debug)]
pub enum EmbedderConfig {
    /// An embeddings endpoint: Ollama or an OpenAI-compatible provider.
    Provider(ProviderEmbedderConfig),
    /// A sentence-embedding model run inside Onyx (`type: "local"`).
    Local(LocalEmbedderConfig),
    /// No embeddings at all (`type: "none"`): memory search is full-text only.
    Off,
}

#[derive(Debug)]
pub struct ProviderEmbedderConfig {
    pub kind: ProviderKind,
    pub model: String,
    /// The provider whose endpoint and key are used (`openai` type), if any.
    pub provider: Option<String>,
    pub base_url: Option<Url>,
    pub dimensions: Option<u32>,
}

#[derive(Debug)]
pub struct LocalEmbedderConfig {
    /// The model's name (a sentence-transformers BERT model, mean or CLS pooling).
    pub model: String,
    /// A directory holding `model.safetensors`, `tokenizer.json` and
    /// `config.json`; without one they are downloaded into the data dir.
    pub path: Option<PathBuf>,
    /// The base URL the model files are downloaded from.
    pub download_url: Url,
    /// The most CPU threads inference uses; none: the machine's cores, up to 4.
    pub threads: Option<usize>,
}

/// `memory.reranker`: an endpoint that scores (query, document) pairs, in the
/// shape Cohere, Jina, TEI, vLLM and llama.cpp's server speak.
#[derive(Debug, Clone)]
pub struct RerankerConfig {
    /// The endpoint itself, e.g. `http://127.0.0.1:8080/v1/rerank`.
    pub url: Url,
    pub model: String,
    pub api_key: Option<secrecy::SecretString>,
    /// How many fused hits it reorders (at least the hits asked for).
    pub candidates: usize,
    /// How long a search waits for it before showing the fused order.
    pub timeout: Duration,
}

/// The local embedder's model when none is named.
const DEFAULT_LOCAL_MODEL: &str = "all-MiniLM-L6-v2";

pub(super) fn embedder(raw: RawEmbedder, env: Env) -> Result<EmbedderConfig, ConfigError> {
    if raw.kind == "local" {
        return local(raw, env).map(EmbedderConfig::Local);
    }
    if raw.kind == "none" {
        return Ok(EmbedderConfig::Off);
    }
    let kind = provider_kind(&raw.kind, "memory.embedder").map_err(|_| {
        ConfigError::invalid(
            "memory.embedder.type",
            format!(
                "unknown embedder type {:?}; expected \"local\", \"ollama\", \"openai\" or \"none\"",
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

/// The built-in local embedder with its defaults: all-MiniLM-L6-v2,
/// downloaded once into the data dir on first use, from `mirror` when given
/// (`ONYX_LOCAL_MODEL_URL`, for installs that cannot reach Hugging Face).
pub fn built_in(mirror: Option<&str>) -> Result<LocalEmbedderConfig, ConfigError> {
    Ok(LocalEmbedderConfig {
        model: DEFAULT_LOCAL_MODEL.into(),
        path: None,
        download_url: match mirror.filter(|m| !m.is_empty()) {
            Some(url) => parse_url(url, "ONYX_LOCAL_MODEL_URL")?,
            None => download_url(DEFAULT_LOCAL_MODEL)?,
        },
        threads: None,
    })
}

fn download_url(model: &str) -> Result<url::Url, ConfigError> {
    parse_url(
        &format!("https://huggingface.co/sentence-transformers/{model}/resolve/main/"),
        "memory.embedder.model",
    )
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
        None => download_url(&model)?,
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

/// Fused hits a reranker reorders when `candidates` is not set.
const DEFAULT_RERANK_CANDIDATES: u32 = 20;
/// How long a search waits for the reranker when `timeoutMs` is not set.
const DEFAULT_RERANK_TIMEOUT_MS: u64 = 2_000;

pub(super) fn reranker(raw: RawReranker) -> Result<RerankerConfig, ConfigError> {
    let url = parse_url(&raw.url, "memory.reranker.url")?;
    if raw.model.trim().is_empty() {
        return Err(ConfigError::invalid(
            "memory.reranker.model",
            "name the reranking model",
        ));
    }
    let candidates = raw.candidates.unwrap_or(DEFAULT_RERANK_CANDIDATES);
    if !(1..=1000).contains(&candidates) {
        return Err(ConfigError::invalid(
            "memory.reranker.candidates",
            format!("{candidates} is not between 1 and 1000"),
        ));
    }
    let timeout_ms = raw.timeout_ms.unwrap_or(DEFAULT_RERANK_TIMEOUT_MS);
    if !(1..=600_000).contains(&timeout_ms) {
        return Err(ConfigError::invalid(
            "memory.reranker.timeoutMs",
            format!("{timeout_ms} is not between 1 and 600000"),
        ));
    }
    Ok(RerankerConfig {
        url,
        model: raw.model,
        api_key: raw
            .api_key
            .filter(|k| !k.is_empty())
            .map(secrecy::SecretString::from),
        candidates: candidates as usize,
        timeout: std::time::Duration::from_millis(timeout_ms),
    })
}
