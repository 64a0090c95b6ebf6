//! What an agent owns, named by the path's `{id}`: a session, a run, a task,
//! a stored response. Each extractor here hands the handler the id once the
//! caller may reach the agent that owns it (`agent_scope`). A caller who
//! reaches every agent costs no lookup; a scoped key's request looks the
//! owner up first, and one that does not exist is left to the handler's 404.

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use super::agent_scope::{AgentReach, path_param};
use super::error::ApiError;
use crate::app::App;
use crate::responses::ResponseStore;
use crate::sessions::SessionError;
use crate::tasks::TaskError;

/// Whose a thing is.
enum Owner {
    /// There is no such thing (the handler says so).
    Missing,
    Agent(String),
    /// It belongs to no agent (a plain model's stored response).
    Nobody,
}

#[derive(Clone, Copy)]
enum Kind {
    Session,
    Run,
    Task,
    Response,
}

async fn owner(app: &App, kind: Kind, id: &str) -> Result<Owner, ApiError> {
    Ok(match kind {
        Kind::Session => match app.sessions.get(id).await {
            Ok(session) => Owner::Agent(session.agent_id),
            Err(SessionError::NotFound(_) | SessionError::BadId(_)) => Owner::Missing,
            Err(err) => return Err(err.into()),
        },
        Kind::Run => match uuid::Uuid::parse_str(id) {
            // Not a run id: the handler's 400.
            Err(_) => Owner::Missing,
            Ok(uuid) => match app
                .agents
                .runs
                .store()
                .get(&uuid.hyphenated().to_string())
                .await?
            {
                Some(run) => Owner::Agent(run.agent),
                None => Owner::Missing,
            },
        },
        Kind::Task => match app.tasks.get(id).await {
            Ok(task) => Owner::Agent(task.agent),
            Err(TaskError::NotFound(_)) => Owner::Missing,
            Err(err) => return Err(err.into()),
        },
        Kind::Response => match ResponseStore::new(app.db.clone()).get(id).await? {
            None => Owner::Missing,
            Some(stored) => match stored.response["model"]
                .as_str()
                .and_then(|m| m.strip_prefix("onyx:"))
            {
                Some(agent) => Owner::Agent(agent.to_string()),
                None => Owner::Nobody,
            },
        },
    })
}

/// The `{id}` of the path, once the caller may reach its owner.
async fn checked_id(parts: &mut Parts, app: &Arc<App>, kind: Kind) -> Result<String, ApiError> {
    let id = path_param(parts, app, "id").await?;
    let reach = AgentReach::of(&parts.extensions)?;
    if reach.is_scoped() {
        match owner(app, kind, &id).await? {
            Owner::Missing => {}
            Owner::Agent(agent) => {
                reach.check(&agent)?;
            }
            Owner::Nobody => return Err(reach.refuse("it belongs to no agent of this key")),
        }
    }
    Ok(id)
}

macro_rules! owned_id {
    ($(#[$doc:meta])* $name:ident, $kind:expr) => {
        $(#[$doc])*
        pub struct $name(pub String);

        impl FromRequestParts<Arc<App>> for $name {
            type Rejection = ApiError;

            async fn from_request_parts(parts: &mut Parts, app: &Arc<App>) -> Result<Self, Self::Rejection> {
                checked_id(parts, app, $kind).await.map(Self)
            }
        }
    };
}

owned_id!(
    /// `/v1/sessions/{id}…`: a session of an agent the caller reaches.
    SessionId,
    Kind::Session
);
owned_id!(
    /// `/v1/runs/{id}…`: a run of an agent the caller reaches.
    RunId,
    Kind::Run
);
owned_id!(
    /// `/v1/tasks/{id}…`: a task of an agent the caller reaches.
    TaskId,
    Kind::Task
);
owned_id!(
    /// `/v1/responses/{id}…`: a stored response of an agent the caller reaches.
    ResponseId,
    Kind::Response
);
