//! SurrealDB's own search indexes over memory, kept behind the writes.
//! `memory_search` holds each chunk's searchable fields under the same record
//! key as its `memory_chunk` row, with the FULLTEXT (BM25) and HNSW indexes.
//! Searches use them only while a replica's resident index loads, so they do
//! not need to be current the moment a write returns, and maintaining them
//! costs over twice what the row writes do (bench/README.md): every write
//! queues its file in `memory_search_queue` inside its own transaction, and
//! [`Index::catch_up`] brings each queued file's rows in step.
//!
//! Writes come first: while this replica keeps writing (a bulk import, a
//! reindex), catching up waits for a pause, at most [`MAX_DEFER`] at a time,
//! so the two do not halve each other's speed on a small machine.
//!
//! A queue entry carries a version that every write renews; catching up
//! deletes the entry only if it still holds the version that was read, so a
//! write made meanwhile is caught up on the next pass. Replicas may catch up
//! side by side: the work is idempotent.

use std::collections::HashMap;
use std::time::Duration;

use serde::Deserialize;
use serde_json::json;

use super::index::Index;
use crate::backoff::Backoff;
use crate::storage::{Db, DbError};

/// Files brought up to date per transaction.
const FILES_PER_PASS: usize = 32;
/// How often an idle replica looks for files other replicas queued.
const POLL: Duration = Duration::from_secs(5);
/// While this replica keeps writing, catching up waits for a pause this long…
const QUIET: Duration = Duration::from_millis(200);
/// …but no longer than this, so a steady stream of writes still gets caught up on.
const MAX_DEFER: Duration = Duration::from_secs(10);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

#[derive(Debug, Deserialize)]
struct Queued {
    key: String,
    agent: String,
    path: String,
    version: String,
}

/// A chunk as one of the two tables holds it, for comparing them (the rows
/// themselves are copied inside SurrealDB, so vectors never travel).
#[derive(Debug, Deserialize)]
struct Held {
    id: String,
    has_vector: bool,
}

#[derive(Debug, Deserialize)]
struct Count {
    count: usize,
}

/// What one file's catch-up writes, by chunk id.
#[derive(Debug, Default, PartialEq)]
struct Plan {
    gone: Vec<String>,
    new: Vec<String>,
    vectors: Vec<String>,
    unvectored: Vec<String>,
}

impl Plan {
    fn extend(&mut self, other: Plan) {
        self.gone.extend(other.gone);
        self.new.extend(other.new);
        self.vectors.extend(other.vectors);
        self.unvectored.extend(other.unvectored);
    }
}

/// Compares a file's chunks with what `memory_search` holds for it. Chunk ids
/// are new whenever their text changes, so only vectors change in place.
fn plan(chunks: Vec<Held>, searchable: Vec<Held>) -> Plan {
    let mut present: HashMap<String, bool> = searchable.into_iter().map(|p| (p.id, p.has_vector)).collect();
    let mut plan = Plan::default();
    for chunk in chunks {
        match present.remove(&chunk.id) {
            None => plan.new.push(chunk.id),
            Some(had_vector) if chunk.has_vector && !had_vector => plan.vectors.push(chunk.id),
            Some(had_vector) if !chunk.has_vector && had_vector => plan.unvectored.push(chunk.id),
            Some(_) => {}
        }
    }
    plan.gone = present.into_keys().collect();
    plan.gone.sort();
    plan
}

impl Index {
    /// Brings up to `files` queued files up to date in `memory_search`;
    /// returns how many were taken from the queue (0: nothing waits).
    pub async fn catch_up(&self, files: usize) -> Result<usize, DbError> {
        let queued: Vec<Queued> = self
            .db()
            .rows(
                "SELECT record::id(id) AS key, agent, path, version FROM memory_search_queue LIMIT $limit",
                json!({"limit": files}),
                0,
            )
            .await?;
        if !queued.is_empty() {
            self.catch_up_files(&queued).await?;
        }
        Ok(queued.len())
    }

    /// Brings these files up to date in one transaction: SurrealDB's HNSW
    /// index costs per transaction as well as per vector, so a 500-chunk
    /// transaction indexes about twice as fast as ten 50-chunk ones.
    async fn catch_up_files(&self, files: &[Queued]) -> Result<(), DbError> {
        let mut reads = String::new();
        let mut vars = serde_json::Map::new();
        for (i, file) in files.iter().enumerate() {
            for table in ["memory_chunk", "memory_search"] {
                reads.push_str(&format!(
                    "SELECT record::id(id) AS id, embedding != NONE AS has_vector \
                     FROM {table} WHERE agent = $agent{i} AND path = $path{i};\n"
                ));
            }
            vars.insert(format!("agent{i}"), json!(file.agent));
            vars.insert(format!("path{i}"), json!(file.path));
        }
        let mut response = self.db().execute(&reads, vars.into()).await?;
        let mut all = Plan::default();
        for i in 0..files.len() {
            let chunks: Vec<Held> = Db::take_rows(&mut response, 2 * i)?;
            let searchable: Vec<Held> = Db::take_rows(&mut response, 2 * i + 1)?;
            all.extend(plan(chunks, searchable));
        }
        let done: Vec<_> = files
            .iter()
            .map(|f| json!({"key": f.key, "version": f.version}))
            .collect();
        // A chunk rewritten since the comparison is not found here; its
        // write renewed the queue entry, so the next pass picks it up. IGNORE:
        // another replica may have copied the same rows meanwhile.
        self.db()
            .execute_retrying(
                "BEGIN TRANSACTION;
                 FOR $id IN $gone { DELETE type::record('memory_search', $id) };
                 IF array::len($new) > 0 {
                     INSERT IGNORE INTO memory_search (
                         SELECT record::id(id) AS id, agent, path, kind, day, start_line, body, embedding
                         FROM $new.map(|$id| type::record('memory_chunk', $id))
                     )
                 };
                 FOR $id IN $vectors {
                     UPDATE type::record('memory_search', $id) SET embedding = type::record('memory_chunk', $id).embedding
                 };
                 FOR $id IN $unvectored { UPDATE type::record('memory_search', $id) UNSET embedding };
                 FOR $file IN $done {
                     DELETE type::record('memory_search_queue', $file.key) WHERE version = $file.version
                 };
                 COMMIT TRANSACTION;",
                json!({
                    "gone": all.gone,
                    "new": all.new,
                    "vectors": all.vectors,
                    "unvectored": all.unvectored,
                    "done": done,
                }),
            )
            .await?;
        Ok(())
    }

    /// Files whose writes `memory_search` has not caught up on yet.
    pub async fn files_behind(&self) -> Result<usize, DbError> {
        let rows: Vec<Count> = self
            .db()
            .rows(
                "SELECT count() AS count FROM memory_search_queue GROUP ALL",
                json!({}),
                0,
            )
            .await?;
        Ok(rows.first().map_or(0, |r| r.count))
    }

    /// Catches up until nothing waits, reporting (files done, files queued).
    pub async fn catch_up_all(
        &self,
        on_progress: &(dyn Fn(usize, usize) + Send + Sync),
    ) -> Result<usize, DbError> {
        let mut total = self.files_behind().await?;
        let mut done = 0;
        on_progress(0, total);
        loop {
            let taken = self.catch_up(FILES_PER_PASS).await?;
            if taken == 0 {
                break;
            }
            done += taken;
            // Writes made meanwhile join the queue.
            total = total.max(done);
            on_progress(done, total);
        }
        on_progress(done, done);
        Ok(done)
    }

    /// Catches up for as long as the process lives: soon after this
    /// replica's writes (in their pauses), every few seconds for other
    /// replicas', backing off while SurrealDB fails.
    pub async fn follow_writes(&self) {
        let mut writes = self.writes();
        let mut backoff = Backoff::new(Duration::from_secs(1), MAX_BACKOFF);
        loop {
            writes.mark_unchanged();
            match self.catch_up(FILES_PER_PASS).await {
                Ok(0) => {
                    backoff.succeeded();
                    // A write queues a file; other replicas' writes are polled for.
                    let _ = tokio::time::timeout(POLL, writes.changed()).await;
                }
                Ok(_) => {
                    backoff.succeeded();
                    if writes.has_changed().unwrap_or(false) {
                        pause_for_writes(&mut writes).await;
                    }
                }
                Err(err) => {
                    tracing::warn!(error = %err, "updating SurrealDB's memory search indexes failed; will retry");
                    tokio::time::sleep(backoff.failed()).await;
                }
            }
        }
    }
}

/// Waits until this replica's writes pause for [`QUIET`], or [`MAX_DEFER`].
async fn pause_for_writes(writes: &mut tokio::sync::watch::Receiver<u64>) {
    let deadline = tokio::time::Instant::now() + MAX_DEFER;
    loop {
        writes.mark_unchanged();
        let quiet = tokio::time::timeout(QUIET, writes.changed()).await.is_err();
        if quiet || tokio::time::Instant::now() >= deadline {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::index::test_file;
    use crate::memory::{ChunkRow, FileRow};

    fn held(id: &str, has_vector: bool) -> Held {
        Held {
            id: id.into(),
            has_vector,
        }
    }

    #[test]
    fn a_plan_adds_new_chunks_drops_gone_ones_and_moves_vectors() {
        let plan = plan(
            vec![
                held("kept", true),
                held("new", false),
                held("embedded", true),
                held("unembedded", false),
            ],
            vec![
                held("kept", true),
                held("gone", true),
                held("embedded", false),
                held("unembedded", true),
            ],
        );
        let ids = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            plan,
            Plan {
                gone: ids(&["gone"]),
                new: ids(&["new"]),
                vectors: ids(&["embedded"]),
                unvectored: ids(&["unembedded"]),
            }
        );
    }

    fn file(agent: &str, path: &str, texts: &[&str]) -> (FileRow, Vec<ChunkRow>) {
        let chunks: Vec<(&str, Option<Vec<f32>>)> = texts.iter().map(|t| (*t, None)).collect();
        test_file(agent, path, &chunks)
    }

    async fn searchable(index: &Index, word: &str) -> Vec<String> {
        let mut ids: Vec<String> = index
            .db()
            .rows::<serde_json::Value>(
                "SELECT record::id(id) AS id FROM memory_search WHERE body @1@ $word",
                json!({"word": word}),
                0,
            )
            .await
            .unwrap()
            .into_iter()
            .map(|r| r["id"].as_str().unwrap().to_string())
            .collect();
        ids.sort();
        ids
    }

    #[tokio::test]
    async fn writes_reach_surrealdbs_search_indexes_once_caught_up() {
        let index = Index::new(Db::scratch().await);
        index.reset_vectors(Some(2)).await.unwrap();
        let (memory, rows) = file("main", "MEMORY.md", &["otters hold hands", "badgers dig"]);
        index.replace_file(&memory, &rows).await.unwrap();
        let (user, user_rows) = file("main", "USER.md", &["otters again"]);
        index.replace_file(&user, &user_rows).await.unwrap();
        // Behind the writes until caught up.
        assert!(searchable(&index, "otters").await.is_empty());
        assert_eq!(index.files_behind().await.unwrap(), 2);
        assert_eq!(index.catch_up(10).await.unwrap(), 2);
        assert_eq!(index.files_behind().await.unwrap(), 0);
        let mut otters = vec![rows[0].id.clone(), user_rows[0].id.clone()];
        otters.sort();
        assert_eq!(searchable(&index, "otters").await, otters);

        // A rewrite replaces the file's rows; a removal drops them.
        let (memory, rewritten) = file("main", "MEMORY.md", &["otters sleep"]);
        index.replace_file(&memory, &rewritten).await.unwrap();
        index.remove_file("main", "USER.md").await.unwrap();
        assert_eq!(index.catch_up(10).await.unwrap(), 2);
        assert_eq!(searchable(&index, "otters").await, vec![rewritten[0].id.clone()]);
        assert!(searchable(&index, "badgers").await.is_empty());

        // Vectors set later reach the HNSW index.
        index
            .set_vectors(&[(rewritten[0].id.clone(), vec![1.0, 0.0])])
            .await
            .unwrap();
        assert_eq!(index.files_behind().await.unwrap(), 1);
        let progress = std::sync::Mutex::new(Vec::new());
        let done = index
            .catch_up_all(&|done, total| progress.lock().unwrap().push((done, total)))
            .await
            .unwrap();
        assert_eq!(done, 1);
        assert_eq!(progress.into_inner().unwrap().last(), Some(&(1, 1)));
        let near: Vec<serde_json::Value> = index
            .db()
            .rows(
                "SELECT record::id(id) AS id FROM memory_search WHERE embedding <|1,16|> [1.0, 0.1]",
                json!({}),
                0,
            )
            .await
            .unwrap();
        assert_eq!(near[0]["id"], rewritten[0].id.as_str());
    }

    #[tokio::test]
    async fn a_write_during_catch_up_keeps_its_file_queued() {
        let index = Index::new(Db::scratch().await);
        let (memory, rows) = file("main", "MEMORY.md", &["first words"]);
        index.replace_file(&memory, &rows).await.unwrap();
        let queued: Vec<Queued> = index
            .db()
            .rows(
                "SELECT record::id(id) AS key, agent, path, version FROM memory_search_queue",
                json!({}),
                0,
            )
            .await
            .unwrap();
        // The write lands after the catch-up read the queue entry.
        let (memory, newer) = file("main", "MEMORY.md", &["second words"]);
        index.replace_file(&memory, &newer).await.unwrap();
        index.catch_up_files(&queued).await.unwrap();
        assert_eq!(
            index.files_behind().await.unwrap(),
            1,
            "the newer write is not forgotten"
        );
        index.catch_up(10).await.unwrap();
        assert_eq!(searchable(&index, "second").await, vec![newer[0].id.clone()]);
        assert!(searchable(&index, "first").await.is_empty());
    }

    #[tokio::test]
    async fn migrating_an_older_index_queues_every_file() {
        let db = Db::scratch().await;
        let index = Index::new(db.clone());
        let (memory, rows) = file("main", "MEMORY.md", &["migrated otters"]);
        index.replace_file(&memory, &rows).await.unwrap();
        // As an Onyx from before `memory_search` left it: chunks, no queue.
        db.execute(
            "DELETE memory_search_queue; UPSERT onyx_meta:schema SET version = 5",
            json!({}),
        )
        .await
        .unwrap();
        db.migrate().await.unwrap();
        assert_eq!(index.files_behind().await.unwrap(), 1);
        index.catch_up(10).await.unwrap();
        assert_eq!(searchable(&index, "otters").await, vec![rows[0].id.clone()]);
    }
}
