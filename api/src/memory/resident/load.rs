//! Filling the resident index from SurrealDB, and (with a shared SurrealDB
//! server) keeping it current with other replicas' writes through a live query.

use std::sync::Arc;

use futures::StreamExt;
use serde_json::json;
use surrealdb::types::{RecordIdKey, Value};

use super::{Change, Resident, ResidentChunk, State};
use crate::storage::{Db, DbError};

/// Rows read per query while loading.
const PAGE: usize = 2_000;

const FIELDS: &str =
    "record::id(id) AS id, agent, path, kind, day, start_line, end_line, heading, text, embedding";

/// Loads the resident index unless it is loaded or loading. Changes committed
/// meanwhile (here or, through the feed, on other replicas) are replayed on top.
pub async fn load(db: &Db, resident: &Arc<Resident>) -> Result<(), DbError> {
    if !resident.begin_loading() {
        return Ok(());
    }
    let result = read_all(db, resident, PAGE).await;
    match result {
        Ok(state) => {
            let chunks = state.chunks();
            resident.finish_loading(state);
            tracing::info!(chunks, "memory search index loaded");
            Ok(())
        }
        Err(err) => {
            resident.unload();
            Err(err)
        }
    }
}

async fn read_all(db: &Db, resident: &Arc<Resident>, page: usize) -> Result<State, DbError> {
    if db.is_shared() {
        // Subscribed before reading, so nothing written during the read is missed.
        let feed = follow(db, resident.clone()).await?;
        *resident.feed_slot() = Some(feed);
    }
    let mut state = State::default();
    let mut after: Option<String> = None;
    loop {
        let sql = match after {
            None => format!("SELECT {FIELDS} FROM memory_chunk ORDER BY id LIMIT {page}"),
            // Reads on from the last key. Measured at 100,000 chunks: 26 s;
            // a record range (`memory_chunk:⟨key⟩>..`) took 135 s.
            Some(_) => format!(
                "SELECT {FIELDS} FROM memory_chunk WHERE id > type::record('memory_chunk', $after) \
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
            return Ok(state);
        }
    }
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
        let resident = Arc::new(Resident::default());
        for page in [2, 3, 100] {
            let state = read_all(&db, &resident, page).await.unwrap();
            assert_eq!(state.chunks(), 8, "page {page}");
            assert!(state.shown("odd key").is_some());
        }
    }
}
