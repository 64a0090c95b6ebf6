//! `Memory`: the files API (list, read, write, delete, append a note) over the
//! object store, indexing every write before it returns, and search. Writes to
//! one file are serialised per file; appends use conditional writes so two
//! replicas appending to the same daily log both land.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde::Serialize;

use super::access::{self, Access};
use super::chunker::{self, ChunkParams, content_hash};
use super::embedder::{EmbedError, Embedder};
use super::fusion::Ranking;
use super::index::{ChunkRow, FileRow, Index};
use super::paths::{self, PathError, SHARED};
use super::search::{self, Hit, Legs, Mode};
use super::segments::{self, SegmentCache};
use super::state::{EmbedderState, MemoryProgress};
use crate::storage::{Bucket, Db, DbError, ObjectStore, PutCondition, StoreError, Version};

/// How long a write or search waits for the embedder before carrying on without it.
const EMBED_WAIT: Duration = Duration::from_secs(20);
/// How long a search waits for the search index to load (a second or two
/// from a snapshot) before answering that it is still loading.
const LOAD_WAIT: Duration = Duration::from_secs(20);
/// Each lost race means another writer's append landed, so this bounds how
/// many simultaneous writers one append can outlast.
const APPEND_ATTEMPTS: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error(transparent)]
    Path(#[from] PathError),
    #[error("no memory file {agent}/{path}")]
    NotFound { agent: String, path: String },
    #[error("{agent}/{path} changed since it was read (If-Match did not hold)")]
    Conflict { agent: String, path: String },
    /// The request is wrong in the field `param`.
    #[error("{param}: {message}")]
    Invalid { param: &'static str, message: String },
    /// The embedder failed or is not configured.
    #[error("the embedder is unavailable")]
    EmbedderUnavailable(#[source] EmbedError),
    #[error("the embedder did not answer in time")]
    EmbedderTimeout(#[source] EmbedError),
    #[error("the memory search index is still loading; try again in a few seconds")]
    IndexLoading,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Db(#[from] DbError),
}

pub struct Settings {
    pub chunking: ChunkParams,
    pub ranking: Ranking,
    pub sync_interval: Duration,
    /// Where this replica saves its search index for the next start (`None`:
    /// it reads the whole index from SurrealDB at every start).
    pub snapshot: Option<std::path::PathBuf>,
    /// The memory this replica's resident search index may hold; `/health`
    /// says how full it is.
    pub resident_budget_bytes: u64,
    /// Reorders the fused hits, when configured.
    pub reranker: Option<Arc<super::rerank::Reranker>>,
}

pub struct Memory {
    pub(super) objects: Arc<dyn ObjectStore>,
    pub(super) index: Index,
    pub(super) embedder: Option<Arc<dyn Embedder>>,
    pub(super) state: EmbedderState,
    pub(super) settings: Settings,
    pub(super) progress: MemoryProgress,
    /// The embedder's input limit in tokens, once known (0 until then).
    pub(super) input_tokens: std::sync::atomic::AtomicUsize,
    locks: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// What this replica knows of daily logs kept as segments (`daily_log`).
    pub(super) segments: SegmentCache,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct FileInfo {
    pub agent: String,
    pub path: String,
    pub size: u64,
    /// Whether search covers it (MEMORY.md, USER.md, memory/…, _shared/…).
    pub indexed: bool,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct FileContent {
    pub agent: String,
    pub path: String,
    pub content: String,
    pub etag: String,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct WriteOutcome {
    pub agent: String,
    pub path: String,
    pub size: usize,
    pub etag: String,
    /// Chunks now in the index for this file.
    pub chunks: usize,
    /// Of those, how many wait for the embedder.
    pub pending: usize,
}

/// Where `POST /v1/memory` puts a note.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoteTarget {
    /// Today's `memory/YYYY-MM-DD.md`, today and the time of day in this
    /// timezone (the agent's).
    Daily(chrono_tz::Tz),
    /// `MEMORY.md`.
    Curated,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct SearchResults {
    pub object: &'static str,
    /// The mode that actually ran (`text` when the embedder is unavailable).
    pub mode: Mode,
    pub requested_mode: Mode,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub note: Option<String>,
    pub data: Vec<Hit>,
}

impl Memory {
    pub fn new(
        objects: Arc<dyn ObjectStore>,
        db: Db,
        embedder: Option<Arc<dyn Embedder>>,
        settings: Settings,
    ) -> Arc<Self> {
        Arc::new(Self {
            objects,
            index: Index::new(db),
            state: EmbedderState::new(embedder.is_some()),
            embedder,
            settings,
            progress: MemoryProgress::default(),
            input_tokens: std::sync::atomic::AtomicUsize::new(0),
            locks: std::sync::Mutex::new(HashMap::new()),
            segments: SegmentCache::default(),
        })
    }

    pub(super) fn lock_for(&self, agent: &str, path: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = match self.locks.lock() {
            Ok(l) => l,
            Err(poisoned) => poisoned.into_inner(),
        };
        if locks.len() > 10_000 {
            locks.retain(|_, lock| Arc::strong_count(lock) > 1);
        }
        locks.entry(format!("{agent}/{path}")).or_default().clone()
    }

    /// An agent's files, then the shared ones (without the projects the agent
    /// may not read), each sorted by path.
    pub async fn list_files(&self, agent: &str) -> Result<Vec<FileInfo>, MemoryError> {
        let agent = paths::agent(agent)?;
        let hidden = self.hidden_projects(agent).await?;
        let mut owners = vec![agent];
        if agent != SHARED {
            owners.push(SHARED);
        }
        let mut out = Vec::new();
        for owner in owners {
            let first = out.len();
            let mut listed = self.objects.list(Bucket::Memory, &format!("{owner}/")).await?;
            listed.extend(
                self.objects
                    .list(Bucket::Memory, &segments::agent_prefix(owner))
                    .await?,
            );
            for object in &listed {
                if let Some((owner, path)) = paths::split_key(&object.key) {
                    out.push(FileInfo {
                        indexed: paths::indexed_kind(owner, path).is_some(),
                        agent: owner.into(),
                        path: path.into(),
                        size: object.size,
                    });
                }
            }
            for ((owner, path), log) in segments::group(&listed) {
                if !out[first..].iter().any(|f| f.path == path) {
                    out.push(FileInfo {
                        indexed: true,
                        agent: owner.into(),
                        path: path.into(),
                        size: log.bytes,
                    });
                }
            }
            out[first..].sort_by(|a, b| a.path.cmp(&b.path));
        }
        out.retain(|file| {
            file.agent != SHARED || !hidden.iter().any(|folder| file.path.starts_with(folder.as_str()))
        });
        Ok(out)
    }

    pub async fn read_file(&self, agent: &str, path: &str) -> Result<FileContent, MemoryError> {
        let (agent, path) = (paths::agent(agent)?, paths::file(path)?);
        let key = paths::object_key(agent, path)?;
        if let Some(object) = self.objects.get(Bucket::Memory, &key).await? {
            return Ok(FileContent {
                agent: agent.into(),
                path: path.into(),
                content: String::from_utf8_lossy(&object.body).into_owned(),
                etag: object.version.0,
            });
        }
        let segmented = match paths::daily_date(path) {
            Some(_) => self.read_segmented(agent, path).await?,
            None => None,
        };
        let log = segmented.ok_or_else(|| not_found(agent, path))?;
        Ok(FileContent {
            agent: agent.into(),
            path: path.into(),
            content: log.content,
            etag: log.etag,
        })
    }

    /// Writes a whole file (only if still at `if_match`, when given) and indexes it.
    pub async fn write_file(
        &self,
        agent: &str,
        path: &str,
        content: String,
        if_match: Option<String>,
    ) -> Result<WriteOutcome, MemoryError> {
        let (agent, path) = (paths::agent(agent)?, paths::file(path)?);
        if agent == SHARED && access::is_access_file(path) {
            Access::parse(&content).map_err(|message| MemoryError::Invalid {
                param: "content",
                message,
            })?;
        }
        let key = paths::object_key(agent, path)?;
        let lock = self.lock_for(agent, path);
        let _guard = lock.lock().await;
        // A daily log kept as segments becomes a plain file with this content.
        let replaced = match paths::daily_date(path) {
            Some(_) => self.segment_seqs(agent, path).await?,
            None => Vec::new(),
        };
        let seen = replaced.last().map(|seq| segments::etag(*seq));
        let condition = match (if_match, seen) {
            (Some(etag), Some(seen)) if etag == seen => PutCondition::IfAbsent,
            (Some(etag), _) if etag.starts_with(segments::ETAG_PREFIX) => return Err(conflict(agent, path)),
            (Some(etag), _) => PutCondition::IfMatch(Version(etag)),
            (None, _) => PutCondition::Overwrite,
        };
        let version = match self
            .objects
            .put(Bucket::Memory, &key, Bytes::from(content.clone()), condition)
            .await
        {
            Err(StoreError::PreconditionFailed) => return Err(conflict(agent, path)),
            other => other?,
        };
        if !replaced.is_empty() {
            self.delete_segments(agent, path, &replaced).await?;
            // Notes appended on another replica since: they join the new content.
            if !self.segment_seqs(agent, path).await?.is_empty() {
                return self.fold_into_plain(agent, path).await;
            }
        }
        self.index_written(agent, path, content, version).await
    }

    pub async fn delete_file(&self, agent: &str, path: &str) -> Result<(), MemoryError> {
        let (agent, path) = (paths::agent(agent)?, paths::file(path)?);
        let key = paths::object_key(agent, path)?;
        let lock = self.lock_for(agent, path);
        let _guard = lock.lock().await;
        let plain = self.objects.get(Bucket::Memory, &key).await?.is_some();
        let seqs = match paths::daily_date(path) {
            Some(_) => self.segment_seqs(agent, path).await?,
            None => Vec::new(),
        };
        self.delete_segments(agent, path, &seqs).await?;
        if !plain && seqs.is_empty() {
            return Err(not_found(agent, path));
        }
        self.objects.delete(Bucket::Memory, &key).await?;
        self.index.remove_file(agent, path).await?;
        Ok(())
    }

    /// Appends a note to today's daily log or to MEMORY.md, then indexes it.
    pub async fn append_note(
        &self,
        agent: &str,
        target: NoteTarget,
        note: &str,
    ) -> Result<WriteOutcome, MemoryError> {
        self.append_note_at(agent, target, note, crate::clock::now())
            .await
    }

    /// [`Self::append_note`] as if it were `now` (the day and time of the line).
    pub async fn append_note_at(
        &self,
        agent: &str,
        target: NoteTarget,
        note: &str,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<WriteOutcome, MemoryError> {
        let agent = paths::agent(agent)?;
        let note = note.trim();
        if note.is_empty() {
            return Err(invalid("content", "the note is empty"));
        }
        let (path, header, line) = match target {
            NoteTarget::Daily(tz) => (
                paths::daily_path(&crate::clock::day_in(now, tz)),
                format!("# {}\n\n", crate::clock::day_in(now, tz)),
                format!("- {} {note}\n", crate::clock::hour_minute_in(now, tz)),
            ),
            NoteTarget::Curated => (
                paths::CURATED.to_string(),
                "# Memory\n\n".to_string(),
                format!("- {note}\n"),
            ),
        };
        let key = paths::object_key(agent, &path)?;
        let daily = matches!(target, NoteTarget::Daily(_));
        // A day this replica knows is kept as segments (every note after
        // its first) has the note embedded before the lock: notes to one
        // day then do not wait on each other's embedder call.
        let prepared = if daily && self.segments.tail(agent, &path).is_some() {
            Some(self.prepare_line(agent, &path, &line).await?)
        } else {
            None
        };
        let lock = self.lock_for(agent, &path);
        let _guard = lock.lock().await;
        if daily
            && let Some(outcome) = self
                .append_segment(agent, &path, &header, &line, prepared)
                .await?
        {
            return Ok(outcome);
        }
        for _ in 0..APPEND_ATTEMPTS {
            let current = self.objects.get(Bucket::Memory, &key).await?;
            let (mut content, condition) = match current {
                Some(object) => (
                    String::from_utf8_lossy(&object.body).into_owned(),
                    PutCondition::IfMatch(object.version),
                ),
                None => (header.clone(), PutCondition::IfAbsent),
            };
            if !content.is_empty() && !content.ends_with('\n') {
                content.push('\n');
            }
            content.push_str(&line);
            match self
                .objects
                .put(Bucket::Memory, &key, Bytes::from(content.clone()), condition)
                .await
            {
                // Another replica appended first: read again and retry, a
                // little later so the losers do not collide again in step.
                Err(StoreError::PreconditionFailed) => {
                    let jitter = u64::from(uuid::Uuid::now_v7().as_bytes()[15] % 10);
                    tokio::time::sleep(Duration::from_millis(jitter)).await;
                }
                Err(err) => return Err(err.into()),
                Ok(version) => return self.index_written(agent, &path, content, version).await,
            }
        }
        Err(conflict(agent, &path))
    }

    pub(super) async fn index_written(
        &self,
        agent: &str,
        path: &str,
        content: String,
        version: Version,
    ) -> Result<WriteOutcome, MemoryError> {
        let size = content.len();
        let (chunks, pending) = self.index_content(agent, path, &content, &version.0).await?;
        Ok(WriteOutcome {
            agent: agent.into(),
            path: path.into(),
            size,
            etag: version.0,
            chunks,
            pending,
        })
    }

    /// Chunks and indexes one file's content (the caller holds its lock).
    /// Returns (chunks, of which pending). Files that are not memory are skipped.
    pub(super) async fn index_content(
        &self,
        agent: &str,
        path: &str,
        content: &str,
        etag: &str,
    ) -> Result<(usize, usize), MemoryError> {
        let Some(kind) = paths::indexed_kind(agent, path) else {
            return Ok((0, 0));
        };
        let rows = ChunkRow::for_file(agent, path, kind, chunker::chunk(content, self.chunk_params()));
        let file = FileRow {
            agent: agent.into(),
            path: path.into(),
            checksum: content_hash(content),
            etag: etag.into(),
            size: content.len() as u64,
            chunks: rows.len(),
            version: String::new(),
        };
        loop {
            let mut plan = self.index.plan_file(agent, path, rows.clone()).await?;
            self.attach_vectors(&mut plan.new).await?;
            let pending = plan.new.iter().filter(|r| r.pending).count();
            let total = plan.total;
            if self.index.apply_plan(&file, plan).await? {
                return Ok((total, pending));
            }
        }
    }

    /// Fills vectors from the cache, then from the embedder if it is up;
    /// whatever is left stays pending for the background drain.
    pub(super) async fn attach_vectors(&self, rows: &mut [ChunkRow]) -> Result<(), MemoryError> {
        if self.embedder.is_none() {
            // Nothing will ever embed them; a configured embedder later re-embeds all.
            rows.iter_mut().for_each(|r| r.pending = false);
            return Ok(());
        }
        let Some(embedding) = self.state.ready_fingerprint() else {
            return Ok(());
        };
        let hashes: Vec<String> = rows.iter().map(|r| r.hash.clone()).collect();
        let cached = self.index.cached_vectors(&embedding, &hashes).await?;
        let mut missing: Vec<usize> = Vec::new();
        for (i, row) in rows.iter_mut().enumerate() {
            match cached.get(&row.hash) {
                Some(vector) => {
                    row.embedding = Some(vector.clone());
                    row.pending = false;
                }
                None => missing.push(i),
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        let texts: Vec<String> = missing.iter().map(|&i| rows[i].body.clone()).collect();
        match self.embed(&texts).await {
            Ok(vectors) => {
                let mut fresh = Vec::with_capacity(vectors.len());
                for (&i, vector) in missing.iter().zip(vectors) {
                    fresh.push((rows[i].hash.clone(), vector.clone()));
                    rows[i].embedding = Some(vector);
                    rows[i].pending = false;
                }
                self.index.cache_vectors(&embedding, &fresh).await?;
            }
            Err(err) => {
                tracing::warn!(error = %err, chunks = texts.len(), "embedder unavailable; chunks wait in the pending queue")
            }
        }
        Ok(())
    }

    /// How files are chunked: as configured, with chunks kept within the
    /// embedder's input limit once it is known.
    pub(super) fn chunk_params(&self) -> ChunkParams {
        let limit = self.input_tokens.load(std::sync::atomic::Ordering::Relaxed);
        self.settings.chunking.within(limit)
    }

    /// Embeds with the configured embedder, recording up/down.
    pub(super) async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let Some(embedder) = &self.embedder else {
            return Err(EmbedError::NotConfigured);
        };
        let result = match tokio::time::timeout(EMBED_WAIT, embedder.embed(texts)).await {
            Ok(result) => result,
            Err(_) => Err(EmbedError::Timeout(EMBED_WAIT)),
        };
        match &result {
            Ok(_) => self.state.mark_up(),
            Err(err) => self.state.mark_down(err.to_string()),
        }
        result
    }

    /// Hybrid, vector or text search over an agent's memory and `_shared`
    /// (without the shared projects the agent may not read).
    pub async fn search(
        &self,
        agent: &str,
        query: &str,
        limit: usize,
        requested: Mode,
    ) -> Result<SearchResults, MemoryError> {
        let today = crate::clock::day(crate::clock::now());
        self.search_on(agent, query, limit, requested, &today).await
    }

    /// [`Self::search`] as if today were `today` (`YYYY-MM-DD`: daily logs
    /// decay by their age on that day), for evaluations on dated datasets.
    pub async fn search_on(
        &self,
        agent: &str,
        query: &str,
        limit: usize,
        requested: Mode,
        today: &str,
    ) -> Result<SearchResults, MemoryError> {
        let agent = paths::agent(agent)?;
        let query = query.trim();
        if query.is_empty() {
            return Err(invalid("q", "the query is empty"));
        }
        let agents: Vec<&str> = if agent == SHARED {
            vec![SHARED]
        } else {
            vec![agent, SHARED]
        };
        let mut note = None;
        let vector = match (requested, self.state.ready_fingerprint()) {
            (Mode::Text, _) => None,
            (_, None) => {
                note = Some(self.state.unavailable_reason());
                None
            }
            (_, Some(_)) => match self.embed(&[query.to_string()]).await {
                Ok(mut vectors) => vectors.pop(),
                Err(err) => {
                    note = Some(format!(
                        "the embedder is unavailable ({err}); showing full-text results"
                    ));
                    None
                }
            },
        };
        let text = search::text_query(query);
        let run_text = requested != Mode::Vector || vector.is_none();
        let mode = match (&vector, run_text) {
            (Some(_), true) => Mode::Hybrid,
            (Some(_), false) => Mode::Vector,
            (None, _) => Mode::Text,
        };
        let hidden = self.hidden_projects(agent).await?;
        if !self.index.resident().wait_ready(LOAD_WAIT).await {
            return Err(MemoryError::IndexLoading);
        }
        let reranker = self.settings.reranker.as_deref();
        let depth = reranker.map_or(limit, |r| r.candidates().max(limit));
        // Milliseconds of CPU on a large index, under the index's read lock:
        // on the blocking pool, so a search (or a write waiting for one)
        // never holds up a runtime worker and the requests queued on it.
        let resident = Arc::clone(self.index.resident());
        let (ranking, today) = (self.settings.ranking, today.to_string());
        let agents: Vec<String> = agents.into_iter().map(String::from).collect();
        let text = (run_text && !text.is_empty()).then_some(text);
        let found = tokio::task::spawn_blocking(move || {
            let agents: Vec<&str> = agents.iter().map(String::as_str).collect();
            let legs = Legs {
                agents: &agents,
                hidden: &hidden,
                vector: vector.as_deref(),
                text: text.as_deref(),
                candidates: (limit * 3).max(20),
            };
            search::run(&resident, legs, ranking, depth, &today)
        })
        .await;
        // A search that panicked panics here, as it did inline; one the
        // shutting-down runtime cancelled is as if the index were not loaded.
        let found = found.unwrap_or_else(|err| match err.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(_) => None,
        });
        let mut data = found.ok_or(MemoryError::IndexLoading)?;
        if let Some(reranker) = reranker
            && let Err(err) = super::rerank::reorder(reranker, query, &mut data).await
        {
            tracing::warn!(error = %err, "reranking failed; showing the fused order");
            note = Some(format!(
                "the reranker is unavailable ({err}); showing the fused order"
            ));
        }
        data.truncate(limit);
        Ok(SearchResults {
            object: "list",
            mode,
            requested_mode: requested,
            note,
            data,
        })
    }
}

impl From<EmbedError> for MemoryError {
    fn from(err: EmbedError) -> Self {
        if err.is_timeout() {
            Self::EmbedderTimeout(err)
        } else {
            Self::EmbedderUnavailable(err)
        }
    }
}

fn invalid(param: &'static str, message: &str) -> MemoryError {
    MemoryError::Invalid {
        param,
        message: message.into(),
    }
}

fn not_found(agent: &str, path: &str) -> MemoryError {
    MemoryError::NotFound {
        agent: agent.into(),
        path: path.into(),
    }
}

fn conflict(agent: &str, path: &str) -> MemoryError {
    MemoryError::Conflict {
        agent: agent.into(),
        path: path.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::LocalStore;

    async fn memory(objects: Arc<dyn ObjectStore>, db: Db) -> Arc<Memory> {
        Memory::new(objects, db, None, Settings::default())
    }

    /// Two `Memory`s (as two replicas: no shared lock) append to one daily log
    /// at once; conditional writes make the losers re-read and retry.
    #[tokio::test]
    async fn simultaneous_appends_from_two_replicas_all_land() {
        let dir = tempfile::tempdir().unwrap();
        let objects: Arc<dyn ObjectStore> = Arc::new(LocalStore::new(dir.path()));
        objects.ensure_buckets().await.unwrap();
        let db = Db::scratch().await;
        let (a, b) = (
            memory(objects.clone(), db.clone()).await,
            memory(objects, db).await,
        );
        let appends = (0..24).map(|i| {
            let replica = if i % 2 == 0 { a.clone() } else { b.clone() };
            tokio::spawn(async move {
                replica
                    .append_note("main", NoteTarget::Daily(chrono_tz::UTC), &format!("note {i:02}"))
                    .await
            })
        });
        let mut path = String::new();
        for outcome in futures::future::join_all(appends).await {
            path = outcome.unwrap().unwrap().path;
        }
        let content = a.read_file("main", &path).await.unwrap().content;
        for i in 0..24 {
            assert_eq!(content.matches(&format!("note {i:02}")).count(), 1, "{content}");
        }
    }
}
