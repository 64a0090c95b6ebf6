//! What the memory system is doing right now, shared by the background worker,
//! request handlers, `/health` and `/v1/memory/status`: whether the embedder
//! answers (and with how many dimensions), and the progress of long work
//! (rebuilding, re-embedding, syncing).

use std::sync::{Mutex, RwLock};

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum Availability {
    /// No embedder configured: search is full-text only.
    None,
    /// Configured, not yet asked.
    Unknown,
    Up,
    Down,
}

#[derive(Debug, Clone)]
struct Inner {
    availability: Availability,
    error: Option<String>,
    dimensions: Option<usize>,
    /// The embedding fingerprint the index holds vectors for, once checked.
    ready: Option<String>,
}

pub struct EmbedderState {
    inner: RwLock<Inner>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct EmbedderSnapshot {
    pub state: Availability,
    pub dimensions: Option<usize>,
    pub error: Option<String>,
    /// Whether vector search can run now.
    pub ready: bool,
}

impl EmbedderState {
    pub fn new(configured: bool) -> Self {
        Self {
            inner: RwLock::new(Inner {
                availability: if configured {
                    Availability::Unknown
                } else {
                    Availability::None
                },
                error: None,
                dimensions: None,
                ready: None,
            }),
        }
    }

    fn read(&self) -> Inner {
        match self.inner.read() {
            Ok(inner) => inner.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn write(&self, change: impl FnOnce(&mut Inner)) {
        let mut inner = match self.inner.write() {
            Ok(inner) => inner,
            Err(poisoned) => poisoned.into_inner(),
        };
        change(&mut inner);
    }

    /// The embedding fingerprint to use when vectors can be made and searched now.
    pub fn ready_fingerprint(&self) -> Option<String> {
        let inner = self.read();
        (inner.availability == Availability::Up)
            .then_some(inner.ready)
            .flatten()
    }

    pub fn is_ready(&self) -> bool {
        self.ready_fingerprint().is_some()
    }

    pub fn set_ready(&self, fingerprint: String, dimensions: usize) {
        self.write(|inner| {
            inner.ready = Some(fingerprint);
            inner.dimensions = Some(dimensions);
        });
    }

    pub fn mark_up(&self) {
        self.write(|inner| {
            if inner.availability == Availability::Down {
                tracing::info!("embedder is back");
            }
            if inner.availability != Availability::None {
                inner.availability = Availability::Up;
                inner.error = None;
            }
        });
    }

    pub fn mark_down(&self, error: String) {
        self.write(|inner| {
            if inner.availability != Availability::Down {
                tracing::warn!(error = %error, "embedder is unavailable; memory search falls back to full text");
            }
            if inner.availability != Availability::None {
                inner.availability = Availability::Down;
                inner.error = Some(error);
            }
        });
    }

    /// Why vector search cannot run, for search responses.
    pub fn unavailable_reason(&self) -> String {
        let inner = self.read();
        match inner.availability {
            Availability::None => "no embedder is configured; memory search is full-text only".into(),
            Availability::Down => format!(
                "the embedder is unavailable ({}); showing full-text results",
                inner.error.as_deref().unwrap_or("no answer")
            ),
            Availability::Unknown | Availability::Up => {
                "the vector index is still being prepared; showing full-text results".into()
            }
        }
    }

    pub fn snapshot(&self) -> EmbedderSnapshot {
        let inner = self.read();
        EmbedderSnapshot {
            ready: inner.availability == Availability::Up && inner.ready.is_some(),
            state: inner.availability,
            dimensions: inner.dimensions,
            error: inner.error,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "MemoryPhase")]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "MemoryPhase"))]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Idle,
    /// Rebuilding the index from the files (chunking changed, or asked to).
    Rebuilding,
    /// Embedding pending chunks (after an outage or an embedder change).
    Embedding,
    /// Comparing the files with the index.
    Syncing,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ProgressSnapshot {
    pub phase: Phase,
    pub done: usize,
    pub total: usize,
    /// When the last full comparison with the files finished (RFC 3339).
    pub last_sync_at: Option<String>,
    pub last_error: Option<String>,
}

pub struct MemoryProgress {
    inner: Mutex<ProgressSnapshot>,
}

impl Default for MemoryProgress {
    fn default() -> Self {
        Self {
            inner: Mutex::new(ProgressSnapshot {
                phase: Phase::Idle,
                done: 0,
                total: 0,
                last_sync_at: None,
                last_error: None,
            }),
        }
    }
}

impl MemoryProgress {
    pub fn update(&self, change: impl FnOnce(&mut ProgressSnapshot)) {
        let mut inner = match self.inner.lock() {
            Ok(inner) => inner,
            Err(poisoned) => poisoned.into_inner(),
        };
        change(&mut inner);
    }

    pub fn set(&self, phase: Phase, done: usize, total: usize) {
        self.update(|p| {
            p.phase = phase;
            p.done = done;
            p.total = total;
        });
    }

    pub fn snapshot(&self) -> ProgressSnapshot {
        match self.inner.lock() {
            Ok(inner) => inner.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}
