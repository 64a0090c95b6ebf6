//! `Sessions`: create, continue, list, export and delete sessions, keeping log
//! and metadata in step.
//!
//! When the object store is down, a turn is not lost: it is parked in the
//! `pending_append` table and a background task writes it to the log (then the
//! metadata) once the store is back. Later turns of a session with parked turns
//! queue behind them, so the log keeps acceptance order.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use serde_json::json;

use super::history::History;
use super::log::SessionLog;
use super::log_message::LogMessage;
use super::meta;
use super::types::{ListFilter, SessionMeta, SessionSettings, Status};
use crate::clock::now_stamp;
use crate::storage::{Db, DbError, ObjectStore, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("no session {0}")]
    NotFound(String),
    #[error("{0:?} is not a session id (a UUID, or \"new\")")]
    BadId(String),
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub struct Sessions {
    log: SessionLog,
    db: Db,
    /// Sessions with parked turns; their new turns queue behind.
    parked: Mutex<HashSet<String>>,
}

#[derive(Deserialize)]
struct Parked {
    id: String,
    session: String,
    agent: String,
    source: String,
    messages: Vec<LogMessage>,
}

/// Session ids are UUIDs; anything else never reaches a key or a query.
pub fn parse_id(text: &str) -> Result<String, SessionError> {
    uuid::Uuid::parse_str(text)
        .map(|u| u.hyphenated().to_string())
        .map_err(|_| SessionError::BadId(text.into()))
}

impl Sessions {
    pub async fn new(store: Arc<dyn ObjectStore>, db: Db) -> Result<Arc<Self>, SessionError> {
        #[derive(Deserialize)]
        struct Row {
            session: String,
        }
        let rows: Vec<Row> = db
            .rows("SELECT session FROM pending_append", json!({}), 0)
            .await?;
        let parked = rows.into_iter().map(|r| r.session).collect();
        Ok(Arc::new(Self {
            log: SessionLog::new(store),
            db,
            parked: Mutex::new(parked),
        }))
    }

    pub fn db(&self) -> &Db {
        &self.db
    }

    fn is_parked(&self, session: &str) -> bool {
        self.parked.lock().map(|p| p.contains(session)).unwrap_or(false)
    }

    /// Starts a session: its metadata exists at once, its log with the first turn.
    pub async fn create(&self, agent: &str, source: &str) -> Result<SessionMeta, SessionError> {
        let id = uuid::Uuid::now_v7().hyphenated().to_string();
        self.create_with_id(id, agent, source).await
    }

    /// The session a stable name stands for (an agent's main session, a chat
    /// on Telegram), created on first use. Its id is derived from the name, so
    /// every replica and every restart finds the same one.
    pub async fn open_named(
        &self,
        name: &str,
        agent: &str,
        source: &str,
    ) -> Result<SessionMeta, SessionError> {
        let id = uuid::Uuid::new_v5(
            &uuid::Uuid::NAMESPACE_URL,
            format!("onyx:session:{name}").as_bytes(),
        )
        .hyphenated()
        .to_string();
        if let Some(meta) = meta::get(&self.db, &id).await? {
            return Ok(meta);
        }
        match self.create_with_id(id.clone(), agent, source).await {
            Ok(meta) => Ok(meta),
            // Another replica (or task) created it a moment ago.
            Err(SessionError::Db(_)) => meta::get(&self.db, &id).await?.ok_or(SessionError::NotFound(id)),
            Err(err) => Err(err),
        }
    }

    async fn create_with_id(
        &self,
        id: String,
        agent: &str,
        source: &str,
    ) -> Result<SessionMeta, SessionError> {
        let now = now_stamp();
        self.db
            .execute(
                "CREATE type::record('session', $id) SET agent_id = $agent, source = $source, status = 'active',
                 created_at = $now, updated_at = $now, title = '', message_count = 0, token_count = 0, cached_tokens = 0,
                 last_message_preview = '', search_text = ''",
                json!({"id": id, "agent": agent, "source": source, "now": now}),
            )
            .await?;
        self.log.mark_new(&id);
        meta::get(&self.db, &id).await?.ok_or(SessionError::NotFound(id))
    }

    pub async fn get(&self, id: &str) -> Result<SessionMeta, SessionError> {
        let id = parse_id(id)?;
        meta::get(&self.db, &id).await?.ok_or(SessionError::NotFound(id))
    }

    pub async fn messages(&self, session: &SessionMeta) -> Result<Vec<LogMessage>, SessionError> {
        Ok(self.log.read(&session.agent_id, &session.id).await?)
    }

    /// What a new turn builds on: from the latest compaction on (the whole
    /// log for a session never compacted).
    pub async fn history(&self, session: &SessionMeta) -> Result<History, SessionError> {
        let compaction = meta::compaction(&self.db, &session.id).await?;
        let from = compaction.as_ref().map_or(0, |(from, _)| *from);
        let turns = self
            .log
            .read_segments(&session.agent_id, &session.id, from)
            .await?;
        Ok(History {
            summary: compaction.map(|(_, summary)| summary),
            turns,
        })
    }

    /// Records a compaction: the log gains a record of it (the original turns
    /// stay), and the history starts at `kept_from` with `summary` before it.
    pub async fn compacted(
        &self,
        session: &SessionMeta,
        summary: &str,
        kept_from: u64,
    ) -> Result<(), SessionError> {
        let record = LogMessage::compaction(summary, kept_from);
        self.log
            .append(&session.agent_id, &session.id, std::slice::from_ref(&record))
            .await?;
        meta::set_compaction(&self.db, &session.id, kept_from, summary).await?;
        Ok(())
    }

    /// Appends one turn. Returns `false` when the turn was parked for a retry.
    pub async fn append(
        &self,
        session: &SessionMeta,
        messages: Vec<LogMessage>,
    ) -> Result<bool, SessionError> {
        if messages.is_empty() {
            return Ok(true);
        }
        if !self.is_parked(&session.id) {
            match self.log.append(&session.agent_id, &session.id, &messages).await {
                Ok(_) => {
                    meta::record_append(
                        &self.db,
                        &session.id,
                        &session.agent_id,
                        &session.source,
                        &messages,
                    )
                    .await?;
                    return Ok(true);
                }
                Err(StoreError::Unavailable(reason)) => {
                    tracing::warn!(session = %session.id, %reason, "object store unavailable; turn parked for retry");
                }
                Err(err) => return Err(err.into()),
            }
        }
        self.db
            .execute(
                "CREATE pending_append SET session = $session_id, agent = $agent, source = $source,
                 messages = $messages, created_at = time::now()",
                // `$session` is reserved in SurrealQL.
                json!({"session_id": session.id, "agent": session.agent_id, "source": session.source, "messages": messages}),
            )
            .await?;
        if let Ok(mut parked) = self.parked.lock() {
            parked.insert(session.id.clone());
        }
        Ok(false)
    }

    pub fn pending_count(&self) -> usize {
        self.parked.lock().map(|p| p.len()).unwrap_or(0)
    }

    /// Writes parked turns to the log in order; stops at the first failure.
    pub async fn drain_parked(&self) -> Result<usize, SessionError> {
        let rows: Vec<Parked> = self
            .db
            .rows(
                "SELECT record::id(id) AS id, session, agent, source, messages FROM pending_append ORDER BY created_at, id",
                json!({}),
                0,
            )
            .await?;
        let mut written = 0;
        for row in rows {
            self.log.append(&row.agent, &row.session, &row.messages).await?;
            meta::record_append(&self.db, &row.session, &row.agent, &row.source, &row.messages).await?;
            self.db
                .execute(
                    "DELETE type::record('pending_append', $id)",
                    json!({"id": row.id}),
                )
                .await?;
            written += 1;
        }
        #[derive(Deserialize)]
        struct Row {
            session: String,
        }
        let still: Vec<Row> = self
            .db
            .rows("SELECT session FROM pending_append", json!({}), 0)
            .await?;
        if let Ok(mut parked) = self.parked.lock() {
            *parked = still.into_iter().map(|r| r.session).collect();
        }
        Ok(written)
    }

    /// Retries parked turns every `every` while any are waiting (a loop
    /// for the app's `Background`; it ends when the service is dropped).
    pub fn retry_loop(self: &Arc<Self>, every: Duration) -> impl Future<Output = ()> + Send + 'static {
        let sessions = Arc::downgrade(self);
        async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(sessions) = sessions.upgrade() else {
                    return;
                };
                if sessions.pending_count() == 0 {
                    continue;
                }
                match sessions.drain_parked().await {
                    Ok(n) if n > 0 => tracing::info!(turns = n, "parked turns written to the session log"),
                    Ok(_) => {}
                    Err(err) => tracing::debug!(error = %err, "parked turns still waiting"),
                }
            }
        }
    }

    pub async fn list(
        &self,
        filter: &ListFilter,
    ) -> Result<(Vec<SessionMeta>, Option<String>), SessionError> {
        Ok(meta::list(&self.db, filter).await?)
    }

    pub async fn update(
        &self,
        id: &str,
        title: Option<&str>,
        status: Option<Status>,
    ) -> Result<SessionMeta, SessionError> {
        let session = self.get(id).await?;
        meta::update(&self.db, &session.id, title, status).await?;
        self.get(&session.id).await
    }

    /// Replaces the session's settings (merged and checked by the caller).
    pub async fn set_settings(
        &self,
        id: &str,
        settings: &SessionSettings,
    ) -> Result<SessionMeta, SessionError> {
        let session = self.get(id).await?;
        meta::set_settings(&self.db, &session.id, settings).await?;
        self.get(&session.id).await
    }

    /// Deletes log and metadata; deleting a missing session succeeds.
    pub async fn delete(&self, id: &str) -> Result<(), SessionError> {
        let id = parse_id(id)?;
        if let Some(session) = meta::get(&self.db, &id).await? {
            self.log.delete(&session.agent_id, &session.id).await?;
        }
        meta::delete(&self.db, &id).await?;
        Ok(())
    }

    /// Rebuilds every session row from the logs; `progress(done, total)` after each.
    pub async fn reindex(&self, progress: &dyn Fn(usize, usize)) -> Result<usize, SessionError> {
        let all = self.log.all_sessions().await?;
        // Keep what the log cannot know (title edits, archive state, source).
        let existing: Vec<SessionMeta> =
            self.db.rows("SELECT record::id(id) AS id, agent_id, title, created_at, updated_at, message_count, token_count, last_message_preview, status, source, settings ?? {} AS settings FROM session", json!({}), 0).await?;
        meta::delete_all(&self.db).await?;
        for (done, (agent, session)) in all.iter().enumerate() {
            let (compactions, messages): (Vec<LogMessage>, Vec<LogMessage>) = self
                .log
                .read(agent, session)
                .await?
                .into_iter()
                .partition(LogMessage::is_compaction);
            let kept = existing.iter().find(|m| &m.id == session);
            let source = kept.map_or("api", |m| m.source.as_str());
            meta::record_append(&self.db, session, agent, source, &messages).await?;
            if let Some((from, summary)) = compactions
                .iter()
                .rev()
                .find_map(|c| Some((c.kept_from?, c.text())))
            {
                meta::set_compaction(&self.db, session, from, &summary).await?;
            }
            if let Some(kept) = kept {
                meta::update(
                    &self.db,
                    session,
                    Some(&kept.title).filter(|t| !t.is_empty()).map(String::as_str),
                    Some(kept.status),
                )
                .await?;
                if kept.settings != SessionSettings::default() {
                    meta::set_settings(&self.db, session, &kept.settings).await?;
                }
            }
            progress(done + 1, all.len());
        }
        Ok(all.len())
    }
}
