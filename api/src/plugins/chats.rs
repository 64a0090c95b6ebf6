//! The session each platform chat is in (`telegram:{chat_id}`), kept in
//! SurrealDB so a conversation continues across messages, restarts and
//! replicas until someone sends `/new`.

use serde::Deserialize;
use serde_json::json;

use crate::sessions::{SessionError, SessionMeta, Sessions};
use crate::storage::Db;

pub struct Chats {
    db: Db,
}

#[derive(Deserialize)]
struct Row {
    session_id: String,
    agent: String,
}

impl Chats {
    pub fn new(db: Db) -> Self {
        Self { db }
    }

    /// The chat's current session with `agent`; a new one when it has none,
    /// when it was deleted, or when the chat is now routed to another agent.
    pub async fn current(
        &self,
        sessions: &Sessions,
        chat: &str,
        agent: &str,
        platform: &str,
    ) -> Result<SessionMeta, SessionError> {
        let rows: Vec<Row> = self
            .db
            .rows(
                "SELECT session_id, agent FROM type::record('chat_session', $chat)",
                json!({ "chat": chat }),
                0,
            )
            .await?;
        if let Some(row) = rows.into_iter().next().filter(|r| r.agent == agent)
            && let Ok(session) = sessions.get(&row.session_id).await
        {
            return Ok(session);
        }
        self.start_new(sessions, chat, agent, platform).await
    }

    /// `/new`: the chat moves to a fresh session.
    pub async fn start_new(
        &self,
        sessions: &Sessions,
        chat: &str,
        agent: &str,
        platform: &str,
    ) -> Result<SessionMeta, SessionError> {
        let session = sessions.create(agent, platform).await?;
        self.db
            .execute_retrying(
                "UPSERT type::record('chat_session', $chat) CONTENT { session_id: $session_id, agent: $agent }",
                json!({ "chat": chat, "session_id": session.id, "agent": agent }),
            )
            .await?;
        Ok(session)
    }
}
