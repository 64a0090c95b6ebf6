//! `/v1/tasks`: scheduled tasks (list, create, read, change, cancel, run now)
//! and their run history.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;

use super::agent_scope::{AgentFilter, AgentInBody};
use super::body::{JsonObject, query_number, typed};
use super::error::ApiError;
use super::owned::TaskId;
use super::query::Params;
use super::ui_bodies::{Deleted, List, RunView, TaskView};
use crate::app::App;
use crate::tasks::{NewTask, TaskPatch, TaskStatus};

fn status_filter(params: &HashMap<String, String>) -> Result<Option<TaskStatus>, ApiError> {
    params
        .get("status")
        .map(|s| {
            TaskStatus::parse(s).ok_or_else(|| {
                ApiError::bad_request(
                    format!("status: {s:?} is not one of active, paused, completed, failed"),
                    Some("status".into()),
                )
            })
        })
        .transpose()
}

pub async fn list(
    State(app): State<Arc<App>>,
    AgentFilter(agent): AgentFilter,
    Params(params): Params,
) -> Result<Json<List<TaskView>>, ApiError> {
    let tasks = app
        .tasks
        .list(agent.as_ref().map(|a| a.as_str()), status_filter(&params)?)
        .await?;
    Ok(Json(List::new(tasks.iter().map(TaskView::from).collect())))
}

pub async fn create(
    State(app): State<Arc<App>>,
    AgentInBody { agent, body: mut new }: AgentInBody<NewTask>,
) -> Result<(StatusCode, Json<TaskView>), ApiError> {
    new.agent = agent.into_string();
    let agent = app.agents.registry.get(&new.agent).await?;
    if agent.is_none() {
        return Err(ApiError::bad_request(
            format!(
                "agent: there is no agent {:?}; GET /v1/agents lists them",
                new.agent
            ),
            Some("agent".into()),
        ));
    }
    let task = app.tasks.create(new, "api").await?;
    Ok((StatusCode::CREATED, Json(TaskView::from(&task))))
}

pub async fn get(State(app): State<Arc<App>>, TaskId(id): TaskId) -> Result<Json<TaskView>, ApiError> {
    Ok(Json(TaskView::from(&app.tasks.get(&id).await?)))
}

pub async fn patch(
    State(app): State<Arc<App>>,
    TaskId(id): TaskId,
    JsonObject(body): JsonObject,
) -> Result<Json<TaskView>, ApiError> {
    let patch: TaskPatch = typed(&body)?;
    Ok(Json(TaskView::from(&app.tasks.update(&id, patch).await?)))
}

pub async fn delete(State(app): State<Arc<App>>, TaskId(id): TaskId) -> Result<Json<Deleted>, ApiError> {
    app.tasks.cancel(&id).await?;
    Ok(Json(Deleted::new(id, "task")))
}

/// Starts a run now; answers at once with the run (poll `/runs` for its end).
pub async fn run_now(
    State(app): State<Arc<App>>,
    TaskId(id): TaskId,
) -> Result<(StatusCode, Json<RunView>), ApiError> {
    let run = app.scheduler.run_now(&id).await?;
    Ok((StatusCode::ACCEPTED, Json(RunView::from(&run))))
}

pub async fn runs(
    State(app): State<Arc<App>>,
    TaskId(id): TaskId,
    Params(params): Params,
) -> Result<Json<List<RunView>>, ApiError> {
    let limit = query_number(&params, "limit", 50, 500)?;
    let runs = app.tasks.runs(&id, limit).await?;
    Ok(Json(List::new(runs.iter().map(RunView::from).collect())))
}
