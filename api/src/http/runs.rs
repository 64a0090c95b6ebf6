//! `/v1/runs`: agent runs, whatever started them (a chat request, the UI, a
//! chat bot, a task, a wake-up). List and read them, cancel one, or follow
//! one's events (`/events`: the answer so far, then the rest as it comes).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::response::Response;

use super::agent_scope::AgentFilter;
use super::body::query_number;
use super::error::ApiError;
use super::owned::RunId;
use super::query::Params;
use super::run_events;
use super::ui_bodies::List;
use crate::agents::runs::{AgentRun, RunFilter, RunStatus};
use crate::app::App;

/// Run ids are UUIDs; anything else never reaches a query.
fn run_id(text: &str) -> Result<String, ApiError> {
    uuid::Uuid::parse_str(text)
        .map(|u| u.hyphenated().to_string())
        .map_err(|_| ApiError::bad_request(format!("{text:?} is not a run id (a UUID)"), Some("id".into())))
}

fn not_found(id: &str) -> ApiError {
    ApiError::NotFound {
        message: format!("no run {id}"),
        code: "run_not_found",
    }
}

pub async fn list(
    State(app): State<Arc<App>>,
    AgentFilter(agent): AgentFilter,
    Params(params): Params,
) -> Result<Json<List<AgentRun>>, ApiError> {
    let status = params
        .get("status")
        .map(|s| {
            RunStatus::parse(s).ok_or_else(|| {
                ApiError::bad_request(
                    format!("status: {s:?} is not one of running, succeeded, failed, cancelled, interrupted"),
                    Some("status".into()),
                )
            })
        })
        .transpose()?;
    let filter = RunFilter {
        agent: agent.map(|a| a.into_string()),
        status,
        session: params.get("session").cloned(),
        limit: query_number(&params, "limit", 50, 500)?.max(1),
    };
    Ok(Json(List::new(app.agents.runs.store().list(&filter).await?)))
}

pub async fn get(State(app): State<Arc<App>>, RunId(id): RunId) -> Result<Json<AgentRun>, ApiError> {
    let id = run_id(&id)?;
    let run = app.agents.runs.store().get(&id).await?;
    Ok(Json(run.ok_or_else(|| not_found(&id))?))
}

/// Stops a running run (within a second, on whichever replica runs it); the
/// run as it is now. Cancelling a run that already ended changes nothing.
pub async fn cancel(State(app): State<Arc<App>>, RunId(id): RunId) -> Result<Json<AgentRun>, ApiError> {
    let id = run_id(&id)?;
    let run = app.agents.runs.cancel(&id).await?;
    Ok(Json(run.ok_or_else(|| not_found(&id))?))
}

/// The run's events as `chat.completion.chunk` server-sent events, from the
/// first. Served by the replica running it, while it runs and a few minutes
/// after.
pub async fn events(State(app): State<Arc<App>>, RunId(id): RunId) -> Result<Response, ApiError> {
    let id = run_id(&id)?;
    if let Some(run) = app.agents.runs.live(&id) {
        return Ok(super::chat::chunks_sse(run_events::chunks(&run, true)));
    }
    match app.agents.runs.store().get(&id).await? {
        None => Err(not_found(&id)),
        Some(run) if run.status == RunStatus::Running => Err(ApiError::Conflict(format!(
            "run {id} is running on replica {}; its events are served there",
            run.replica
        ))),
        Some(run) => Err(ApiError::Conflict(format!(
            "run {id} ended ({}) and its events are no longer kept; its turn is in its session",
            run.status.as_str()
        ))),
    }
}
