//! The built-in local embedder (`memory.embedder: { type: "local" }`): a
//! sentence-transformers BERT model (all-MiniLM-L6-v2 by default) run inside
//! Onyx on the CPU, so semantic search needs no Ollama.
//!
//! - `files`: the model files, from a configured directory or downloaded once
//! - `bert`: the encoder's forward pass, pooling (mean or CLS), normalisation
//!
//! The model loads on first use (downloading it first when needed), on a task
//! of its own so that a caller giving up (a health probe's timeout) does not
//! abort a download half way. Inference runs on blocking threads, at most
//! `threads` at once over all callers, a few texts per turn so that a query
//! waits for one small group of a long reindex, not all of it.

mod bert;
mod files;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokenizers::{Tokenizer, TruncationParams};
use tokio::sync::{OnceCell, Semaphore, watch};

use crate::config::LocalEmbedderConfig;
use bert::Pooling;
pub use files::DownloadProgress;

/// Texts each thread embeds per turn (one turn holds the threads it uses).
const TEXTS_PER_THREAD: usize = 4;
/// How long a failure to load the model is answered without trying again.
const RETRY_AFTER: Duration = Duration::from_secs(30);
/// Threads used when none are configured: the cores, at most this many.
const DEFAULT_MAX_THREADS: usize = 4;

#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("downloading the embedding model from {url}: {message}")]
    Download { url: String, message: String },
    #[error("the embedding model in {dir} lacks {files}")]
    Missing { dir: PathBuf, files: String },
    #[error("the embedding model cannot be used: {0}")]
    Model(String),
    #[error("the embedding model's tokenizer: {0}")]
    Tokenizer(String),
    #[error("the embedding model stopped: {0}")]
    Stopped(String),
    #[error("{0} (tried again 30 s after it failed)")]
    Earlier(String),
}

impl LocalError {
    fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Where the model files are and how they are obtained.
#[derive(Debug, Clone)]
struct Source {
    model: String,
    dir: PathBuf,
    /// None: `dir` is configured and must already hold the files.
    download_from: Option<url::Url>,
}

pub struct LocalEmbedder {
    source: Arc<Source>,
    threads: usize,
    cpu: Arc<Semaphore>,
    loaded: OnceCell<Arc<Model>>,
    /// Held by the task that downloads and loads, so two never write one file.
    loading: Arc<tokio::sync::Mutex<()>>,
    progress: watch::Sender<DownloadProgress>,
    /// The last failure to load, repeated without a new attempt until
    /// `RETRY_AFTER` has passed (the memory worker asks on every tick).
    failed: std::sync::Mutex<Option<(Instant, String)>>,
    /// Chosen by Onyx because no embedder was configured.
    automatic: bool,
}

impl LocalEmbedder {
    /// The embedder for `config`; downloaded files go under `data_dir`.
    /// Nothing is read until the first use.
    pub fn new(config: &LocalEmbedderConfig, data_dir: &Path) -> Self {
        let source = match &config.path {
            Some(dir) => Source {
                model: config.model.clone(),
                dir: dir.clone(),
                download_from: None,
            },
            None => Source {
                model: config.model.clone(),
                dir: data_dir.join("models").join(&config.model),
                download_from: Some(config.download_url.clone()),
            },
        };
        let threads = config.threads.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map_or(1, usize::from)
                .min(DEFAULT_MAX_THREADS)
        });
        Self {
            source: Arc::new(source),
            threads,
            cpu: Arc::new(Semaphore::new(threads)),
            loaded: OnceCell::new(),
            loading: Arc::new(tokio::sync::Mutex::new(())),
            progress: watch::channel(DownloadProgress::default()).0,
            failed: std::sync::Mutex::new(None),
            automatic: false,
        }
    }

    /// Marks this embedder as the built-in default Onyx chose itself.
    pub fn chosen_automatically(mut self) -> Self {
        self.automatic = true;
        self
    }

    pub fn automatic(&self) -> bool {
        self.automatic
    }

    pub fn model(&self) -> &str {
        &self.source.model
    }

    /// Where the model files are read from.
    pub fn dir(&self) -> &Path {
        &self.source.dir
    }

    /// Downloads (when needed) and loads the model, reporting the download
    /// as (bytes, of bytes) of the file in flight.
    pub async fn prepare(
        &self,
        on_progress: &(dyn Fn(u64, Option<u64>) + Send + Sync),
    ) -> Result<(), LocalError> {
        let mut updates = self.progress.subscribe();
        let load = self.model_loaded();
        tokio::pin!(load);
        loop {
            tokio::select! {
                result = &mut load => return result.map(|_| ()),
                changed = updates.changed() => {
                    if changed.is_err() {
                        return load.await.map(|_| ());
                    }
                    let now = updates.borrow_and_update().clone();
                    on_progress(now.done, now.total);
                }
            }
        }
    }

    /// One unit vector per text, in order.
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LocalError> {
        let model = self.model_loaded().await?;
        let mut out = Vec::with_capacity(texts.len());
        for group in texts.chunks(self.threads * TEXTS_PER_THREAD) {
            let workers = self.threads.min(group.len());
            let permits = self
                .cpu
                .clone()
                .acquire_many_owned(workers as u32)
                .await
                .map_err(|e| LocalError::Stopped(e.to_string()))?;
            let model = model.clone();
            let group = group.to_vec();
            let vectors = tokio::task::spawn_blocking(move || {
                let _permits = permits;
                model.embed_all(&group, workers)
            })
            .await
            .map_err(|e| LocalError::Stopped(e.to_string()))??;
            out.extend(vectors);
        }
        Ok(out)
    }

    /// The most word pieces the model reads of one text (`max_seq_length` of
    /// `sentence_bert_config.json`, else the model's positions); `None` while
    /// the model cannot be loaded.
    pub async fn input_tokens(&self) -> Option<usize> {
        self.model_loaded().await.ok().map(|m| m.max_tokens)
    }

    async fn model_loaded(&self) -> Result<Arc<Model>, LocalError> {
        if let Some(model) = self.loaded.get() {
            return Ok(model.clone());
        }
        let earlier = self.failed.lock().ok().and_then(|f| f.clone());
        if let Some((at, message)) = earlier
            && at.elapsed() < RETRY_AFTER
        {
            return Err(LocalError::Earlier(message));
        }
        let loaded = self.load().await;
        if let (Err(err), Ok(mut failed)) = (&loaded, self.failed.lock()) {
            *failed = Some((Instant::now(), err.to_string()));
        }
        loaded
    }

    async fn load(&self) -> Result<Arc<Model>, LocalError> {
        self.loaded
            .get_or_try_init(|| {
                let source = self.source.clone();
                let lock = self.loading.clone();
                let progress = self.progress.clone();
                async move {
                    tokio::spawn(async move {
                        let _only_one = lock.lock().await;
                        obtain(&source, &progress).await?;
                        let dir = source.dir.clone();
                        tokio::task::spawn_blocking(move || Model::load(&dir))
                            .await
                            .map_err(|e| LocalError::Stopped(e.to_string()))?
                    })
                    .await
                    .map_err(|e| LocalError::Stopped(e.to_string()))?
                    .map(Arc::new)
                }
            })
            .await
            .cloned()
    }
}

/// Makes sure the model files are on disk: downloads what is missing (with
/// a log line at every tenth of the weights) or, for a configured directory, names what lacks.
async fn obtain(source: &Source, progress: &watch::Sender<DownloadProgress>) -> Result<(), LocalError> {
    if files::complete(&source.dir) {
        return Ok(());
    }
    let Some(url) = &source.download_from else {
        return Err(LocalError::Missing {
            dir: source.dir.clone(),
            files: files::missing(&source.dir).join(", "),
        });
    };
    tracing::info!(model = %source.model, from = %url, to = %source.dir.display(), "downloading the local embedding model");
    let logged = AtomicUsize::new(usize::MAX);
    let report = |now: DownloadProgress| {
        // Only the weights take long enough to be worth a line (the JSON files are kilobytes).
        if let Some(total) = now.total.filter(|t| *t >= 1_000_000) {
            let tenth = (now.done * 10 / total) as usize;
            if logged.swap(tenth, Ordering::Relaxed) != tenth {
                tracing::info!(
                    file = %now.file,
                    "downloading the local embedding model: {}% of {} MB",
                    tenth * 10,
                    total / 1_000_000
                );
            }
        }
        progress.send_replace(now);
    };
    files::download(&source.model, url, &source.dir, &report).await?;
    tracing::info!(model = %source.model, "the local embedding model is downloaded");
    Ok(())
}

/// A loaded model: its tokenizer and encoder.
struct Model {
    tokenizer: Tokenizer,
    bert: bert::Bert,
    max_tokens: usize,
    pooling: Pooling,
}

impl Model {
    fn load(dir: &Path) -> Result<Self, LocalError> {
        let read = |name: &str| {
            std::fs::read(dir.join(name)).map_err(|source| LocalError::io(&dir.join(name), source))
        };
        let config: bert::BertConfig = serde_json::from_slice(&read("config.json")?)
            .map_err(|e| LocalError::Model(format!("config.json: {e}")))?;
        let pooling = pooling(dir)?;
        let max_tokens = sentence_max_tokens(dir)?
            .unwrap_or(config.max_position_embeddings)
            .min(config.max_position_embeddings);
        let bert = bert::Bert::load(config, &read("model.safetensors")?)?;
        let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json"))
            .map_err(|e| LocalError::Tokenizer(e.to_string()))?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_tokens,
                ..TruncationParams::default()
            }))
            .map_err(|e| LocalError::Tokenizer(e.to_string()))?;
        tokenizer.with_padding(None);
        Ok(Self {
            tokenizer,
            bert,
            max_tokens,
            pooling,
        })
    }

    fn embed_one(&self, text: &str) -> Result<Vec<f32>, LocalError> {
        let encoding = self
            .tokenizer
            .encode(text, true)
            .map_err(|e| LocalError::Tokenizer(e.to_string()))?;
        self.bert
            .embed(encoding.get_ids(), encoding.get_type_ids(), self.pooling)
    }

    /// Embeds `texts` on `workers` threads, each taking the next text as it
    /// finishes one (texts differ in length).
    fn embed_all(&self, texts: &[String], workers: usize) -> Result<Vec<Vec<f32>>, LocalError> {
        if workers <= 1 {
            return texts.iter().map(|t| self.embed_one(t)).collect();
        }
        let next = AtomicUsize::new(0);
        let mut done: Vec<(usize, Result<Vec<f32>, LocalError>)> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..workers)
                .map(|_| {
                    scope.spawn(|| {
                        let mut mine = Vec::new();
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            let Some(text) = texts.get(i) else { break };
                            mine.push((i, self.embed_one(text)));
                        }
                        mine
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap_or_default())
                .collect()
        });
        if done.len() != texts.len() {
            return Err(LocalError::Stopped("an inference thread panicked".into()));
        }
        done.sort_by_key(|(i, _)| *i);
        done.into_iter().map(|(_, v)| v).collect()
    }
}

/// The model's sentence-transformers pooling: CLS when `1_Pooling/config.json`
/// says `pooling_mode_cls_token`, the mean when it says
/// `pooling_mode_mean_tokens` or there is no such file; any other mode is refused.
fn pooling(dir: &Path) -> Result<Pooling, LocalError> {
    let Some(config) = read_optional_json(dir, "1_Pooling/config.json")? else {
        return Ok(Pooling::Mean);
    };
    let on = |key: &str| config[key].as_bool() == Some(true);
    match (on("pooling_mode_cls_token"), on("pooling_mode_mean_tokens")) {
        (true, false) => Ok(Pooling::Cls),
        (false, true) => Ok(Pooling::Mean),
        (false, false) if config.get("pooling_mode_mean_tokens").is_none() => Ok(Pooling::Mean),
        _ => Err(LocalError::Model(
            "1_Pooling/config.json: only one of mean (pooling_mode_mean_tokens) or CLS (pooling_mode_cls_token) pooling is supported"
                .into(),
        )),
    }
}

fn sentence_max_tokens(dir: &Path) -> Result<Option<usize>, LocalError> {
    Ok(read_optional_json(dir, "sentence_bert_config.json")?
        .and_then(|c| c["max_seq_length"].as_u64())
        .and_then(|n| usize::try_from(n).ok())
        .filter(|n| *n > 0))
}

fn read_optional_json(dir: &Path, name: &str) -> Result<Option<serde_json::Value>, LocalError> {
    let path = dir.join(name);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| LocalError::Model(format!("{name}: {e}"))),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(LocalError::io(&path, source)),
    }
}

#[cfg(test)]
mod tests;
