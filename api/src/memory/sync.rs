//! Keeping the index in step with the files: comparing the bucket with the
//! index by change token and checksum (files edited or deleted outside Onyx),
//! rebuilding everything when the chunking fingerprint changes, re-embedding
//! when the embedder changes, and draining chunks that wait for the embedder.
//! One background task per process does all of it, and never gives up.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::chunker::{CHUNKER_VERSION, content_hash};
use super::index::Fingerprint;
use super::paths;
use super::segments;
use super::service::{Memory, MemoryError};
use super::state::Phase;
use crate::backoff::Backoff;
use crate::storage::Bucket;

const TICK: Duration = Duration::from_secs(2);
const MAX_PROBE_BACKOFF: Duration = Duration::from_secs(60);
const DRAIN_BATCH: usize = 64;
/// How often an idle, healthy embedder is asked whether it still answers.
const LIVENESS_EVERY: Duration = Duration::from_secs(30);
/// How often the worker asks whether the search index is due a save for the
/// next start (`Resident::snapshot_due`). What a crash loses is read again
/// from SurrealDB at the next start.
const SNAPSHOT_EVERY: Duration = Duration::from_secs(60);

/// What a comparison with the files changed.
#[derive(Debug, Default, Serialize, PartialEq, Eq, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct SyncReport {
    pub files: usize,
    pub reindexed: usize,
    pub removed: usize,
}

/// Reports (done, total) while work runs.
pub type OnProgress<'a> = &'a (dyn Fn(usize, usize) + Send + Sync);

impl Memory {
    fn chunking_fingerprint(&self) -> String {
        let c = self.chunk_params();
        format!(
            "chunker v{CHUNKER_VERSION}, {}/{} tokens",
            c.target_tokens, c.overlap_tokens
        )
    }

    /// Sync, embedding, recovery and snapshots: the loop for the app's `Background`.
    pub fn background_loops(self: &Arc<Self>) -> impl Future<Output = ()> + Send + 'static {
        let memory = self.clone();
        async move {
            let _feed = StopsFeed(memory.clone());
            memory.background().await;
        }
    }

    async fn background(&self) {
        let mut prepared = false;
        let mut last_sync: Option<Instant> = None;
        let mut probe_backoff = Backoff::new(TICK, MAX_PROBE_BACKOFF);
        let mut next_probe = Instant::now();
        let mut last_liveness = Instant::now();
        let mut load_backoff = Backoff::new(TICK, MAX_PROBE_BACKOFF);
        let mut next_load = Instant::now();
        let mut last_snapshot = Instant::now();
        let mut save_now = false;
        loop {
            if !prepared {
                match self.prepare_chunking().await {
                    Ok(()) => prepared = true,
                    Err(err) => self.record_error("preparing the memory index", &err),
                }
            }
            if prepared && !self.index.resident().is_ready() && Instant::now() >= next_load {
                let wait = match self.load_search_index().await {
                    Ok(loaded) => {
                        load_backoff.succeeded();
                        // A full read from SurrealDB is what the next start should not repeat.
                        if loaded.chunks > loaded.from_snapshot {
                            save_now = true;
                        }
                        TICK
                    }
                    Err(err) => {
                        tracing::warn!(error = %crate::error_chain::chain(&err), "loading the memory search index failed; searches wait for it");
                        load_backoff.failed()
                    }
                };
                next_load = Instant::now() + wait;
            }
            if save_now
                || (last_snapshot.elapsed() >= SNAPSHOT_EVERY
                    && self.index.resident().snapshot_due(last_snapshot.elapsed()))
            {
                last_snapshot = Instant::now();
                save_now = false;
                if let Err(err) = self.save_search_index().await {
                    tracing::warn!(error = %err, "saving the memory search index snapshot failed");
                }
            }
            if self.embedder.is_some() && !self.state.is_ready() && Instant::now() >= next_probe {
                let wait = match self.prepare_embedding(&|_, _| {}).await {
                    Ok(()) => {
                        probe_backoff.succeeded();
                        TICK
                    }
                    Err(err) => {
                        tracing::debug!(error = %crate::error_chain::chain(&err), "embedder probe failed");
                        probe_backoff.failed()
                    }
                };
                next_probe = Instant::now() + wait;
            }
            if self.state.is_ready() && last_liveness.elapsed() >= LIVENESS_EVERY {
                last_liveness = Instant::now();
                let _ = self.embed(&["liveness probe".to_string()]).await;
            }
            let due = last_sync.is_none_or(|at| at.elapsed() >= self.settings.sync_interval);
            if prepared && due {
                match self.sync_files(&|_, _| {}).await {
                    Ok(report) => {
                        if report.reindexed + report.removed > 0 {
                            tracing::info!(?report, "memory files changed outside onyx were re-indexed");
                        }
                        last_sync = Some(Instant::now());
                    }
                    Err(err) => self.record_error("syncing memory files", &err),
                }
            }
            if self.state.is_ready()
                && let Err(err) = self.drain_pending(&|_, _| {}).await
            {
                self.record_error("embedding pending chunks", &err);
            }
            tokio::time::sleep(TICK).await;
        }
    }

    fn record_error(&self, what: &str, err: &MemoryError) {
        let chain = crate::error_chain::chain(err);
        tracing::warn!(error = %chain, "{what} failed; will retry");
        self.progress.update(|p| {
            p.phase = Phase::Idle;
            p.last_error = Some(format!("{what}: {chain}"));
        });
    }

    /// Empties the index when it was built with other chunking parameters
    /// (the next sync rebuilds it from the files).
    pub async fn prepare_chunking(&self) -> Result<(), MemoryError> {
        if let Some(embedder) = &self.embedder
            && self.input_tokens.load(Ordering::Relaxed) == 0
            && let Some(limit) = embedder.input_tokens().await
        {
            // Known from now on; an embedder that cannot tell (or is down at
            // start) leaves the configured size.
            self.input_tokens.store(limit, Ordering::Relaxed);
        }
        let mut stored = self.index.fingerprint().await?;
        let wanted = self.chunking_fingerprint();
        if stored.chunking.as_deref() != Some(wanted.as_str()) {
            if stored.chunking.is_some() {
                tracing::info!(from = ?stored.chunking, to = %wanted, "chunking changed; rebuilding the memory index");
            }
            self.index.clear().await?;
            stored.chunking = Some(wanted);
            self.index.set_fingerprint(&stored).await?;
        }
        Ok(())
    }

    /// Asks the embedder for its dimensions; when they or the model differ from
    /// what the index was built with, drops every vector (re-embedded by the
    /// drain, with progress).
    pub async fn prepare_embedding(&self, on_progress: OnProgress<'_>) -> Result<(), MemoryError> {
        let Some(embedder) = self.embedder.clone() else {
            return Ok(());
        };
        let probe = self.embed(&["dimension probe".to_string()]).await?;
        let dimensions = probe.first().map_or(0, Vec::len);
        let wanted = format!("{} {} {dimensions}d", embedder.kind(), embedder.model());
        let mut stored: Fingerprint = self.index.fingerprint().await?;
        if stored.embedding.as_deref() != Some(wanted.as_str()) || stored.dimensions != Some(dimensions) {
            if stored.embedding.is_some() {
                tracing::info!(from = ?stored.embedding, to = %wanted, "embedder changed; re-embedding all memory");
            }
            self.index.reset_vectors().await?;
            stored.embedding = Some(wanted.clone());
            stored.dimensions = Some(dimensions);
            self.index.set_fingerprint(&stored).await?;
        }
        self.state.set_ready(wanted, dimensions);
        self.drain_pending(on_progress).await?;
        Ok(())
    }

    /// Embeds every pending chunk (cache first). Stops at the first failure;
    /// what is left stays pending.
    pub async fn drain_pending(&self, on_progress: OnProgress<'_>) -> Result<usize, MemoryError> {
        let Some(embedding) = self.state.ready_fingerprint() else {
            return Ok(0);
        };
        // The first batch before any count: this runs every tick, and most
        // ticks find nothing to embed.
        let mut batch = self.index.pending(DRAIN_BATCH).await?;
        if batch.is_empty() {
            return Ok(0);
        }
        let total = self.index.count(true).await?.max(batch.len());
        let mut done = 0;
        self.progress.set(Phase::Embedding, 0, total);
        while !batch.is_empty() {
            let hashes: Vec<String> = batch.iter().map(|c| c.hash.clone()).collect();
            let cached = self.index.cached_vectors(&embedding, &hashes).await?;
            let missing: Vec<&super::index::PendingChunk> =
                batch.iter().filter(|c| !cached.contains_key(&c.hash)).collect();
            let texts: Vec<String> = missing.iter().map(|c| c.body.clone()).collect();
            let fresh = if texts.is_empty() {
                Vec::new()
            } else {
                match self.embed(&texts).await {
                    Ok(vectors) => vectors,
                    Err(err) => {
                        self.progress.set(Phase::Idle, 0, 0);
                        return Err(err.into());
                    }
                }
            };
            let new_entries: Vec<(String, Vec<f32>)> = missing
                .iter()
                .zip(fresh)
                .map(|(c, v)| (c.hash.clone(), v))
                .collect();
            self.index.cache_vectors(&embedding, &new_entries).await?;
            let by_hash: HashMap<&str, &Vec<f32>> = cached
                .iter()
                .map(|(h, v)| (h.as_str(), v))
                .chain(new_entries.iter().map(|(h, v)| (h.as_str(), v)))
                .collect();
            let updates: Vec<(String, Vec<f32>)> = batch
                .iter()
                .filter_map(|c| by_hash.get(c.hash.as_str()).map(|v| (c.id.clone(), (*v).clone())))
                .collect();
            self.index.set_vectors(&updates).await?;
            let before = done;
            done += batch.len();
            self.progress.set(Phase::Embedding, done.min(total), total);
            on_progress(done.min(total), total);
            // Large (re-)embeds also report in the log, every tenth.
            if total >= 500 && before * 10 / total != done * 10 / total {
                tracing::info!(done = done.min(total), total, "embedding memory chunks");
            }
            batch = self.index.pending(DRAIN_BATCH).await?;
        }
        self.progress.set(Phase::Idle, 0, 0);
        tracing::info!(chunks = done, "embedded pending memory chunks");
        Ok(done)
    }

    /// Compares every memory file in the bucket with the index: new or changed
    /// files are (re)indexed, files gone from the bucket lose their chunks.
    pub async fn sync_files(&self, on_progress: OnProgress<'_>) -> Result<SyncReport, MemoryError> {
        // The index first, then the bucket: a file written in between is then
        // listed (and indexed again, harmlessly) rather than taken for deleted.
        let known: HashMap<String, super::index::FileRow> = self
            .index
            .files()
            .await?
            .into_iter()
            .map(|f| (format!("{}/{}", f.agent, f.path), f))
            .collect();
        let listed = self.listed_files().await?;
        let total = listed.len();
        let mut report = SyncReport {
            files: total,
            ..SyncReport::default()
        };
        self.progress.set(Phase::Syncing, 0, total);
        let mut seen = HashSet::with_capacity(total);
        let folds_before = super::daily_log::folds_before(crate::clock::now());
        for (done, file) in listed.iter().enumerate() {
            let key = format!("{}/{}", file.agent, file.path);
            let row = known.get(&key);
            seen.insert(key);
            let (agent, path) = (file.agent.as_str(), file.path.as_str());
            let lock = self.lock_for(agent, path);
            // Segments beside a plain file (a fold cut short), or of a day
            // over everywhere: into the plain file.
            if file.segments && (file.plain || *path < *folds_before.as_str()) {
                let _guard = lock.lock().await;
                self.fold_into_plain(agent, path).await?;
                report.reindexed += 1;
                continue;
            }
            if row.is_some_and(|r| r.etag == file.etag && r.size == file.size) {
                continue;
            }
            let _guard = lock.lock().await;
            if file.segments
                && let Some(row) = row
                && self.appends_indexed(row, file)
            {
                // Appends made since the index was read: each indexed its own segment.
                self.index
                    .advance_file(agent, path, &row.etag, &file.etag, file.size)
                    .await?;
                continue;
            }
            let (content, etag) = if file.segments {
                match self.read_segmented(agent, path).await? {
                    Some(log) => (log.content, log.etag),
                    None => continue,
                }
            } else {
                let key = paths::object_key(agent, path)?;
                // Gone since the listing: the next sync removes it.
                let Some(current) = self.objects.get(Bucket::Memory, &key).await? else {
                    continue;
                };
                (
                    String::from_utf8_lossy(&current.body).into_owned(),
                    file.etag.clone(),
                )
            };
            if row.is_some_and(|r| r.checksum == content_hash(&content)) {
                self.index.touch_file(agent, path, &etag).await?;
            } else {
                self.index_content(agent, path, &content, &etag).await?;
                report.reindexed += 1;
            }
            self.progress.set(Phase::Syncing, done + 1, total);
            on_progress(done + 1, total);
        }
        for (key, row) in &known {
            if !seen.contains(key) {
                let lock = self.lock_for(&row.agent, &row.path);
                let _guard = lock.lock().await;
                let key = paths::object_key(&row.agent, &row.path)?;
                if self.objects.get(Bucket::Memory, &key).await?.is_none() {
                    self.index.remove_file(&row.agent, &row.path).await?;
                    report.removed += 1;
                }
            }
        }
        on_progress(total, total);
        let now = crate::clock::now_stamp();
        self.progress.update(|p| {
            p.phase = Phase::Idle;
            p.done = 0;
            p.total = 0;
            p.last_sync_at = Some(now);
            p.last_error = None;
        });
        Ok(report)
    }

    /// Every indexed file in the bucket with its change token: plain files,
    /// and daily logs kept as segments (one entry per log).
    async fn listed_files(&self) -> Result<Vec<Listed>, MemoryError> {
        let objects = self.objects.list(Bucket::Memory, "").await?;
        let mut files: HashMap<(&str, &str), Listed> = HashMap::new();
        for ((agent, path), log) in segments::group(&objects) {
            files.insert(
                (agent, path),
                Listed {
                    agent: agent.into(),
                    path: path.into(),
                    etag: segments::etag(log.last_seq),
                    size: log.bytes,
                    plain: false,
                    segments: true,
                },
            );
        }
        for object in &objects {
            let Some((agent, path)) = paths::split_key(&object.key) else {
                continue;
            };
            if paths::indexed_kind(agent, path).is_none() {
                continue;
            }
            let file = files.entry((agent, path)).or_insert_with(|| Listed {
                agent: agent.into(),
                path: path.into(),
                etag: String::new(),
                size: 0,
                plain: true,
                segments: false,
            });
            // The plain file's token wins: segments beside it get folded in.
            file.plain = true;
            file.etag.clone_from(&object.etag);
            file.size = object.size;
        }
        let mut listed: Vec<Listed> = files.into_values().collect();
        listed.sort_by(|a, b| (&a.agent, &a.path).cmp(&(&b.agent, &b.path)));
        Ok(listed)
    }

    /// Whether a log kept as segments differs from its index row only by
    /// segments appended since, each already indexed as its own chunk (as
    /// every append does). Under load the listing is always a few appends
    /// ahead of the row read before it; reading the whole day's log again
    /// for that would cost every sync more as the day grows.
    fn appends_indexed(&self, row: &super::index::FileRow, file: &Listed) -> bool {
        let (Some(indexed), Some(listed)) = (segments::seq_of(&row.etag), segments::seq_of(&file.etag))
        else {
            return false;
        };
        if indexed >= listed || row.size > file.size {
            return false;
        }
        let ids: Vec<String> = (indexed + 1..=listed)
            .map(|seq| segments::chunk_id(&file.agent, &file.path, seq))
            .collect();
        self.index.holds_all(ids.iter().map(String::as_str)) == Some(true)
    }

    /// Forgets the derived index and rebuilds it from the files (`onyx reindex`).
    pub async fn rebuild(&self, on_progress: OnProgress<'_>) -> Result<SyncReport, MemoryError> {
        self.index.clear().await?;
        let mut fingerprint = self.index.fingerprint().await?;
        fingerprint.chunking = Some(self.chunking_fingerprint());
        self.index.set_fingerprint(&fingerprint).await?;
        self.progress.set(Phase::Rebuilding, 0, 0);
        self.sync_files(on_progress).await
    }
}

/// A file as the bucket lists it.
struct Listed {
    agent: String,
    path: String,
    /// The plain file's, or the segments' (`segments::etag`).
    etag: String,
    size: u64,
    plain: bool,
    segments: bool,
}

/// When the loops stop (on shutdown), the resident index is saved for the
/// next start, and its live feed, which they started, stops with them.
struct StopsFeed(Arc<Memory>);

impl Drop for StopsFeed {
    fn drop(&mut self) {
        let resident = self.0.index.resident();
        if let Some(path) = &self.0.settings.snapshot
            && let Err(err) = resident.save(path)
        {
            tracing::warn!(error = %err, "saving the memory search index snapshot failed");
        }
        resident.unload();
    }
}
