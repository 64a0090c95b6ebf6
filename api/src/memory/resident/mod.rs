//! The resident search index: each replica keeps the memory index's ranking
//! data (analysed words, vectors, which agent and file each chunk belongs to)
//! in process and answers both search legs from it in a few milliseconds.
//! SurrealDB stays the store of record: the index is loaded at startup (from
//! this replica's snapshot, checked against SurrealDB file by file), every
//! write `Index` commits is applied here too, and with a shared SurrealDB
//! server a live query brings in other replicas' writes. It is the only
//! search path: searches wait for the load, which takes a second or two from
//! a snapshot.
//!
//! Why not SurrealDB's own HNSW and BM25 indexes: in 3.3 its BM25 scores
//! every matching row before `LIMIT` (~0.8 ms each), and its HNSW walk checks
//! the agent filter as it goes; see `bench/README.md`.
//!
//! - `analyzer`: how text becomes words (tokenizing, stemming), highlighting
//! - `load`: filling the index at startup, the live feed from other replicas
//! - `snapshot`: the index saved on local disk for the next start
//! - `text`: BM25 postings
//! - `vectors`: per-agent packed vectors, cosine search (exact, then by cluster)
//! - `partition`: an agent's vectors in lists, one per cluster past a size
//! - `quantized`: 8-bit rows and their integer dot product
//! - `state`: the documents and the operations that change them

pub mod analyzer;
mod load;
mod partition;
mod postings;
mod quantized;
pub mod snapshot;
mod state;
mod text;
mod vectors;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};
use std::time::Duration;

use serde::Deserialize;

pub use load::{Loaded, load};
pub use quantized::unit;
pub use state::{Candidate, ResidentBytes, State};

/// A chunk as the resident index keeps it: what ranking needs, and what a
/// hit shows (so a search never waits on SurrealDB).
#[derive(Debug, Clone, Deserialize)]
pub struct ResidentChunk {
    pub id: String,
    pub agent: String,
    pub path: String,
    pub kind: String,
    #[serde(default)]
    pub day: Option<String>,
    pub start_line: usize,
    pub end_line: usize,
    #[serde(default)]
    pub heading: String,
    pub text: String,
    #[serde(default)]
    pub embedding: Option<Vec<f32>>,
    /// How many times the row's vector was set or dropped (`memory_chunk.rev`,
    /// absent until the first time). The live feed echoes this replica's own
    /// writes late; a row with a lower count than the one held is such an
    /// echo, from before a vector this replica already applied.
    #[serde(default)]
    pub rev: u64,
}

/// What a `memory_chunk` query selects to read rows as [`ResidentChunk`]s.
pub const CHUNK_FIELDS: &str = "record::id(id) AS id, agent, path, kind, day, start_line, end_line, heading, \
     text, embedding, rev ?? 0 AS rev";

/// A vector stored for a chunk, and the row's `rev` after storing it.
#[derive(Debug, Clone)]
pub struct StoredVector {
    pub id: String,
    pub vector: Vec<f32>,
    pub rev: u64,
}

/// A chunk as a search hit shows it.
#[derive(Debug, Clone, Deserialize)]
pub struct Shown {
    pub id: String,
    pub agent: String,
    pub path: String,
    pub start_line: usize,
    pub end_line: usize,
    pub heading: String,
    pub text: String,
}

/// A committed change to `memory_chunk`, in the order it was committed.
/// Versions are the file's `memory_file.version` after the change.
#[derive(Debug, Clone)]
pub enum Change {
    /// A file's chunks are now exactly these (`None`: version unknown).
    ReplaceFile {
        agent: String,
        path: String,
        chunks: Vec<ResidentChunk>,
        version: Option<String>,
    },
    /// A file rewritten: only what changed.
    PatchFile(FilePatch),
    RemoveFile {
        agent: String,
        path: String,
    },
    /// Vectors for chunks that were pending (unknown ids are ignored).
    SetVectors {
        vectors: Vec<StoredVector>,
        version: String,
    },
    /// Every vector dropped (the embedder changed); every row's `rev` went up by one.
    DropVectors {
        version: String,
    },
    Clear,
    /// One chunk as another replica wrote it (from the live query).
    Upsert(ResidentChunk),
    Delete(String),
}

impl Change {
    /// How many chunks it adds, changes or removes (everything, for the
    /// changes that touch every chunk): what it costs a snapshot to miss. A
    /// removed file counts one (its chunks are not listed); the next load
    /// compares the snapshot with SurrealDB file by file, so it loses nothing.
    fn chunks_touched(&self) -> u64 {
        let count = match self {
            Change::ReplaceFile { chunks, .. } => chunks.len(),
            Change::PatchFile(patch) => patch.removed.len() + patch.moved.len() + patch.added.len(),
            Change::SetVectors { vectors, .. } => vectors.len(),
            Change::RemoveFile { .. } | Change::Upsert(_) | Change::Delete(_) => 1,
            Change::DropVectors { .. } | Change::Clear => return u64::from(u32::MAX),
        };
        count.max(1) as u64
    }
}

/// What rewriting a file changed in its chunks.
#[derive(Debug, Clone)]
pub struct FilePatch {
    pub agent: String,
    pub path: String,
    pub version: String,
    pub removed: Vec<String>,
    /// Chunks kept whose lines moved: (id, start, end).
    pub moved: Vec<(String, usize, usize)>,
    pub added: Vec<ResidentChunk>,
}

enum Phase {
    /// Not loaded; changes are ignored (the load will read them).
    Off,
    /// Loading; changes are kept and replayed once the load is done.
    Loading(Vec<Change>),
    Ready(Box<State>),
}

pub struct Resident {
    phase: RwLock<Phase>,
    /// The live query feeding other replicas' writes, while one runs.
    feed: Mutex<Option<tokio::task::AbortHandle>>,
    /// Chunks changed (`Change::chunks_touched`), and how many of those the last snapshot held.
    changes: AtomicU64,
    saved: AtomicU64,
    ready: tokio::sync::Notify,
}

impl Default for Resident {
    fn default() -> Self {
        Self {
            phase: RwLock::new(Phase::Off),
            feed: Mutex::new(None),
            changes: AtomicU64::new(0),
            saved: AtomicU64::new(0),
            ready: tokio::sync::Notify::new(),
        }
    }
}

/// See [`Resident::snapshot_due`].
pub const SNAPSHOT_AT_LEAST_EVERY: Duration = Duration::from_secs(600);

fn snapshot_due(unsaved: u64, held: usize, since: Duration) -> bool {
    unsaved > 0 && (unsaved.saturating_mul(8) >= held as u64 || since >= SNAPSHOT_AT_LEAST_EVERY)
}

/// What a search asks the resident index.
pub struct Query<'a> {
    pub agents: &'a [&'a str],
    /// `_shared` folders whose chunks neither leg returns.
    pub hidden: &'a [String],
    pub vector: Option<&'a [f32]>,
    /// Analysed query words; `None` skips the text leg.
    pub words: Option<&'a [String]>,
    pub k: usize,
}

/// Both legs' candidates, best first.
#[derive(Debug, Default)]
pub struct LegResults {
    pub vector: Vec<Candidate>,
    pub text: Vec<Candidate>,
}

impl Resident {
    pub fn is_ready(&self) -> bool {
        matches!(*self.read(), Phase::Ready(_))
    }

    /// The memory the index holds, by part; `None` until it is loaded.
    pub fn bytes(&self) -> Option<ResidentBytes> {
        match &*self.read() {
            Phase::Ready(state) => Some(state.bytes()),
            _ => None,
        }
    }

    /// Chunks held, when loaded.
    pub fn chunks(&self) -> Option<usize> {
        match &*self.read() {
            Phase::Ready(state) => Some(state.chunks()),
            _ => None,
        }
    }

    /// Starts a load; `false` when one is running or done.
    pub fn begin_loading(&self) -> bool {
        let mut phase = self.write();
        if matches!(*phase, Phase::Off) {
            *phase = Phase::Loading(Vec::new());
            true
        } else {
            false
        }
    }

    /// Installs what the load read, after replaying the changes committed meanwhile.
    pub fn finish_loading(&self, mut state: State) {
        let mut phase = self.write();
        if let Phase::Loading(changes) = &mut *phase {
            for change in changes.drain(..) {
                state.apply(change);
            }
            *phase = Phase::Ready(Box::new(state));
            self.changes.fetch_add(1, Ordering::Relaxed);
            self.ready.notify_waiters();
        }
    }

    /// Waits up to `within` for the index to load; whether it has.
    pub async fn wait_ready(&self, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let notified = self.ready.notified();
            if self.is_ready() {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.is_ready();
            }
        }
    }

    /// Whether a snapshot is worth its cost now, `since` the last one. A save
    /// encodes and writes the whole index, so a large index waits for more of
    /// it to change (an eighth), or for [`SNAPSHOT_AT_LEAST_EVERY`]: a busy
    /// day then spends the same on snapshots per change however large the
    /// index grew, and a restart reads at most that much from SurrealDB.
    pub fn snapshot_due(&self, since: Duration) -> bool {
        let unsaved = self
            .changes
            .load(Ordering::Relaxed)
            .saturating_sub(self.saved.load(Ordering::Relaxed));
        snapshot_due(unsaved, self.chunks().unwrap_or(0), since)
    }

    /// Saves the index to `path` when it changed since the last save; whether
    /// it wrote. Writes to the index wait only while it is encoded in memory
    /// (a copy of the chunks), not while the copy goes to disk.
    pub fn save(&self, path: &Path) -> std::io::Result<bool> {
        let changes = self.changes.load(Ordering::Relaxed);
        if changes == self.saved.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let encoded = match &*self.read() {
            Phase::Ready(state) => snapshot::encode(state),
            _ => return Ok(false),
        };
        snapshot::write(&encoded, path)?;
        self.saved.store(changes, Ordering::Relaxed);
        Ok(true)
    }

    /// Back to not loaded (a failed load, or a live feed that ended and may
    /// have missed changes); the memory worker loads again.
    pub fn unload(&self) {
        *self.write() = Phase::Off;
        if let Some(feed) = self.feed_slot().take() {
            feed.abort();
        }
    }

    pub fn apply(&self, change: Change) {
        self.changes.fetch_add(change.chunks_touched(), Ordering::Relaxed);
        match &mut *self.write() {
            Phase::Off => {}
            Phase::Loading(changes) => changes.push(change),
            Phase::Ready(state) => state.apply(change),
        }
    }

    /// Runs the legs asked for; `None` until the index has loaded.
    pub fn search(&self, query: &Query<'_>) -> Option<LegResults> {
        match &*self.read() {
            Phase::Ready(state) => Some(state.search(query)),
            _ => None,
        }
    }

    /// Whether every chunk named is held; `None` until the index has loaded.
    pub fn holds_all<'a>(&self, mut ids: impl Iterator<Item = &'a str>) -> Option<bool> {
        match &*self.read() {
            Phase::Ready(state) => Some(ids.all(|id| state.holds(id))),
            _ => None,
        }
    }

    /// The chunks with these ids as hits show them (ids no longer held are
    /// left out); `None` until the index has loaded.
    pub fn shown(&self, ids: &[&str]) -> Option<Vec<Shown>> {
        match &*self.read() {
            Phase::Ready(state) => Some(ids.iter().filter_map(|id| state.shown(id)).collect()),
            _ => None,
        }
    }

    pub(super) fn feed_slot(&self) -> std::sync::MutexGuard<'_, Option<tokio::task::AbortHandle>> {
        crate::locks::lock(&self.feed)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Phase> {
        self.phase.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Phase> {
        self.phase
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_waits_for_an_eighth_of_the_index_to_change_or_ten_minutes() {
        let minute = Duration::from_secs(60);
        assert!(!snapshot_due(0, 10, SNAPSHOT_AT_LEAST_EVERY), "nothing changed");
        assert!(snapshot_due(1, 8, minute), "a small index saves at every change");
        assert!(!snapshot_due(10_000, 100_000, minute));
        assert!(snapshot_due(12_500, 100_000, minute));
        assert!(snapshot_due(1, 100_000, SNAPSHOT_AT_LEAST_EVERY));
    }
}
