//! Keeping a finished response (unless the request said `store: false`),
//! with the conversation it answered, for `previous_response_id` and
//! `GET /v1/responses/{id}`.

use serde_json::Value;

use crate::responses::{ResponseStore, Stored};

pub struct Keeper {
    pub store: ResponseStore,
    /// Every input item of the conversation, oldest first.
    pub input: Vec<Value>,
    pub keep: bool,
    /// The passthrough provider that answered, if one did.
    pub provider: Option<String>,
}

impl Keeper {
    /// Stores `response`; a failure is logged, not answered: the client has its answer.
    pub async fn save(&self, response: &Value) {
        if !self.keep || !response["id"].is_string() {
            return;
        }
        let stored = Stored {
            response: response.clone(),
            input: self.input.clone(),
            provider: self.provider.clone(),
        };
        if let Err(err) = self.store.save(&stored).await {
            tracing::warn!(id = stored.id(), error = %crate::error_chain::chain(&err), "could not store the response");
        }
    }
}
