//! Agent-to-agent messages. `send_to_agent` stores one; the recipient's next
//! run claims every pending message for its prompt (atomically, so two runs
//! never both deliver one); the claim is committed when the run answers and
//! released when it fails, is cancelled or its replica dies.

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::clock::now_stamp;
use crate::storage::{Db, DbError};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct InboxMessage {
    pub id: String,
    #[serde(rename = "from")]
    pub sender: String,
    #[serde(rename = "to")]
    pub recipient: String,
    pub body: String,
    pub created_at: String,
    /// `pending` until a run of the recipient takes it, `claimed` while that
    /// run works, then `read` (or `pending` again if the run did not finish).
    pub status: String,
    #[serde(default)]
    pub read_at: Option<String>,
}

/// The stored row; `from`/`to` are awkward names in SurrealQL.
#[derive(Debug, Serialize, Deserialize)]
struct Row {
    key: String,
    sender: String,
    recipient: String,
    body: String,
    created_at: String,
    status: String,
    #[serde(default)]
    read_at: Option<String>,
}

impl From<Row> for InboxMessage {
    fn from(row: Row) -> Self {
        Self {
            id: row.key,
            sender: row.sender,
            recipient: row.recipient,
            body: row.body,
            created_at: row.created_at,
            status: row.status,
            read_at: row.read_at,
        }
    }
}

const FIELDS: &str = "key, sender, recipient, body, created_at, status, read_at";

#[derive(Clone)]
pub struct Inbox {
    db: Db,
}

impl Inbox {
    pub fn new(db: Db) -> Self {
        Self { db }
    }

    pub async fn send(&self, from: &str, to: &str, body: &str) -> Result<InboxMessage, DbError> {
        let row = Row {
            key: uuid::Uuid::now_v7().to_string(),
            sender: from.into(),
            recipient: to.into(),
            body: body.into(),
            created_at: now_stamp(),
            status: "pending".into(),
            read_at: None,
        };
        self.db
            .execute_retrying(
                "CREATE type::record('inbox_message', $row.key) CONTENT $row",
                json!({ "row": row }),
            )
            .await?;
        Ok(row.into())
    }

    /// Claims every pending message for `agent` for the run `run` and returns
    /// them, oldest first. They stay `claimed` until the run ends:
    /// [`commit`](Self::commit) marks them read, [`release`](Self::release)
    /// hands them back.
    pub async fn claim(&self, agent: &str, run: &str) -> Result<Vec<InboxMessage>, DbError> {
        let mut response = self
            .db
            .execute_retrying(
                "UPDATE inbox_message SET status = 'claimed', claimed_by = $run, read_at = $now
                 WHERE recipient = $agent AND status = 'pending' RETURN AFTER",
                json!({"agent": agent, "run": run, "now": now_stamp()}),
            )
            .await?;
        let value: surrealdb::types::Value = response.take(0)?;
        let mut rows: Vec<Row> = serde_json::from_value(match value.into_json_value() {
            serde_json::Value::Null => serde_json::Value::Array(Vec::new()),
            other => other,
        })
        .map_err(|e| DbError::Decode(e.to_string()))?;
        rows.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.key.cmp(&b.key)));
        Ok(rows.into_iter().map(InboxMessage::from).collect())
    }

    /// The run that claimed messages answered: they are read.
    pub async fn commit(&self, run: &str) -> Result<(), DbError> {
        self.db
            .execute_retrying(
                "UPDATE inbox_message SET status = 'read', claimed_by = NONE
                 WHERE claimed_by = $run AND status = 'claimed'",
                json!({ "run": run }),
            )
            .await?;
        Ok(())
    }

    /// The run that claimed messages failed, was cancelled or interrupted:
    /// they are pending again, for the agent's next run.
    pub async fn release(&self, run: &str) -> Result<(), DbError> {
        self.db
            .execute_retrying(
                "UPDATE inbox_message SET status = 'pending', claimed_by = NONE, read_at = NONE
                 WHERE claimed_by = $run AND status = 'claimed'",
                json!({ "run": run }),
            )
            .await?;
        Ok(())
    }

    /// Messages to `agent`, newest first (`status`: `pending` or `read`).
    pub async fn list(
        &self,
        agent: &str,
        status: Option<&str>,
        limit: usize,
    ) -> Result<Vec<InboxMessage>, DbError> {
        let filter = if status.is_some() {
            "AND status = $status"
        } else {
            ""
        };
        let rows: Vec<Row> = self
            .db
            .rows(
                &format!(
                    "SELECT {FIELDS} FROM inbox_message WHERE recipient = $agent {filter}
                     ORDER BY created_at DESC LIMIT $limit"
                ),
                json!({"agent": agent, "status": status, "limit": limit}),
                0,
            )
            .await?;
        Ok(rows.into_iter().map(InboxMessage::from).collect())
    }
}
