//! The memory index in SurrealDB: one `memory_chunk` row per chunk (its text,
//! lines and embedding), one `memory_file` row per indexed file (its checksum
//! and change token, to detect edits made outside Onyx), the `embedding_cache`
//! (vectors by content hash, so unchanged text is never re-embedded) and the
//! fingerprint of how the index was built (`onyx_meta:memory`). Every write
//! also queues its file for SurrealDB's search indexes (`surreal_search`) and
//! is applied to the resident index once committed.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use std::sync::Arc;

use tokio::sync::watch;

use super::chunker::{Chunk, content_hash};
use super::paths::{FileKind, daily_date};
use super::resident::{Change, Resident, ResidentChunk};
use crate::storage::{Db, DbError};

/// One chunk as stored.
#[derive(Debug, Clone, Serialize)]
pub struct ChunkRow {
    /// The record key, chosen here so the resident index knows it without
    /// reading the row back.
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
    pub fn new(agent: &str, path: &str, kind: FileKind, chunk: Chunk) -> Self {
        Self {
            id: uuid::Uuid::new_v4().simple().to_string(),
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
    /// How many writes this replica has committed: `surreal_search` wakes on
    /// a change and waits for it to stop changing.
    writes: Arc<watch::Sender<u64>>,
}

/// Queues the file named by the SurrealQL expressions `agent` and `path` for
/// SurrealDB's search indexes; a new version tells a catch-up already under
/// way that it must come back.
fn queue_file(agent: &str, path: &str) -> String {
    format!(
        "UPSERT type::record('memory_search_queue', {agent} + '/' + {path}) \
         SET agent = {agent}, path = {path}, version = <string> rand::uuid();"
    )
}

/// The HNSW index on `memory_search` for vectors of `dimensions`.
fn vector_index(dimensions: usize, if_not_exists: bool) -> String {
    let guard = if if_not_exists { "IF NOT EXISTS " } else { "" };
    format!(
        "DEFINE INDEX {guard}memory_search_embedding ON memory_search FIELDS embedding \
         HNSW DIMENSION {dimensions} DIST COSINE TYPE F32 EFC 150 M 12;"
    )
}

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
            writes: Arc::new(watch::Sender::new(0)),
        }
    }

    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The in-process search index (see `resident`).
    pub fn resident(&self) -> &Arc<Resident> {
        &self.resident
    }

    /// Follows how many writes this replica has committed.
    pub(super) fn writes(&self) -> watch::Receiver<u64> {
        self.writes.subscribe()
    }

    fn file_written(&self) {
        self.writes.send_modify(|count| *count += 1);
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

    /// Drops every vector and (re)creates the HNSW index for `dimensions`;
    /// chunks become pending until re-embedded.
    pub async fn reset_vectors(&self, dimensions: Option<usize>) -> Result<(), DbError> {
        let define = dimensions.map_or_else(String::new, |d| vector_index(d, false));
        let sql = format!(
            "REMOVE INDEX IF EXISTS memory_search_embedding ON memory_search;
             UPDATE memory_chunk SET embedding = NONE, pending = true;
             UPDATE memory_search UNSET embedding;
             DELETE embedding_cache;
             {define}"
        );
        self.db.execute_retrying(&sql, json!({})).await?;
        self.resident.apply(Change::DropVectors);
        Ok(())
    }

    /// Defines the HNSW index for `dimensions` unless it exists (a database
    /// migrated from an older Onyx has vectors but no index on `memory_search`).
    pub async fn ensure_vector_index(&self, dimensions: usize) -> Result<(), DbError> {
        self.db
            .execute_retrying(&vector_index(dimensions, true), json!({}))
            .await?;
        Ok(())
    }

    /// Replaces a file's chunks and its file row in one transaction.
    pub async fn replace_file(&self, file: &FileRow, chunks: &[ChunkRow]) -> Result<(), DbError> {
        self.db
            .execute_retrying(
                &format!(
                    "BEGIN TRANSACTION;
                     DELETE memory_chunk WHERE agent = $agent AND path = $path;
                     IF array::len($rows) > 0 {{ INSERT INTO memory_chunk $rows }};
                     UPSERT type::record('memory_file', $key) CONTENT $file;
                     {queue}
                     COMMIT TRANSACTION;",
                    queue = queue_file("$agent", "$path")
                ),
                json!({
                    "agent": file.agent,
                    "path": file.path,
                    "rows": chunks,
                    "key": file_key(&file.agent, &file.path),
                    "file": file,
                }),
            )
            .await?;
        self.file_written();
        self.resident.apply(Change::ReplaceFile {
            agent: file.agent.clone(),
            path: file.path.clone(),
            chunks: chunks.iter().map(ChunkRow::resident).collect(),
        });
        Ok(())
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

    pub async fn remove_file(&self, agent: &str, path: &str) -> Result<(), DbError> {
        self.db
            .execute_retrying(
                &format!(
                    "BEGIN TRANSACTION;
                     DELETE memory_chunk WHERE agent = $agent AND path = $path;
                     DELETE type::record('memory_file', $key);
                     {queue}
                     COMMIT TRANSACTION;",
                    queue = queue_file("$agent", "$path")
                ),
                json!({"agent": agent, "path": path, "key": file_key(agent, path)}),
            )
            .await?;
        self.file_written();
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
                 DELETE memory_chunk; DELETE memory_file; DELETE memory_search; DELETE memory_search_queue;
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

    /// Stores vectors for pending chunks (rows replaced meanwhile are skipped).
    pub async fn set_vectors(&self, updates: &[(String, Vec<f32>)]) -> Result<(), DbError> {
        let rows: Vec<Value> = updates
            .iter()
            .map(|(id, vector)| json!({"id": id, "embedding": vector}))
            .collect();
        self.db
            .execute_retrying(
                &format!(
                    "BEGIN TRANSACTION;
                     FOR $row IN $rows {{
                         LET $chunk = (UPDATE type::record('memory_chunk', $row.id)
                             SET embedding = $row.embedding, pending = false RETURN agent, path)[0];
                         IF $chunk {{ {queue} }};
                     }};
                     COMMIT TRANSACTION;",
                    queue = queue_file("$chunk.agent", "$chunk.path")
                ),
                json!({"rows": rows}),
            )
            .await?;
        self.file_written();
        self.resident.apply(Change::SetVectors(updates.to_vec()));
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
                    hash: format!("{path}-{i}"),
                    text: (*text).into(),
                },
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
    };
    (file, rows)
}

fn file_key(agent: &str, path: &str) -> String {
    format!("{agent}/{path}")
}

fn cache_key(embedding: &str, hash: &str) -> String {
    content_hash(&format!("{embedding}\n{hash}"))
}
