//! Session metadata in SurrealDB: updated atomically on every append (counts
//! are incremented in the database, so concurrent appends never lose one),
//! listed with filters and cursor pagination, rebuilt from logs by reindex.

use base64::Engine;
use serde_json::json;

use super::log_message::LogMessage;
use super::types::{ListFilter, SessionMeta, SessionSettings, Status};
use crate::storage::{Db, DbError};

const FIELDS: &str = "record::id(id) AS id, agent_id, title, created_at, updated_at, message_count, \
                      token_count, cached_tokens ?? 0 AS cached_tokens, last_message_preview, status, source, \
                      settings ?? {} AS settings";
const PREVIEW_CHARS: usize = 160;
const SEARCH_TEXT_CHARS: usize = 65_536;

fn truncate(text: &str, chars: usize) -> String {
    text.chars().take(chars).collect()
}

/// Records an append: creates the row on the first one.
pub async fn record_append(
    db: &Db,
    id: &str,
    agent: &str,
    source: &str,
    messages: &[LogMessage],
) -> Result<(), DbError> {
    let (Some(first), Some(last)) = (messages.first(), messages.last()) else {
        return Ok(());
    };
    let title = messages
        .iter()
        .find(|m| m.role() == crate::chat::Role::User)
        .map(|m| truncate(&m.text(), 80))
        .unwrap_or_default();
    let text: String = messages
        .iter()
        .map(LogMessage::text)
        .collect::<Vec<_>>()
        .join(" ");
    let vars = json!({
        "id": id, "agent": agent, "source": source, "ts": last.ts, "first": first.ts, "title": title,
        "n": messages.len(), "tokens": messages.iter().map(LogMessage::tokens).sum::<u64>(),
        "cached": messages.iter().map(LogMessage::cached_tokens).sum::<u64>(),
        "preview": truncate(&last.text(), PREVIEW_CHARS),
        "text": truncate(&text.to_lowercase(), SEARCH_TEXT_CHARS),
    });
    // Concurrent turns of one session update the same row: SurrealDB reports a
    // conflict instead of serializing them, and the one statement is safe to rerun.
    db.execute_retrying(
        "UPSERT type::record('session', $id) SET
            agent_id = $agent,
            source = source ?? $source,
            status = status ?? 'active',
            created_at = IF (message_count ?? 0) > 0 THEN created_at ELSE $first END,
            updated_at = $ts,
            title = IF title THEN title ELSE $title END,
            message_count = (message_count ?? 0) + $n,
            token_count = (token_count ?? 0) + $tokens,
            cached_tokens = (cached_tokens ?? 0) + $cached,
            last_message_preview = $preview,
            search_text = string::slice((search_text ?? '') + ' ' + $text, 0, 65536);",
        vars,
    )
    .await?;
    Ok(())
}

/// Where a compacted session's history starts: the first kept segment and
/// the summary of everything before it. `None`: never compacted.
pub async fn compaction(db: &Db, id: &str) -> Result<Option<(u64, String)>, DbError> {
    #[derive(serde::Deserialize)]
    struct Row {
        history_from: Option<u64>,
        summary: Option<String>,
    }
    let rows: Vec<Row> = db
        .rows(
            "SELECT history_from, summary FROM type::record('session', $id)",
            json!({"id": id}),
            0,
        )
        .await?;
    Ok(rows
        .into_iter()
        .next()
        .and_then(|r| Some((r.history_from?, r.summary.unwrap_or_default()))))
}

pub async fn set_compaction(db: &Db, id: &str, history_from: u64, summary: &str) -> Result<(), DbError> {
    db.execute_retrying(
        "UPDATE type::record('session', $id) SET history_from = $from, summary = $summary",
        json!({"id": id, "from": history_from, "summary": summary}),
    )
    .await?;
    Ok(())
}

pub async fn get(db: &Db, id: &str) -> Result<Option<SessionMeta>, DbError> {
    let sql = format!("SELECT {FIELDS} FROM type::record('session', $id)");
    Ok(db.rows(&sql, json!({"id": id}), 0).await?.into_iter().next())
}

pub async fn update(db: &Db, id: &str, title: Option<&str>, status: Option<Status>) -> Result<(), DbError> {
    db.execute(
        "UPDATE type::record('session', $id) SET title = $title ?? title, status = $status ?? status",
        json!({"id": id, "title": title, "status": status}),
    )
    .await?;
    Ok(())
}

/// Replaces the session's settings (the caller merged and checked them).
pub async fn set_settings(db: &Db, id: &str, settings: &SessionSettings) -> Result<(), DbError> {
    db.execute_retrying(
        "UPDATE type::record('session', $id) SET settings = $settings",
        json!({"id": id, "settings": settings}),
    )
    .await?;
    Ok(())
}

pub async fn delete(db: &Db, id: &str) -> Result<(), DbError> {
    db.execute("DELETE type::record('session', $id)", json!({"id": id}))
        .await?;
    Ok(())
}

pub async fn delete_all(db: &Db) -> Result<(), DbError> {
    db.execute("DELETE session", json!({})).await?;
    Ok(())
}

/// The cursor is the last row's `(updated_at, id)`, opaque to clients.
pub fn encode_cursor(meta: &SessionMeta) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{}|{}", meta.updated_at, meta.id))
}

pub fn decode_cursor(cursor: &str) -> Option<(String, String)> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (ts, id) = text.split_once('|')?;
    Some((ts.to_string(), id.to_string()))
}

/// Newest first; `limit + 1` rows are fetched to know whether a next page exists.
pub async fn list(db: &Db, filter: &ListFilter) -> Result<(Vec<SessionMeta>, Option<String>), DbError> {
    let mut conditions = Vec::new();
    if filter.agent.is_some() {
        conditions.push("agent_id = $agent");
    }
    if filter.status.is_some() {
        conditions.push("status = $status");
    }
    if filter.source.is_some() {
        conditions.push("source = $source");
    }
    if filter.updated_since.is_some() {
        conditions.push("updated_at >= $since");
    }
    if filter.query.is_some() {
        conditions
            .push("(string::contains(string::lowercase(title), $q) OR string::contains(search_text, $q))");
    }
    let cursor = filter.cursor.as_deref().and_then(decode_cursor);
    if cursor.is_some() {
        conditions
            .push("(updated_at < $cursor_ts OR (updated_at = $cursor_ts AND record::id(id) < $cursor_id))");
    }
    let where_clause = if conditions.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", conditions.join(" AND "))
    };
    let sql =
        format!("SELECT {FIELDS} FROM session {where_clause} ORDER BY updated_at DESC, id DESC LIMIT $limit");
    let (cursor_ts, cursor_id) = cursor.unzip();
    let vars = json!({
        "agent": filter.agent, "status": filter.status, "source": filter.source,
        "since": filter.updated_since, "q": filter.query.as_ref().map(|q| q.to_lowercase()),
        "cursor_ts": cursor_ts, "cursor_id": cursor_id, "limit": filter.limit + 1,
    });
    let mut rows: Vec<SessionMeta> = db.rows(&sql, vars, 0).await?;
    let next = if rows.len() > filter.limit {
        rows.truncate(filter.limit);
        rows.last().map(encode_cursor)
    } else {
        None
    };
    Ok((rows, next))
}
