//! The memory index in SurrealDB: one `memory_chunk` row per chunk (its text,
//! lines and embedding), one `memory_file` row per indexed file (its checksum
//! and change token, to detect edits made outside Onyx), the `embedding_cache`
//! (vectors by content hash, so unchanged text is never re-embedded) and the
//! fingerprint of how the index was built (`onyx_meta:memory`). Chunk ids
//! derive from their content, so rewriting a file writes only the chunks that
//! changed; every change gives the file a new `version` (what a restarted
//! replica compares with its snapshot) and is applied to the resident index
//! once committed.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use std::collections::HashMap;
use std::sync::Arc;

use super::chunker::{Chunk, content_hash};
use super::paths::{FileKind, daily_date};
use super::resident::{Change, FilePatch, Resident, ResidentChunk, StoredVector};
use crate::storage::{Db, DbError};

/// One chunk as stored.
#[derive(Debug, Clone, Serialize)]
pub struct ChunkRow {
    /// The record key, derived from the agent, path, content and which
    /// occurrence of that content in the file it is: unchanged chunks keep it.
    pub id: String,
    pub agent: String,
    pub path: String,
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub day: Option<String>,
    pub start_line: usize,
    pub end_line: usize,
    pub heading: String,
    pub text: String,
    /// What the full-text index sees: heading context and text.
    pub body: String,
    pub hash: String,
    pub pending: bool,
    /// Absent (not null) while pending: the HNSW index only takes vectors.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embedding: Option<Vec<f32>>,
}

impl ChunkRow {
    /// A file's chunks as rows, in order.
    pub fn for_file(agent: &str, path: &str, kind: FileKind, chunks: Vec<Chunk>) -> Vec<Self> {
        let mut seen: HashMap<String, usize> = HashMap::new();
        chunks
            .into_iter()
            .map(|chunk| {
                let occurrence = seen.entry(chunk.hash.clone()).or_default();
                let row = Self::new(agent, path, kind, chunk, *occurrence);
                *occurrence += 1;
                row
            })
            .collect()
    }

    /// The `occurrence`th chunk with this content in the file (0 for the first).
    pub fn new(agent: &str, path: &str, kind: FileKind, chunk: Chunk, occurrence: usize) -> Self {
        let key = content_hash(&format!("{agent}\n{path}\n{}\n{occurrence}", chunk.hash));
        Self {
            id: key[..32].to_string(),
            agent: agent.into(),
            path: path.into(),
            kind: kind.as_str(),
            day: (kind == FileKind::Daily)
                .then(|| daily_date(path).map(String::from))
                .flatten(),
            start_line: chunk.start_line,
            end_line: chunk.end_line,
            body: chunk.indexed_text(),
            heading: chunk.heading,
            text: chunk.text,
            hash: chunk.hash,
            pending: true,
            embedding: None,
        }
    }

    fn resident(&self) -> ResidentChunk {
        ResidentChunk {
            id: self.id.clone(),
            agent: self.agent.clone(),
            path: self.path.clone(),
            kind: self.kind.to_string(),
            day: self.day.clone(),
            start_line: self.start_line,
            end_line: self.end_line,
            heading: self.heading.clone(),
            text: self.text.clone(),
            embedding: self.embedding.clone(),
            rev: 0,
        }
    }
}

/// What the index remembers about a file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileRow {
    pub agent: String,
    pub path: String,
    /// SHA-256 of the content.
    pub checksum: String,
    /// The object store's cheap change token (ETag, or mtime and size).
    pub etag: String,
    pub size: u64,
    pub chunks: usize,
    /// New on every change to the file's chunks (set by `Index`).
    #[serde(default)]
    pub version: String,
}

/// How the index was built; a change means rebuilding.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// `chunker v1, 400/80 tokens`.
    pub chunking: Option<String>,
    /// `ollama nomic-embed-text 768d`, or `none`.
    pub embedding: Option<String>,
    pub dimensions: Option<usize>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct PendingChunk {
    pub id: String,
    pub body: String,
    pub hash: String,
}

#[derive(Clone)]
pub struct Index {
    db: Db,
    resident: Arc<Resident>,
}

/// What rewriting a file changes in its chunks, against its `version`.
#[derive(Debug, Default)]
pub struct FilePlan {
    /// The file's version the plan was made against (empty: no file row).
    version: String,
    /// Chunks not stored yet: the only ones to embed and write.
    pub new: Vec<ChunkRow>,
    /// Stored chunks whose lines moved: (id, start, end).
    moved: Vec<(String, usize, usize)>,
    removed: Vec<String>,
    /// Chunks in the new content.
    pub total: usize,
}

/// A stored chunk's id and lines, to plan a rewrite against.
#[derive(Deserialize)]
struct Stored {
    id: String,
    start_line: usize,
    end_line: usize,
}

#[derive(Deserialize)]
struct VersionRow {
    #[serde(default)]
    version: Option<String>,
}

/// A SurrealDB error raised on purpose when a file changed since its plan.
const FILE_MOVED_ON: &str = "memory file moved on";

#[derive(Deserialize)]
struct Count {
    count: usize,
}

#[derive(Deserialize)]
struct Cached {
    key: String,
    vector: Vec<f32>,
}

impl Index {
    pub fn new(db: Db) -> Self {
        Self {
            db,
            resident: Arc::default(),
        }
    }

    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The in-process search index (see `resident`).
    pub fn resident(&self) -> &Arc<Resident> {
        &self.resident
    }

    pub async fn fingerprint(&self) -> Result<Fingerprint, DbError> {
        let rows: Vec<Fingerprint> = self
            .db
            .rows(
                "SELECT chunking, embedding, dimensions FROM onyx_meta:memory",
                json!({}),
                0,
            )
            .await?;
        Ok(rows.into_iter().next().unwrap_or_default())
    }

    pub async fn set_fingerprint(&self, fingerprint: &Fingerprint) -> Result<(), DbError> {
        self.db
            .execute_retrying("UPSERT onyx_meta:memory CONTENT $fp", json!({"fp": fingerprint}))
            .await?;
        Ok(())
    }

    /// Drops every vector; chunks become pending until re-embedded.
    pub async fn reset_vectors(&self) -> Result<(), DbError> {
        let version = new_version();
        self.db
            .execute_retrying(
                "BEGIN TRANSACTION;
                 UPDATE memory_chunk SET embedding = NONE, pending = true, rev = (rev ?? 0) + 1;
                 UPDATE memory_file SET version = $version;
                 DELETE embedding_cache;
                 COMMIT TRANSACTION;",
                json!({"version": version}),
            )
            .await?;
        self.resident.apply(Change::DropVectors { version });
        Ok(())
    }

    /// What writing `rows` as a file's chunks changes: only new content is
    /// written (and embedded), moved chunks get their new lines.
    pub async fn plan_file(&self, agent: &str, path: &str, rows: Vec<ChunkRow>) -> Result<FilePlan, DbError> {
        let mut response = self
            .db
            .execute(
                "SELECT version FROM type::record('memory_file', $key);
                 SELECT record::id(id) AS id, start_line, end_line FROM memory_chunk
                     WHERE agent = $agent AND path = $path;",
                json!({"key": file_key(agent, path), "agent": agent, "path": path}),
            )
            .await?;
        let version: Vec<VersionRow> = Db::take_rows(&mut response, 0)?;
        let stored: Vec<Stored> = Db::take_rows(&mut response, 1)?;
        let mut stored: HashMap<String, (usize, usize)> = stored
            .into_iter()
            .map(|s| (s.id, (s.start_line, s.end_line)))
            .collect();
        let mut plan = FilePlan {
            version: version
                .into_iter()
                .next()
                .and_then(|v| v.version)
                .unwrap_or_default(),
            total: rows.len(),
            ..FilePlan::default()
        };
        for row in rows {
            match stored.remove(&row.id) {
                None => plan.new.push(row),
                Some(lines) if lines != (row.start_line, row.end_line) => {
                    plan.moved.push((row.id, row.start_line, row.end_line));
                }
                Some(_) => {}
            }
        }
        plan.removed = stored.into_keys().collect();
        Ok(plan)
    }

    /// Writes a plan and the file row in one transaction; `Ok(false)` when
    /// the file changed since the plan was made (plan again).
    pub async fn apply_plan(&self, file: &FileRow, plan: FilePlan) -> Result<bool, DbError> {
        let version = new_version();
        let moved: Vec<Value> = plan
            .moved
            .iter()
            .map(|(id, start, end)| json!({"id": id, "start": start, "end": end}))
            .collect();
        let result = self
            .db
            .execute_retrying(
                &format!(
                    "BEGIN TRANSACTION;
                     IF ((SELECT VALUE version FROM type::record('memory_file', $key))[0] ?? '') != $expected
                         {{ THROW '{FILE_MOVED_ON}' }};
                     FOR $id IN $removed {{ DELETE type::record('memory_chunk', $id) }};
                     FOR $m IN $moved {{
                         UPDATE type::record('memory_chunk', $m.id) SET start_line = $m.start, end_line = $m.end
                     }};
                     IF array::len($rows) > 0 {{ INSERT INTO memory_chunk $rows }};
                     UPSERT type::record('memory_file', $key) CONTENT $file;
                     COMMIT TRANSACTION;"
                ),
                json!({
                    "key": file_key(&file.agent, &file.path),
                    "expected": plan.version,
                    "removed": plan.removed,
                    "moved": moved,
                    "rows": plan.new,
                    "file": FileRow { version: version.clone(), ..file.clone() },
                }),
            )
            .await;
        match result {
            Err(DbError::Surreal(message)) if message.contains(FILE_MOVED_ON) => return Ok(false),
            other => other?,
        };
        self.resident.apply(Change::PatchFile(FilePatch {
            agent: file.agent.clone(),
            path: file.path.clone(),
            version,
            removed: plan.removed,
            moved: plan.moved,
            added: plan.new.iter().map(ChunkRow::resident).collect(),
        }));
        Ok(true)
    }

    /// Adds chunks to a file whose other chunks stay as they are (a daily
    /// log's new segment), updating its row; the file's chunk count after.
    pub async fn append_chunks(&self, file: &FileRow, rows: Vec<ChunkRow>) -> Result<usize, DbError> {
        let version = new_version();
        let mut response = self
            .db
            .execute_retrying(
                "BEGIN TRANSACTION;
                 INSERT INTO memory_chunk $rows;
                 UPSERT type::record('memory_file', $key) SET agent = $agent, path = $path,
                     checksum = $checksum, etag = $etag, size = $size,
                     chunks = (chunks ?? 0) + $added, version = $version RETURN VALUE chunks;
                 COMMIT TRANSACTION;",
                json!({
                    "key": file_key(&file.agent, &file.path),
                    "agent": file.agent,
                    "path": file.path,
                    "checksum": file.checksum,
                    "etag": file.etag,
                    "size": file.size,
                    "added": rows.len(),
                    "version": version,
                    "rows": rows,
                }),
            )
            .await?;
        // Results: BEGIN, INSERT, UPSERT.
        let chunks: Vec<usize> = Db::take_rows(&mut response, 2)?;
        self.resident.apply(Change::PatchFile(FilePatch {
            agent: file.agent.clone(),
            path: file.path.clone(),
            version,
            removed: Vec::new(),
            moved: Vec::new(),
            added: rows.iter().map(ChunkRow::resident).collect(),
        }));
        Ok(chunks.first().copied().unwrap_or_default())
    }

    /// Makes `rows` a file's chunks (planning again while other writers
    /// move the file on); for callers that attach vectors beforehand.
    pub async fn replace_file(&self, file: &FileRow, rows: &[ChunkRow]) -> Result<(), DbError> {
        loop {
            let plan = self.plan_file(&file.agent, &file.path, rows.to_vec()).await?;
            if self.apply_plan(file, plan).await? {
                return Ok(());
            }
        }
    }

    /// Records a new change token for a file whose content did not change.
    pub async fn touch_file(&self, agent: &str, path: &str, etag: &str) -> Result<(), DbError> {
        self.db
            .execute_retrying(
                "UPDATE type::record('memory_file', $key) SET etag = $etag",
                json!({"key": file_key(agent, path), "etag": etag}),
            )
            .await?;
        Ok(())
    }

    /// Moves a file's change token and size on from `from` to `to`, unless
    /// another writer moved it meanwhile; whether it moved it.
    pub async fn advance_file(
        &self,
        agent: &str,
        path: &str,
        from: &str,
        to: &str,
        size: u64,
    ) -> Result<bool, DbError> {
        let moved: Vec<String> = self
            .db
            .rows(
                "UPDATE type::record('memory_file', $key) SET etag = $to, size = $size WHERE etag = $from RETURN VALUE etag",
                json!({"key": file_key(agent, path), "from": from, "to": to, "size": size}),
                0,
            )
            .await?;
        Ok(!moved.is_empty())
    }

    /// Whether the resident index holds every chunk named (`None` while it loads).
    pub fn holds_all<'a>(&self, ids: impl Iterator<Item = &'a str>) -> Option<bool> {
        self.resident.holds_all(ids)
    }

    pub async fn remove_file(&self, agent: &str, path: &str) -> Result<(), DbError> {
        self.db
            .execute_retrying(
                "BEGIN TRANSACTION;
                 DELETE memory_chunk WHERE agent = $agent AND path = $path;
                 DELETE type::record('memory_file', $key);
                 COMMIT TRANSACTION;",
                json!({"agent": agent, "path": path, "key": file_key(agent, path)}),
            )
            .await?;
        self.resident.apply(Change::RemoveFile {
            agent: agent.into(),
            path: path.into(),
        });
        Ok(())
    }

    /// Forgets everything derived (files are untouched); used before a rebuild.
    pub async fn clear(&self) -> Result<(), DbError> {
        self.db
            .execute_retrying(
                "BEGIN TRANSACTION;
                 DELETE memory_chunk; DELETE memory_file;
                 COMMIT TRANSACTION;",
                json!({}),
            )
            .await?;
        self.resident.apply(Change::Clear);
        Ok(())
    }

    pub async fn files(&self) -> Result<Vec<FileRow>, DbError> {
        self.db
            .rows(
                "SELECT agent, path, checksum, etag, size, chunks FROM memory_file",
                json!({}),
                0,
            )
            .await
    }

    pub async fn file(&self, agent: &str, path: &str) -> Result<Option<FileRow>, DbError> {
        let rows: Vec<FileRow> = self
            .db
            .rows(
                "SELECT agent, path, checksum, etag, size, chunks FROM type::record('memory_file', $key)",
                json!({"key": file_key(agent, path)}),
                0,
            )
            .await?;
        Ok(rows.into_iter().next())
    }

    pub async fn pending(&self, limit: usize) -> Result<Vec<PendingChunk>, DbError> {
        self.db
            .rows(
                "SELECT record::id(id) AS id, body, hash FROM memory_chunk WHERE pending = true LIMIT $limit",
                json!({"limit": limit}),
                0,
            )
            .await
    }

    pub async fn count(&self, pending_only: bool) -> Result<usize, DbError> {
        let sql = if pending_only {
            "SELECT count() AS count FROM memory_chunk WHERE pending = true GROUP ALL"
        } else {
            "SELECT count() AS count FROM memory_chunk GROUP ALL"
        };
        let rows: Vec<Count> = self.db.rows(sql, json!({}), 0).await?;
        Ok(rows.first().map_or(0, |r| r.count))
    }

    /// Stores vectors for pending chunks (rows replaced meanwhile are
    /// skipped); their files get a new version.
    pub async fn set_vectors(&self, updates: &[(String, Vec<f32>)]) -> Result<(), DbError> {
        #[derive(Deserialize)]
        struct Stored {
            id: String,
            rev: u64,
        }
        let version = new_version();
        let rows: Vec<Value> = updates
            .iter()
            .map(|(id, vector)| json!({"id": id, "embedding": vector}))
            .collect();
        // Each row updated once, returning its new count (rows replaced
        // meanwhile return nothing); then each file touched gets one new version.
        let mut response = self
            .db
            .execute_retrying(
                "BEGIN TRANSACTION;
                 LET $stored = array::flatten(array::map($rows, |$row|
                     UPDATE type::record('memory_chunk', $row.id)
                         SET embedding = $row.embedding, pending = false, rev = (rev ?? 0) + 1
                         RETURN record::id(id) AS id, agent, path, rev));
                 FOR $file IN array::distinct(array::map($stored, |$chunk| $chunk.agent + '/' + $chunk.path)) {
                     UPDATE type::record('memory_file', $file) SET version = $version;
                 };
                 RETURN $stored;
                 COMMIT TRANSACTION;",
                json!({"rows": rows, "version": version}),
            )
            .await?;
        // Results: BEGIN, LET, FOR, RETURN.
        let stored: Vec<Stored> = Db::take_rows(&mut response, 3)?;
        let mut vectors: HashMap<&str, &Vec<f32>> = updates.iter().map(|(id, v)| (id.as_str(), v)).collect();
        let vectors = stored
            .into_iter()
            .filter_map(|Stored { id, rev }| {
                let vector = vectors.remove(id.as_str())?.clone();
                Some(StoredVector { id, vector, rev })
            })
            .collect();
        self.resident.apply(Change::SetVectors { vectors, version });
        Ok(())
    }

    /// Cached vectors for these content hashes under this embedding fingerprint.
    pub async fn cached_vectors(
        &self,
        embedding: &str,
        hashes: &[String],
    ) -> Result<std::collections::HashMap<String, Vec<f32>>, DbError> {
        let keys: Vec<String> = hashes.iter().map(|h| cache_key(embedding, h)).collect();
        let rows: Vec<Cached> = self
            .db
            .rows(
                "SELECT key, vector FROM embedding_cache WHERE key IN $keys",
                json!({"keys": keys}),
                0,
            )
            .await?;
        let by_key: std::collections::HashMap<String, Vec<f32>> =
            rows.into_iter().map(|r| (r.key, r.vector)).collect();
        Ok(hashes
            .iter()
            .filter_map(|h| {
                by_key
                    .get(&cache_key(embedding, h))
                    .map(|v| (h.clone(), v.clone()))
            })
            .collect())
    }

    pub async fn cache_vectors(
        &self,
        embedding: &str,
        entries: &[(String, Vec<f32>)],
    ) -> Result<(), DbError> {
        let rows: Vec<Value> = entries
            .iter()
            .map(|(hash, vector)| json!({"key": cache_key(embedding, hash), "vector": vector}))
            .collect();
        self.db
            .execute_retrying(
                "FOR $row IN $rows { UPSERT type::record('embedding_cache', $row.key) SET key = $row.key, vector = $row.vector };",
                json!({"rows": rows}),
            )
            .await?;
        Ok(())
    }
}

/// A file of one-line chunks with these texts and vectors, for tests.
#[cfg(test)]
pub(crate) fn test_file(
    agent: &str,
    path: &str,
    chunks: &[(&str, Option<Vec<f32>>)],
) -> (FileRow, Vec<ChunkRow>) {
    let rows: Vec<ChunkRow> = chunks
        .iter()
        .enumerate()
        .map(|(i, (text, vector))| {
            let mut row = ChunkRow::new(
                agent,
                path,
                FileKind::Curated,
                Chunk {
                    start_line: i + 1,
                    end_line: i + 1,
                    heading: String::new(),
                    hash: content_hash(text),
                    text: (*text).into(),
                },
                0,
            );
            row.pending = vector.is_none();
            row.embedding = vector.clone();
            row
        })
        .collect();
    let file = FileRow {
        agent: agent.into(),
        path: path.into(),
        checksum: String::new(),
        etag: String::new(),
        size: 0,
        chunks: rows.len(),
        version: String::new(),
    };
    (file, rows)
}

/// A file's new version: any value another write could not have chosen.
fn new_version() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

fn file_key(agent: &str, path: &str) -> String {
    format!("{agent}/{path}")
}

fn cache_key(embedding: &str, hash: &str) -> String {
    content_hash(&format!("{embedding}\n{hash}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::chunker::{self, ChunkParams};

    fn rows(content: &str) -> (FileRow, Vec<ChunkRow>) {
        let params = ChunkParams {
            target_tokens: 12,
            overlap_tokens: 0,
        };
        let rows = ChunkRow::for_file(
            "main",
            "MEMORY.md",
            FileKind::Curated,
            chunker::chunk(content, params),
        );
        let file = FileRow {
            agent: "main".into(),
            path: "MEMORY.md".into(),
            checksum: content_hash(content),
            etag: String::new(),
            size: content.len() as u64,
            chunks: rows.len(),
            version: String::new(),
        };
        (file, rows)
    }

    async fn stored(index: &Index) -> Vec<(String, usize, String)> {
        let mut rows: Vec<(String, usize, String)> = index
            .db()
            .rows::<serde_json::Value>(
                "SELECT record::id(id) AS id, start_line, text FROM memory_chunk",
                json!({}),
                0,
            )
            .await
            .unwrap()
            .into_iter()
            .map(|r| {
                (
                    r["id"].as_str().unwrap().to_string(),
                    r["start_line"].as_u64().unwrap() as usize,
                    r["text"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        rows.sort_by_key(|r| r.1);
        rows
    }

    const FIRST: &str = "# Memory\n\nThe deploy key lives in the vault under ops.\n\n\
                         Lunch is at noon on weekdays in the canteen.\n\n\
                         The dog Rex needs his vaccination in March.\n";

    #[tokio::test]
    async fn rewriting_a_file_writes_only_the_chunks_that_changed() {
        let index = Index::new(Db::scratch().await);
        let (file, first) = rows(FIRST);
        assert!(first.len() >= 3, "{first:?}");
        index.replace_file(&file, &first).await.unwrap();
        let before = stored(&index).await;

        // The same content again: nothing to write.
        let plan = index.plan_file("main", "MEMORY.md", first.clone()).await.unwrap();
        assert!(plan.new.is_empty() && plan.moved.is_empty() && plan.removed.is_empty());

        // A paragraph added in the middle, one changed: the rest keep their
        // ids (and their vectors); the one below the new paragraph moves down.
        let second = FIRST
            .replace("ops.\n\n", "ops.\n\nA new note about the garden.\n\n")
            .replace("in March", "in April");
        let (file, rows) = rows(&second);
        let plan = index.plan_file("main", "MEMORY.md", rows.clone()).await.unwrap();
        assert_eq!(plan.new.len(), 2, "{:?}", plan.new);
        assert_eq!(plan.removed.len(), 1, "{rows:?}");
        assert_eq!(plan.moved.len(), 1, "{:?}", plan.moved);
        assert!(index.apply_plan(&file, plan).await.unwrap());
        let after = stored(&index).await;
        assert_eq!(after.len(), rows.len());
        let kept: Vec<&(String, usize, String)> = after
            .iter()
            .filter(|a| before.iter().any(|b| b.0 == a.0))
            .collect();
        assert_eq!(kept.len(), rows.len() - 2);
        let lunch = |rows: &[(String, usize, String)]| {
            rows.iter().find(|r| r.2.starts_with("Lunch")).cloned().unwrap()
        };
        assert_eq!(lunch(&after).0, lunch(&before).0, "same chunk");
        assert_eq!(lunch(&after).1, lunch(&before).1 + 2, "moved down two lines");
        assert!(after.iter().any(|a| a.2.contains("April")));
        assert!(!after.iter().any(|a| a.2.contains("March")));
    }

    #[tokio::test]
    async fn a_plan_made_before_another_write_is_refused() {
        let index = Index::new(Db::scratch().await);
        let (file, first) = rows(FIRST);
        index.replace_file(&file, &first).await.unwrap();
        let (_, mine) = rows(&FIRST.replace("noon", "one"));
        let stale = index.plan_file("main", "MEMORY.md", mine).await.unwrap();
        let (_, theirs) = rows(&FIRST.replace("noon", "two"));
        index.replace_file(&file, &theirs).await.unwrap();
        assert!(
            !index.apply_plan(&file, stale).await.unwrap(),
            "the file moved on"
        );
        let texts: Vec<String> = stored(&index).await.into_iter().map(|r| r.2).collect();
        assert!(texts.iter().any(|t| t.contains("at two")), "{texts:?}");
        assert!(!texts.iter().any(|t| t.contains("at one")), "{texts:?}");
    }

    /// The rows as the live feed shows them now (what a late echo carries).
    async fn rows_now(index: &Index) -> Vec<ResidentChunk> {
        index
            .db()
            .rows(
                &format!(
                    "SELECT {} FROM memory_chunk",
                    super::super::resident::CHUNK_FIELDS
                ),
                json!({}),
                0,
            )
            .await
            .unwrap()
    }

    /// How many chunks the resident index's vector leg finds.
    fn with_vectors(index: &Index) -> usize {
        let query = super::super::resident::Query {
            agents: &["main"],
            hidden: &[],
            vector: Some(&[1.0, 0.0]),
            words: None,
            k: 50,
        };
        index.resident().search(&query).unwrap().vector.len()
    }

    #[tokio::test]
    async fn late_echoes_of_this_replicas_writes_do_not_undo_its_vectors() {
        let index = Index::new(Db::scratch().await);
        super::super::resident::load(index.db(), index.resident(), None)
            .await
            .unwrap();
        let (file, rows) = rows(FIRST);
        index.replace_file(&file, &rows).await.unwrap();
        let created = rows_now(&index).await;
        assert!(created.iter().all(|c| c.embedding.is_none() && c.rev == 0));

        let vectors: Vec<(String, Vec<f32>)> = rows.iter().map(|r| (r.id.clone(), vec![1.0, 0.0])).collect();
        let version = async || -> Vec<Value> {
            let sql = "SELECT VALUE version FROM memory_file:⟨main/MEMORY.md⟩";
            index.db().rows(sql, json!({}), 0).await.unwrap()
        };
        let before = version().await;
        index.set_vectors(&vectors).await.unwrap();
        let after = version().await;
        assert_ne!(after, before, "the file's version moves with its vectors");
        let embedded = rows_now(&index).await;
        assert!(
            embedded.iter().all(|c| c.embedding.is_some() && c.rev == 1),
            "{embedded:?}"
        );
        assert_eq!(with_vectors(&index), rows.len());
        // The feed's notice of the rows' creation, arriving after the vectors.
        for chunk in created {
            index.resident().apply(Change::Upsert(chunk));
        }
        assert_eq!(with_vectors(&index), rows.len(), "a late echo dropped vectors");

        // Dropped (the embedder changed), then the echo of the vectors arrives.
        index.reset_vectors().await.unwrap();
        assert!(
            rows_now(&index)
                .await
                .iter()
                .all(|c| c.embedding.is_none() && c.rev == 2)
        );
        for chunk in embedded {
            index.resident().apply(Change::Upsert(chunk));
        }
        assert_eq!(with_vectors(&index), 0, "a late echo brought old vectors back");

        // Another replica's write (a higher count) is taken.
        let mut theirs = rows_now(&index).await;
        for chunk in &mut theirs {
            chunk.embedding = Some(vec![1.0, 0.0]);
            chunk.rev = 3;
        }
        for chunk in theirs {
            index.resident().apply(Change::Upsert(chunk));
        }
        assert_eq!(with_vectors(&index), rows.len());
    }
}
