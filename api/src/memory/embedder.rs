//! The `Embedder` trait and its implementation over the provider protocols:
//! Ollama (ollama-rs, `POST /api/embed`) and any OpenAI-compatible provider
//! (`POST /v1/embeddings`). Texts are sent in batches. Which embedder runs is
//! decided here from config: the one configured, else Ollama when available,
//! else an OpenAI provider, else the built-in local model (`local_embedder`,
//! downloaded once; memory search is BM25-only until it is there), unless
//! `type: "none"` turns embeddings off.

use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::{Value, json};

#[cfg(feature = "local-embedder")]
use super::local_embedder::{LocalEmbedder, LocalError};
use crate::config::{Config, EmbedderConfig, ProviderEmbedderConfig, ProviderKind};
use crate::providers::types::{EmbeddingInput, EmbeddingsRequest};
use crate::providers::{self, EmbeddingsCall, Provider, ProviderError};

/// Texts per embedding request.
const BATCH: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// Boxed: provider errors carry the upstream's whole error object.
    #[error(transparent)]
    Provider(Box<ProviderError>),
    #[error("the embedder answered with {got} vectors for {sent} texts")]
    Count { sent: usize, got: usize },
    #[error("the embedder answered without a usable vector: {0}")]
    Shape(String),
    #[error("no embedder is configured")]
    NotConfigured,
    #[error("the embedder did not answer within {0:?}")]
    Timeout(std::time::Duration),
    /// The built-in model (`local_embedder`) could not run; its own message.
    #[error("{0}")]
    Local(String),
}

impl EmbedError {
    /// The embedder (or its provider) did not answer in time.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::Timeout(_))
            || matches!(self, Self::Provider(err) if matches!(**err, ProviderError::Timeout { .. }))
    }
}

pub trait Embedder: Send + Sync {
    /// `ollama`, `openai` or `local`.
    fn kind(&self) -> &'static str;
    fn model(&self) -> &str;
    /// One vector per text, in order.
    fn embed<'a>(&'a self, texts: &'a [String]) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>>;
    /// The most tokens (word pieces) the model reads of one input, when the
    /// embedder can tell: longer text is cut off, so chunks stay within it.
    fn input_tokens(&self) -> BoxFuture<'_, Option<usize>> {
        async { None }.boxed()
    }
    /// Whether Onyx chose this embedder itself (nothing was configured): while
    /// it cannot run, full-text search is the expected state, not a fault.
    fn automatic(&self) -> bool {
        false
    }
    /// Gets the embedder ready ahead of its first use, reporting long work as
    /// (done, of): the local embedder downloads and loads its model.
    fn prepare<'a>(
        &'a self,
        on_progress: &'a (dyn Fn(usize, usize) + Send + Sync),
    ) -> BoxFuture<'a, Result<(), EmbedError>> {
        let _ = on_progress;
        async { Ok(()) }.boxed()
    }
}

impl From<ProviderError> for EmbedError {
    fn from(err: ProviderError) -> Self {
        Self::Provider(Box::new(err))
    }
}

/// An embedder that calls a provider's embeddings endpoint.
pub struct ProviderEmbedder {
    provider: Arc<dyn Provider>,
    model: String,
    dimensions: Option<u32>,
    /// Ollama's `POST /api/show`, which tells the model's context length.
    show_url: Option<url::Url>,
}

impl ProviderEmbedder {
    pub fn new(provider: Arc<dyn Provider>, model: String, dimensions: Option<u32>) -> Self {
        Self {
            provider,
            model,
            dimensions,
            show_url: None,
        }
    }

    /// Reads the model's input limit from the Ollama server at `base`
    /// (`POST /api/show`); without it only OpenAI's own models' limits are known.
    pub fn with_ollama_metadata(mut self, base: &url::Url) -> Self {
        let mut base = base.clone();
        if !base.path().ends_with('/') {
            base.set_path(&format!("{}/", base.path()));
        }
        self.show_url = base.join("api/show").ok();
        self
    }

    async fn embed_batch(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let body = json!({"model": self.model, "input": texts});
        let mut call = EmbeddingsCall {
            body: body.as_object().cloned().unwrap_or_default(),
            request: EmbeddingsRequest {
                model: self.model.clone(),
                input: EmbeddingInput::Many(texts.to_vec()),
                encoding_format: None,
                dimensions: self.dimensions,
            },
        };
        if let Some(dimensions) = self.dimensions {
            call.body.insert("dimensions".into(), json!(dimensions));
        }
        let response = self.provider.embeddings(&self.model, &call).await?;
        let vectors = parse_vectors(&response)?;
        if vectors.len() != texts.len() {
            return Err(EmbedError::Count {
                sent: texts.len(),
                got: vectors.len(),
            });
        }
        Ok(vectors)
    }
}

impl Embedder for ProviderEmbedder {
    fn kind(&self) -> &'static str {
        self.provider.kind().as_str()
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn embed<'a>(&'a self, texts: &'a [String]) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        async move {
            let mut out = Vec::with_capacity(texts.len());
            for batch in texts.chunks(BATCH) {
                out.extend(self.embed_batch(batch).await?);
            }
            Ok(out)
        }
        .boxed()
    }

    fn input_tokens(&self) -> BoxFuture<'_, Option<usize>> {
        async move {
            if self.model.starts_with("text-embedding-") {
                return Some(OPENAI_INPUT_TOKENS);
            }
            let url = self.show_url.clone()?;
            let client = reqwest::Client::builder()
                .timeout(std::time::Duration::from_secs(5))
                .build()
                .ok()?;
            let response = client
                .post(url)
                .json(&json!({"model": self.model}))
                .send()
                .await
                .ok()?
                .error_for_status()
                .ok()?;
            context_length(&response.json().await.ok()?)
        }
        .boxed()
    }
}

#[cfg(feature = "local-embedder")]
impl From<LocalError> for EmbedError {
    fn from(err: LocalError) -> Self {
        EmbedError::Local(err.to_string())
    }
}

#[cfg(feature = "local-embedder")]
impl Embedder for LocalEmbedder {
    fn kind(&self) -> &'static str {
        "local"
    }

    fn model(&self) -> &str {
        LocalEmbedder::model(self)
    }

    fn automatic(&self) -> bool {
        LocalEmbedder::automatic(self)
    }

    fn embed<'a>(&'a self, texts: &'a [String]) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        async move { Ok(LocalEmbedder::embed(self, texts).await?) }.boxed()
    }

    fn input_tokens(&self) -> BoxFuture<'_, Option<usize>> {
        LocalEmbedder::input_tokens(self).boxed()
    }

    fn prepare<'a>(
        &'a self,
        on_progress: &'a (dyn Fn(usize, usize) + Send + Sync),
    ) -> BoxFuture<'a, Result<(), EmbedError>> {
        async move {
            let bytes = |done: u64, total: Option<u64>| {
                let total = total.unwrap_or(done);
                on_progress(
                    usize::try_from(done).unwrap_or(usize::MAX),
                    usize::try_from(total).unwrap_or(usize::MAX),
                );
            };
            Ok(LocalEmbedder::prepare(self, &bytes).await?)
        }
        .boxed()
    }
}

/// OpenAI's embedding models (`text-embedding-3-*`, `-ada-002`) read 8,191 tokens.
const OPENAI_INPUT_TOKENS: usize = 8191;

/// `model_info["<architecture>.context_length"]` of an Ollama `/api/show` answer.
fn context_length(show: &Value) -> Option<usize> {
    show["model_info"]
        .as_object()?
        .iter()
        .find(|(key, _)| key.ends_with(".context_length"))
        .and_then(|(_, value)| value.as_u64())
        .and_then(|n| usize::try_from(n).ok())
        .filter(|n| *n > 0)
}

/// Reads an OpenAI `list` of embeddings, ordered by `index`.
fn parse_vectors(response: &Value) -> Result<Vec<Vec<f32>>, EmbedError> {
    let data = response["data"]
        .as_array()
        .ok_or_else(|| EmbedError::Shape("no data array".into()))?;
    let mut indexed: Vec<(u64, Vec<f32>)> = Vec::with_capacity(data.len());
    for (position, item) in data.iter().enumerate() {
        let vector = item["embedding"]
            .as_array()
            .ok_or_else(|| EmbedError::Shape("embedding is not an array of numbers".into()))?
            .iter()
            .map(|v| v.as_f64().map(|f| f as f32))
            .collect::<Option<Vec<f32>>>()
            .ok_or_else(|| EmbedError::Shape("embedding holds a non-number".into()))?;
        if vector.is_empty() {
            return Err(EmbedError::Shape("empty embedding".into()));
        }
        indexed.push((item["index"].as_u64().unwrap_or(position as u64), vector));
    }
    indexed.sort_by_key(|(index, _)| *index);
    Ok(indexed.into_iter().map(|(_, v)| v).collect())
}

/// The embedder this config asks for, if any (see the module doc for the order).
pub fn from_config(config: &Config) -> Result<Option<Arc<dyn Embedder>>, ProviderError> {
    Ok(match &config.memory.embedder {
        Some(EmbedderConfig::Local(local)) => Some(built_in(local, config, false)?),
        Some(EmbedderConfig::Provider(embedder)) => Some(Arc::new(configured(config, embedder)?)),
        Some(EmbedderConfig::Off) => None,
        None => Some(match automatic(config)? {
            Some(provider) => Arc::new(provider) as Arc<dyn Embedder>,
            None if !crate::features::LOCAL_EMBEDDER.built => {
                tracing::info!(
                    "no embedder configured and the built-in model is not in this build: memory search is full-text only"
                );
                return Ok(None);
            }
            None => {
                let mirror = std::env::var("ONYX_LOCAL_MODEL_URL").ok();
                let model = crate::config::built_in_embedder(mirror.as_deref())
                    .map_err(|e| ProviderError::InvalidRequest(e.to_string()))?;
                built_in(&model, config, true)?
            }
        }),
    })
}

/// The built-in model (`local_embedder`), configured or chosen automatically.
#[cfg(feature = "local-embedder")]
fn built_in(
    local: &crate::config::LocalEmbedderConfig,
    config: &Config,
    automatic: bool,
) -> Result<Arc<dyn Embedder>, ProviderError> {
    let embedder = LocalEmbedder::new(local, &config.storage.data_dir);
    Ok(Arc::new(if automatic {
        embedder.chosen_automatically()
    } else {
        embedder
    }))
}

#[cfg(not(feature = "local-embedder"))]
fn built_in(
    _local: &crate::config::LocalEmbedderConfig,
    _config: &Config,
    _automatic: bool,
) -> Result<Arc<dyn Embedder>, ProviderError> {
    let what = "memory.embedder.type: \"local\"";
    Err(ProviderError::Unsupported(
        crate::features::LOCAL_EMBEDDER.missing(what),
    ))
}

fn configured(config: &Config, wanted: &ProviderEmbedderConfig) -> Result<ProviderEmbedder, ProviderError> {
    let named = wanted
        .provider
        .as_deref()
        .and_then(|name| config.providers.get(name))
        .or_else(|| config.providers.values().find(|p| p.kind == wanted.kind));
    let provider = match (&wanted.base_url, named) {
        (Some(url), named) => {
            let mut detected = crate::config::detected_provider("embedder", wanted.kind, url.clone(), None);
            detected.api_key = named.and_then(|p| p.api_key.clone());
            providers::build(&detected)?
        }
        (None, Some(named)) => providers::build(named)?,
        (None, None) => {
            let url = match wanted.kind {
                ProviderKind::Ollama => crate::config::ollama_url("127.0.0.1:11434"),
                _ => None,
            }
            .ok_or_else(|| {
                ProviderError::InvalidRequest(
                    "memory.embedder: no provider of its type is configured; set memory.embedder.baseUrl or provider"
                        .into(),
                )
            })?;
            providers::build(&crate::config::detected_provider(
                "embedder",
                wanted.kind,
                url,
                None,
            ))?
        }
    };
    let embedder = ProviderEmbedder::new(provider, wanted.model.clone(), wanted.dimensions);
    let base = wanted.base_url.as_ref().or(named.map(|p| &p.base_url));
    Ok(match (wanted.kind, base) {
        (ProviderKind::Ollama, Some(base)) => embedder.with_ollama_metadata(base),
        (ProviderKind::Ollama, None) => match crate::config::ollama_url("127.0.0.1:11434") {
            Some(base) => embedder.with_ollama_metadata(&base),
            None => embedder,
        },
        _ => embedder,
    })
}

fn automatic(config: &Config) -> Result<Option<ProviderEmbedder>, ProviderError> {
    if let Some(ollama) = config.providers.values().find(|p| p.kind == ProviderKind::Ollama) {
        return Ok(Some(
            ProviderEmbedder::new(providers::build(ollama)?, "nomic-embed-text".into(), None)
                .with_ollama_metadata(&ollama.base_url),
        ));
    }
    if let Some(openai) = config
        .providers
        .values()
        .find(|p| p.kind == ProviderKind::OpenAi && p.api_key.is_some())
    {
        return Ok(Some(ProviderEmbedder::new(
            providers::build(openai)?,
            "text-embedding-3-small".into(),
            None,
        )));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_are_ordered_by_index() {
        let response = json!({"data": [
            {"index": 1, "embedding": [0.0, 1.0]},
            {"index": 0, "embedding": [1.0, 0.0]},
        ]});
        assert_eq!(
            parse_vectors(&response).unwrap(),
            vec![vec![1.0, 0.0], vec![0.0, 1.0]]
        );
        assert!(parse_vectors(&json!({"data": [{"embedding": "abc"}]})).is_err());
        assert!(parse_vectors(&json!({"error": "x"})).is_err());
    }

    #[test]
    fn the_context_length_comes_from_the_model_info() {
        let show = json!({"model_info": {"general.architecture": "bert", "bert.context_length": 256}});
        assert_eq!(context_length(&show), Some(256));
        let nomic = json!({"model_info": {"nomic-bert.context_length": 2048}});
        assert_eq!(context_length(&nomic), Some(2048));
        assert_eq!(context_length(&json!({"model_info": {}})), None);
    }
}
