//! Files-first memory. Agents and users write markdown files in the
//! `onyx-memory` bucket (`{agent}/MEMORY.md`, `USER.md`, `memory/YYYY-MM-DD.md`,
//! and `_shared/…` for every agent); SurrealDB holds a derived index of their
//! chunks (text and vectors), rebuilt from the files whenever it is lost or
//! built differently, and each replica searches it in process (`resident`).
//!
//! - `paths`: agent ids, file paths, which files are indexed
//! - `access`: shared projects' `ACCESS.md` rules and the decision they make
//! - `projects`: shared projects (`_shared/projects/{name}/`) as agents see them
//! - `chunker`: markdown-aware chunks with line numbers and content hashes
//! - `daily_log`: daily logs appended as segments, folded into the plain file later
//! - `segments`: where segments live, and each replica's cache of them
//! - `embedder`: the `Embedder` trait over Ollama and OpenAI-compatible providers
//! - `local_embedder`: the built-in embedding model, run in process
//! - `index`: the SurrealDB tables and statements
//! - `resident`: the in-process search index each replica answers queries from
//! - `search`: the two legs, and hits with snippets
//! - `fusion`: how the legs' candidates become one ranking
//! - `neighbours`: a chunk's context among the candidates (hybrid search)
//! - `rerank`: the optional reranking endpoint after fusion
//! - `service`: the files API and search
//! - `sync`: the background worker (file sync, re-embedding, pending queue)
//! - `state`: embedder availability and progress, for health and status

pub mod access;
pub mod chunker;
#[cfg(test)]
mod counting_store;
mod daily_log;
pub mod embedder;
mod excerpt;
mod fusion;
mod index;
#[cfg(feature = "local-embedder")]
pub mod local_embedder;
mod neighbours;
pub mod paths;
#[cfg(test)]
mod paths_fuzz;
pub mod projects;
pub mod rerank;
pub mod resident;
pub mod search;
mod segments;
mod service;
mod state;
mod sync;

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

pub use chunker::ChunkParams;
pub use embedder::{EmbedError, Embedder, ProviderEmbedder};
pub use excerpt::Excerpt;
pub use fusion::Ranking;
pub use index::{ChunkRow, FileRow, Index};
pub use projects::ProjectError;
pub use search::Mode;
pub use service::{
    FileContent, FileInfo, Memory, MemoryError, NoteTarget, SearchResults, Settings, WriteOutcome,
};
pub use state::{Availability, EmbedderSnapshot, ProgressSnapshot};
pub use sync::SyncReport;

use crate::config::MemoryConfig;

impl Default for Settings {
    /// The defaults of the `memory` config block.
    fn default() -> Self {
        Self {
            chunking: ChunkParams {
                target_tokens: 400,
                overlap_tokens: 80,
            },
            ranking: Ranking {
                fusion: crate::config::Fusion::Adaptive,
                vector_weight: 0.6,
                text_weight: 0.4,
                min_score: 0.0,
                half_life_days: 365.0,
            },
            sync_interval: Duration::from_secs(60),
            snapshot: None,
            resident_budget_bytes: crate::config::DEFAULT_RESIDENT_BUDGET_MB << 20,
            reranker: None,
        }
    }
}

impl Settings {
    pub fn from_config(config: &MemoryConfig) -> Self {
        Self {
            chunking: ChunkParams {
                target_tokens: config.chunk_tokens as usize,
                overlap_tokens: config.chunk_overlap as usize,
            },
            ranking: Ranking {
                fusion: config.fusion,
                vector_weight: config.vector_weight,
                text_weight: config.text_weight,
                min_score: config.min_score,
                half_life_days: config.half_life_days,
            },
            sync_interval: config.sync_interval,
            snapshot: None,
            resident_budget_bytes: config.resident_budget_mb << 20,
            reranker: config
                .reranker
                .as_ref()
                .map(|r| Arc::new(rerank::Reranker::new(r.clone()))),
        }
    }
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
#[schemars(rename = "MemoryStatus")]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "MemoryStatus"))]
pub struct Status {
    pub embedder: EmbedderInfo,
    pub chunks: usize,
    pub pending: usize,
    pub files: usize,
    pub progress: ProgressSnapshot,
    pub search_index: SearchIndexInfo,
}

/// The in-process search index this replica answers from.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct SearchIndexInfo {
    /// `ready`, or `loading` (searches wait for it).
    pub state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub chunks: Option<usize>,
    /// The memory it holds, by part (once loaded).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub bytes: Option<resident::ResidentBytes>,
    /// The memory it may hold (`memory.residentBudgetMb`).
    pub budget_bytes: u64,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct EmbedderInfo {
    pub kind: Option<&'static str>,
    pub model: Option<String>,
    #[serde(flatten)]
    pub state: EmbedderSnapshot,
}

impl Memory {
    pub fn embedder_info(&self) -> EmbedderInfo {
        EmbedderInfo {
            kind: self.embedder.as_ref().map(|e| e.kind()),
            model: self.embedder.as_ref().map(|e| e.model().to_string()),
            state: self.state.snapshot(),
        }
    }

    /// Whether the embedder is the built-in default Onyx chose itself.
    pub fn embedder_is_automatic(&self) -> bool {
        self.embedder.as_ref().is_some_and(|e| e.automatic())
    }

    /// The index at a glance, for `/v1/memory/status` and the UI.
    pub async fn status(&self) -> Result<Status, MemoryError> {
        let (chunks, pending, files) = futures::try_join!(
            self.index.count(false),
            self.index.count(true),
            self.index.files()
        )?;
        Ok(Status {
            embedder: self.embedder_info(),
            chunks,
            pending,
            files: files.len(),
            progress: self.progress.snapshot(),
            search_index: self.search_index(),
        })
    }

    /// Loads the resident search index now (the memory worker does it on its
    /// own; tools that drive `Memory` directly call this).
    pub async fn load_search_index(&self) -> Result<resident::Loaded, MemoryError> {
        let snapshot = self.settings.snapshot.as_deref();
        Ok(resident::load(self.index.db(), self.index.resident(), snapshot).await?)
    }

    /// Saves the search index for the next start, if it changed since the
    /// last save and a place is configured; whether it wrote.
    pub async fn save_search_index(&self) -> std::io::Result<bool> {
        let Some(path) = self.settings.snapshot.clone() else {
            return Ok(false);
        };
        let resident = self.index.resident().clone();
        tokio::task::spawn_blocking(move || resident.save(&path))
            .await
            .map_err(std::io::Error::other)?
    }

    /// The resident search index: its state, size and budget.
    pub fn search_index(&self) -> SearchIndexInfo {
        let chunks = self.index.resident().chunks();
        SearchIndexInfo {
            state: if chunks.is_some() { "ready" } else { "loading" },
            chunks,
            bytes: self.index.resident().bytes(),
            budget_bytes: self.settings.resident_budget_bytes,
        }
    }

    /// Asks the embedder whether it answers now (for `/health`); `None` when
    /// none is configured.
    pub async fn probe_embedder(&self, within: Duration) -> Option<Result<usize, EmbedError>> {
        self.embedder.as_ref()?;
        let probe = tokio::time::timeout(within, self.embed(&["health probe".to_string()])).await;
        Some(match probe {
            Ok(Ok(vectors)) => Ok(vectors.first().map_or(0, Vec::len)),
            Ok(Err(err)) => Err(err),
            Err(_) => Err(EmbedError::Timeout(within)),
        })
    }

    /// Gets the embedder ready now (`onyx reindex` shows the local model's
    /// download with this); does nothing without an embedder.
    pub async fn prepare_embedder(
        &self,
        on_progress: &(dyn Fn(usize, usize) + Send + Sync),
    ) -> Result<(), EmbedError> {
        match &self.embedder {
            Some(embedder) => embedder.prepare(on_progress).await,
            None => Ok(()),
        }
    }

    pub async fn pending_count(&self) -> usize {
        self.index.count(true).await.unwrap_or(0)
    }
}

/// Builds the memory service for a config (the embedder is chosen as
/// `embedder::from_config` says).
pub fn build(
    config: &crate::config::Config,
    objects: Arc<dyn crate::storage::ObjectStore>,
    db: crate::storage::Db,
) -> Result<Arc<Memory>, crate::providers::ProviderError> {
    let embedder = embedder::from_config(config)?;
    let settings = Settings {
        snapshot: Some(config.storage.data_dir.join("memory-index.snapshot")),
        ..Settings::from_config(&config.memory)
    };
    Ok(Memory::new(objects, db, embedder, settings))
}
