//! `/v1/skills`: list the skills of every agent and the shared ones (or what
//! one agent sees, with `?agent=`), read one, write its `SKILL.md` or another
//! of its files (raw text, or `{"content": …}`), delete it. `{scope}` is
//! `_shared` or an agent's id.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::body::TextDocument;
use super::error::ApiError;
use super::query::Params;
use super::ui_bodies::{Deleted, List};
use crate::app::App;
use crate::memory::paths::SHARED;
use crate::skills::{SKILL_FILE, Skill, SkillError, SkillSummary};

impl From<SkillError> for ApiError {
    fn from(err: SkillError) -> Self {
        match err {
            SkillError::Invalid(message) => ApiError::bad_request(message, None),
            err @ SkillError::NotFound { .. } => ApiError::NotFound {
                message: err.to_string(),
                code: "skill_not_found",
            },
            SkillError::Store(err) => ApiError::Store(err),
        }
    }
}

/// A scope is `_shared` or an agent that exists.
async fn known_scope(app: &App, scope: &str) -> Result<(), ApiError> {
    if scope == SHARED || app.agents.registry.get(scope).await?.is_some() {
        Ok(())
    } else {
        Err(ApiError::NotFound {
            message: format!("no agent {scope:?}; skills belong to an agent or to \"_shared\""),
            code: "agent_not_found",
        })
    }
}

pub async fn list(
    State(app): State<Arc<App>>,
    Params(params): Params,
) -> Result<Json<List<SkillSummary>>, ApiError> {
    let skills = &app.agents.skills;
    if let Some(agent) = params.get("agent").filter(|a| !a.is_empty()) {
        known_scope(&app, agent).await?;
        return Ok(Json(List::new(skills.for_agent(agent).await?)));
    }
    let mut all = skills.list_scope(SHARED).await?;
    for agent in app.agents.registry.list().await? {
        all.extend(skills.list_scope(&agent.id).await?);
    }
    Ok(Json(List::new(all)))
}

pub async fn get(
    State(app): State<Arc<App>>,
    Path((scope, name)): Path<(String, String)>,
) -> Result<Json<Skill>, ApiError> {
    Ok(Json(app.agents.skills.get(&scope, &name).await?))
}

/// `PUT /v1/skills/{scope}/{name}`: the skill's `SKILL.md`.
pub async fn put(
    State(app): State<Arc<App>>,
    Path((scope, name)): Path<(String, String)>,
    TextDocument(content): TextDocument,
) -> Result<Json<Skill>, ApiError> {
    known_scope(&app, &scope).await?;
    let skills = &app.agents.skills;
    skills
        .write_file(&scope, &name, SKILL_FILE, Bytes::from(content))
        .await?;
    Ok(Json(skills.get(&scope, &name).await?))
}

pub async fn delete(
    State(app): State<Arc<App>>,
    Path((scope, name)): Path<(String, String)>,
) -> Result<Json<Deleted>, ApiError> {
    if !app.agents.skills.delete(&scope, &name).await? {
        return Err(SkillError::NotFound { scope, name }.into());
    }
    Ok(Json(Deleted::new(format!("{scope}/{name}"), "skill.deleted")))
}

pub async fn read_file(
    State(app): State<Arc<App>>,
    Path((scope, name, file)): Path<(String, String, String)>,
) -> Result<Response, ApiError> {
    let text = app.agents.skills.read_file(&scope, &name, &file).await?;
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response())
}

/// `PUT /v1/skills/{scope}/{name}/files/{path}`: another file of the skill.
pub async fn write_file(
    State(app): State<Arc<App>>,
    Path((scope, name, file)): Path<(String, String, String)>,
    TextDocument(content): TextDocument,
) -> Result<Json<Skill>, ApiError> {
    known_scope(&app, &scope).await?;
    let skills = &app.agents.skills;
    skills
        .write_file(&scope, &name, &file, Bytes::from(content))
        .await?;
    Ok(Json(skills.get(&scope, &name).await?))
}
