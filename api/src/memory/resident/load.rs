//! Filling the resident index at startup: from this replica's snapshot when
//! it has one, reading again from SurrealDB only the files whose version
//! changed since; from SurrealDB alone otherwise. With a shared SurrealDB
//! server a live query then keeps it current with other replicas' writes.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use futures::StreamExt;
use serde::Deserialize;
use serde_json::json;
use surrealdb::types::{RecordIdKey, Value};

use super::text::DocTerms;
use super::{CHUNK_FIELDS, Change, Resident, ResidentChunk, State, snapshot};
use crate::storage::{Db, DbError};

/// Rows read per query while loading.
const PAGE: usize = 2_000;
/// Files read per query when only some changed since the snapshot.
const FILES_PER_QUERY: usize = 32;

#[derive(Deserialize)]
struct FileVersion {
    agent: String,
    path: String,
    #[serde(default)]
    version: Option<String>,
}

/// How a load went, for the log and the bench.
#[derive(Debug, Default, Clone, Copy)]
pub struct Loaded {
    pub chunks: usize,
    /// Chunks that came from the snapshot.
    pub from_snapshot: usize,
    /// Files read again from SurrealDB because they changed since.
    pub files_read: usize,
}

/// Loads the resident index unless it is loaded or loading. Changes committed
/// meanwhile (here or, through the feed, on other replicas) are replayed on top.
pub async fn load(db: &Db, resident: &Arc<Resident>, snapshot: Option<&Path>) -> Result<Loaded, DbError> {
    if !resident.begin_loading() {
        return Ok(Loaded::default());
    }
    match read_all(db, resident, snapshot).await {
        Ok((state, loaded)) => {
            resident.finish_loading(state);
            tracing::info!(
                chunks = loaded.chunks,
                from_snapshot = loaded.from_snapshot,
                files_read = loaded.files_read,
                "memory search index loaded"
            );
            Ok(loaded)
        }
        Err(err) => {
            resident.unload();
            Err(err)
        }
    }
}

async fn read_all(
    db: &Db,
    resident: &Arc<Resident>,
    snapshot: Option<&Path>,
) -> Result<(State, Loaded), DbError> {
    if db.is_shared() {
        // Subscribed before reading, so nothing written during the read is missed.
        let feed = follow(db, resident.clone()).await?;
        *resident.feed_slot() = Some(feed);
    }
    let saved = match snapshot {
        Some(path) => read_snapshot(path.to_path_buf()).await,
        None => None,
    };
    // Versions first: a file written while its chunks are read then shows an
    // older version than its content, so the next load reads it again.
    let files: Vec<FileVersion> = db
        .rows("SELECT agent, path, version FROM memory_file", json!({}), 0)
        .await?;
    let Some(saved) = saved else {
        let state = read_every_chunk(db, files, PAGE).await?;
        let chunks = state.chunks();
        return Ok((
            state,
            Loaded {
                chunks,
                ..Loaded::default()
            },
        ));
    };
    let mut current: HashMap<(String, String), Option<String>> = files
        .into_iter()
        .map(|f| ((f.agent, f.path), f.version))
        .collect();
    let saved_versions: HashMap<(String, String), String> = saved.versions.into_iter().collect();
    let mut state = State::default();
    let unchanged = saved.chunks.into_iter().filter(|(chunk, _)| {
        let file = (chunk.agent.clone(), chunk.path.clone());
        matches!((current.get(&file), saved_versions.get(&file)), (Some(Some(now)), Some(then)) if now == then)
    });
    let from_snapshot = restore_chunks(&mut state, saved.vocabulary, unchanged);
    let mut stale = Vec::new();
    for (file, version) in current.drain() {
        match (&version, saved_versions.get(&file)) {
            (Some(now), Some(then)) if now == then => state.set_version(file.0, file.1, version),
            _ => stale.push((file, version)),
        }
    }
    let files_read = stale.len();
    for batch in stale.chunks(FILES_PER_QUERY) {
        read_files(db, &mut state, batch).await?;
    }
    let chunks = state.chunks();
    Ok((
        state,
        Loaded {
            chunks,
            from_snapshot,
            files_read,
        },
    ))
}

/// Adds snapshot chunks to `state` with the words they were saved with (no
/// analysis: stemming every chunk again was most of a restart's time);
/// returns how many were added.
pub(super) fn restore_chunks(
    state: &mut State,
    vocabulary: Vec<String>,
    chunks: impl Iterator<Item = (ResidentChunk, DocTerms)>,
) -> usize {
    let ids = state.intern_vocabulary(vocabulary);
    let mut added = 0;
    for (chunk, saved) in chunks {
        let mut terms: Vec<(u32, u32)> = saved
            .terms
            .iter()
            .map(|&(word, n)| (ids[word as usize], n))
            .collect();
        terms.sort_unstable();
        state.upsert_counted(
            chunk,
            DocTerms {
                terms: terms.into_boxed_slice(),
                length: saved.length,
            },
        );
        added += 1;
    }
    added
}

async fn read_snapshot(path: std::path::PathBuf) -> Option<snapshot::Snapshot> {
    let shown = path.display().to_string();
    match tokio::task::spawn_blocking(move || snapshot::read(&path)).await {
        Ok(Ok(saved)) => saved,
        Ok(Err(err)) => {
            tracing::warn!(path = %shown, error = %err, "memory index snapshot unreadable; reading the index from the database");
            None
        }
        Err(err) => {
            tracing::warn!(error = %err, "reading the memory index snapshot failed");
            None
        }
    }
}

/// Every chunk, page by page, with the files' versions as read before.
async fn read_every_chunk(db: &Db, files: Vec<FileVersion>, page: usize) -> Result<State, DbError> {
    let mut state = State::default();
    let mut after: Option<String> = None;
    loop {
        let sql = match after {
            None => format!("SELECT {CHUNK_FIELDS} FROM memory_chunk ORDER BY id LIMIT {page}"),
            // Reads on from the last key. Measured at 100,000 chunks: 26 s;
            // a record range (`memory_chunk:⟨key⟩>..`) took 135 s.
            Some(_) => format!(
                "SELECT {CHUNK_FIELDS} FROM memory_chunk WHERE id > type::record('memory_chunk', $after) \
                 ORDER BY id LIMIT {page}"
            ),
        };
        let rows: Vec<ResidentChunk> = db.rows(&sql, json!({"after": after}), 0).await?;
        let full = rows.len() == page;
        after = rows.last().map(|r| r.id.clone());
        for row in rows {
            state.upsert(row);
        }
        if !full {
            break;
        }
    }
    for file in files {
        state.set_version(file.agent, file.path, file.version);
    }
    Ok(state)
}

/// Reads these files' chunks (one statement per file, one round trip).
async fn read_files(
    db: &Db,
    state: &mut State,
    files: &[((String, String), Option<String>)],
) -> Result<(), DbError> {
    let sql: Vec<String> = (0..files.len())
        .map(|i| format!("SELECT {CHUNK_FIELDS} FROM memory_chunk WHERE agent = $a{i} AND path = $p{i};"))
        .collect();
    let mut vars = serde_json::Map::new();
    for (i, ((agent, path), _)) in files.iter().enumerate() {
        vars.insert(format!("a{i}"), json!(agent));
        vars.insert(format!("p{i}"), json!(path));
    }
    let mut response = db
        .execute(&sql.join("\n"), serde_json::Value::Object(vars))
        .await?;
    for (i, ((agent, path), version)) in files.iter().enumerate() {
        let chunks: Vec<ResidentChunk> = Db::take_rows(&mut response, i)?;
        state.apply(Change::ReplaceFile {
            agent: agent.clone(),
            path: path.clone(),
            chunks,
            version: version.clone(),
        });
    }
    Ok(())
}

/// Applies every `memory_chunk` change from any replica until the live query
/// ends; then unloads, so the memory worker loads afresh (a dropped feed may
/// have missed changes).
async fn follow(db: &Db, resident: Arc<Resident>) -> Result<tokio::task::AbortHandle, DbError> {
    let mut response = db.execute("LIVE SELECT * FROM memory_chunk", json!({})).await?;
    let mut stream = response.stream::<surrealdb::Notification<Value>>(0)?;
    let task = tokio::spawn(async move {
        while let Some(Ok(notification)) = stream.next().await {
            use surrealdb::types::Action;
            let Some(id) = record_key(&notification.data) else {
                continue;
            };
            match notification.action {
                Action::Create | Action::Update => {
                    let mut data = notification.data.into_json_value();
                    data["id"] = serde_json::Value::String(id);
                    match serde_json::from_value::<ResidentChunk>(data) {
                        Ok(chunk) => resident.apply(Change::Upsert(chunk)),
                        Err(err) => {
                            tracing::warn!(error = %err, "unreadable memory chunk from the live feed")
                        }
                    }
                }
                Action::Delete => resident.apply(Change::Delete(id)),
                _ => break,
            }
        }
        tracing::warn!("the memory index's live feed ended; reloading the search index");
        *resident.feed_slot() = None;
        resident.unload();
    });
    Ok(task.abort_handle())
}

fn record_key(data: &Value) -> Option<String> {
    let Value::Object(object) = data else {
        return None;
    };
    let Value::RecordId(id) = object.get("id")? else {
        return None;
    };
    match &id.key {
        RecordIdKey::String(key) => Some(key.clone()),
        RecordIdKey::Number(key) => Some(key.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn loads_every_chunk_page_by_page() {
        let db = Db::scratch().await;
        for i in 0..7 {
            db.execute(
                "CREATE type::record('memory_chunk', $id) CONTENT { agent: 'main', path: 'a.md', kind: 'note', \
                 start_line: $i, end_line: $i, heading: '', text: $text, body: $text }",
                json!({"id": format!("{:032x}", i * 7919), "i": i, "text": format!("chunk number {i}")}),
            )
            .await
            .unwrap();
        }
        // A key SurrealDB has to escape.
        db.execute(
            "CREATE memory_chunk:⟨odd key⟩ CONTENT { agent: 'main', path: 'b.md', kind: 'note', \
             start_line: 1, end_line: 1, heading: '', text: 'odd one', body: 'odd one' }",
            json!({}),
        )
        .await
        .unwrap();
        for page in [2, 3, 100] {
            let state = read_every_chunk(&db, Vec::new(), page).await.unwrap();
            assert_eq!(state.chunks(), 8, "page {page}");
            assert!(state.shown("odd key").is_some());
        }
    }
}
