//! Where the owner last talked to each agent on a chat platform
//! (`telegram:<chat>`, `discord:<channel>`): the default target of
//! `send_message`. Recorded when an allowlisted user's chat message is
//! answered; kept in SurrealDB so every replica agrees.

use serde::Deserialize;
use serde_json::json;

use crate::clock::now_stamp;
use crate::storage::{Db, DbError};

#[derive(Clone)]
pub struct LastChats {
    db: Db,
}

#[derive(Deserialize)]
struct Row {
    target: String,
}

impl LastChats {
    pub fn new(db: Db) -> Self {
        Self { db }
    }

    pub async fn record(&self, agent: &str, target: &str) -> Result<(), DbError> {
        self.db
            .execute_retrying(
                "UPSERT type::record('owner_chat', $agent) CONTENT { agent: $agent, target: $target, at: $at }",
                json!({ "agent": agent, "target": target, "at": now_stamp() }),
            )
            .await
            .map(|_| ())
    }

    pub async fn last(&self, agent: &str) -> Result<Option<String>, DbError> {
        let rows: Vec<Row> = self
            .db
            .rows(
                "SELECT target FROM type::record('owner_chat', $agent)",
                json!({ "agent": agent }),
                0,
            )
            .await?;
        Ok(rows.into_iter().next().map(|r| r.target))
    }
}
