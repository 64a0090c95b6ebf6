//! Stored Responses API responses (`/v1/responses` with `store`, the default):
//! each `response` object kept with the whole conversation it answered as
//! input items (earlier responses' inputs and outputs already expanded), so a
//! `previous_response_id` continues the conversation on any replica that shares
//! the database. Owns the `stored_response` table; knows nothing of HTTP or of
//! how a response was produced.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::storage::{Db, DbError};

#[derive(Debug, thiserror::Error)]
pub enum ResponseError {
    #[error("Response with id '{0}' not found.")]
    NotFound(String),
    #[error("Previous response with id '{0}' not found.")]
    PreviousNotFound(String),
    #[error(transparent)]
    Db(#[from] DbError),
}

/// One stored response.
#[derive(Debug, Clone, Deserialize)]
pub struct Stored {
    /// The `response` object as the client got it.
    pub response: Value,
    /// Every input item of the conversation up to this response, oldest first.
    pub input: Vec<Value>,
    /// The provider whose own Responses API made it (its id is the upstream's);
    /// `None` when Onyx translated it.
    #[serde(default)]
    pub provider: Option<String>,
}

impl Stored {
    pub fn id(&self) -> &str {
        self.response["id"].as_str().unwrap_or_default()
    }

    /// The conversation to continue from: its input items, then its output items.
    pub fn conversation(&self) -> Vec<Value> {
        let output = self.response["output"].as_array().into_iter().flatten();
        self.input.iter().chain(output).cloned().collect()
    }
}

/// The responses table, shared by every replica.
#[derive(Clone)]
pub struct ResponseStore {
    db: Db,
}

impl ResponseStore {
    pub fn new(db: Db) -> Self {
        Self { db }
    }

    pub async fn save(&self, stored: &Stored) -> Result<(), ResponseError> {
        self.db
            .execute(
                "UPSERT type::record('stored_response', $id) CONTENT {
                     response: $response, input: $input, provider: $provider, stored_at: time::now()
                 }",
                json!({
                    "id": stored.id(),
                    "response": stored.response,
                    "input": stored.input,
                    "provider": stored.provider,
                }),
            )
            .await?;
        Ok(())
    }

    pub async fn get(&self, id: &str) -> Result<Option<Stored>, ResponseError> {
        // SurrealDB refuses an empty record id (a database error, not "no such row").
        if id.is_empty() {
            return Ok(None);
        }
        let rows: Vec<Stored> = self
            .db
            .rows(
                "SELECT response, input, provider FROM type::record('stored_response', $id)",
                json!({"id": id}),
                0,
            )
            .await?;
        Ok(rows.into_iter().next())
    }

    /// The response `id`, or [`ResponseError::NotFound`].
    pub async fn require(&self, id: &str) -> Result<Stored, ResponseError> {
        self.get(id)
            .await?
            .ok_or_else(|| ResponseError::NotFound(id.to_string()))
    }

    /// The response a request continues, or [`ResponseError::PreviousNotFound`].
    pub async fn previous(&self, id: &str) -> Result<Stored, ResponseError> {
        self.get(id)
            .await?
            .ok_or_else(|| ResponseError::PreviousNotFound(id.to_string()))
    }

    /// Whether there was such a response to delete.
    pub async fn delete(&self, id: &str) -> Result<bool, ResponseError> {
        let rows: Vec<Value> = self
            .db
            .rows(
                "DELETE type::record('stored_response', $id) RETURN BEFORE",
                json!({"id": id}),
                0,
            )
            .await?;
        Ok(!rows.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stores_reads_and_deletes_a_response() {
        let store = ResponseStore::new(Db::scratch().await);
        let stored = Stored {
            response: json!({"id": "resp_1", "object": "response", "temperature": 1.0, "error": null,
                "output": [{"type": "message", "id": "msg_2", "content": []}]}),
            input: vec![json!({"type": "message", "id": "msg_1", "role": "user", "content": []})],
            provider: None,
        };
        store.save(&stored).await.unwrap();
        let read = store.require("resp_1").await.unwrap();
        assert_eq!(read.response, stored.response);
        let ids: Vec<_> = read.conversation().iter().map(|i| i["id"].clone()).collect();
        assert_eq!(ids, [json!("msg_1"), json!("msg_2")]);
        assert!(store.delete("resp_1").await.unwrap());
        assert!(!store.delete("resp_1").await.unwrap());
        assert!(matches!(
            store.previous("resp_1").await,
            Err(ResponseError::PreviousNotFound(_))
        ));
    }
}
