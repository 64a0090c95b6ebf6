//! What can stop an agent run before it answers: the agent has no model, its
//! model cannot be routed, or the model call failed. The HTTP status and the
//! message a client sees are decided in `http/error.rs`, not here.

use crate::providers::{ProviderError, RouteError};
use crate::storage::DbError;

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// Neither the agent nor `agents.defaults` names a model.
    #[error("agent {agent:?} has no model: set agents.defaults.model or the agent's model")]
    NoModel { agent: String },
    /// The agent's model names no configured provider or alias.
    #[error("agent {agent:?}: {source}")]
    Route {
        agent: String,
        #[source]
        source: RouteError,
    },
    /// The model call failed (after retries and fallbacks). Boxed: provider
    /// errors carry the upstream's whole error object.
    #[error(transparent)]
    Provider(Box<ProviderError>),
    /// The run's event stream ended without `Done` or `Failed`.
    #[error("the agent run ended without an answer")]
    NoAnswer,
    /// Someone cancelled the run (`POST /v1/runs/{id}/cancel`, Stop, `/stop`).
    #[error("the run was cancelled")]
    Cancelled,
    /// The run could not be recorded, so it was not started.
    #[error(transparent)]
    Storage(#[from] DbError),
}

impl AgentError {
    /// What a client (an HTTP caller, a chat user, a task's run record) may
    /// be told; the whole chain goes to the log.
    pub fn public_message(&self) -> String {
        match self {
            Self::Provider(err) => err.public_message(),
            Self::NoModel { .. } | Self::Route { .. } | Self::NoAnswer | Self::Cancelled => self.to_string(),
            Self::Storage(_) => "storage is unavailable".into(),
        }
    }
}

impl From<ProviderError> for AgentError {
    fn from(err: ProviderError) -> Self {
        Self::Provider(Box::new(err))
    }
}
