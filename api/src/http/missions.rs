//! `/v1/proposals`, `/v1/missions`, `/v1/steps`: proposals made (and decided)
//! through the API enter the same loop as agents' and triggers'; missions
//! show their steps with outputs.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::body::{JsonObject, typed};
use super::error::ApiError;
use super::query::Params;
use super::ui_bodies::List;
use crate::app::App;
use crate::orchestration::{
    Mission, OrchestrationError, Orchestrator, Proposal, ProposalInput, ProposedStep, Step,
};

impl From<OrchestrationError> for ApiError {
    fn from(err: OrchestrationError) -> Self {
        match err {
            OrchestrationError::Invalid(message) => {
                let param = message
                    .split(':')
                    .next()
                    .filter(|p| !p.contains(' '))
                    .map(str::to_string);
                ApiError::bad_request(message, param)
            }
            OrchestrationError::NotFound(message) => ApiError::NotFound {
                message,
                code: "not_found",
            },
            OrchestrationError::Conflict(message) => ApiError::Conflict(message),
            OrchestrationError::Db(err) => ApiError::Db(err),
        }
    }
}

/// The loop, or a 404 saying it is off.
pub fn orchestrator(app: &App) -> Result<&Arc<Orchestrator>, ApiError> {
    app.orchestrator.as_ref().ok_or_else(|| ApiError::NotFound {
        message: "orchestration is turned off (orchestration.enabled: false)".into(),
        code: "orchestration_disabled",
    })
}

fn limit(query: &HashMap<String, String>) -> usize {
    query
        .get("limit")
        .and_then(|l| l.parse().ok())
        .unwrap_or(100)
        .min(500)
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NewProposal {
    #[serde(default)]
    agent: Option<String>,
    title: String,
    #[serde(default)]
    description: String,
    steps: Vec<ProposedStep>,
}

pub async fn propose(
    State(app): State<Arc<App>>,
    JsonObject(body): JsonObject,
) -> Result<(StatusCode, Json<Proposal>), ApiError> {
    let orch = orchestrator(&app)?;
    let new: NewProposal = typed(&body)?;
    let agent = match new.agent {
        Some(agent) => agent,
        None => app.agents.registry.default_agent().await?.id,
    };
    let proposal = orch
        .propose(ProposalInput {
            agent,
            title: new.title,
            description: new.description,
            source: "api".into(),
            steps: new.steps,
        })
        .await?;
    Ok((StatusCode::CREATED, Json(proposal)))
}

pub async fn proposals(
    State(app): State<Arc<App>>,
    Params(query): Params,
) -> Result<Json<List<Proposal>>, ApiError> {
    let orch = orchestrator(&app)?;
    let rows = orch
        .store
        .proposals(query.get("status").map(String::as_str), limit(&query))
        .await?;
    Ok(Json(List::new(rows)))
}

pub async fn proposal(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
) -> Result<Json<Proposal>, ApiError> {
    let orch = orchestrator(&app)?;
    let found = orch.store.proposal(&id).await?;
    found.map(Json).ok_or_else(|| ApiError::NotFound {
        message: format!("no proposal {id:?}"),
        code: "proposal_not_found",
    })
}

/// `POST /v1/proposals/{id}/approve` and `/reject`, with an optional `{"reason": …}`.
pub async fn approve(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    body: Option<Json<Value>>,
) -> Result<Json<Proposal>, ApiError> {
    decide(&app, &id, true, body).await
}

pub async fn reject(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    body: Option<Json<Value>>,
) -> Result<Json<Proposal>, ApiError> {
    decide(&app, &id, false, body).await
}

async fn decide(
    app: &App,
    id: &str,
    approve: bool,
    body: Option<Json<Value>>,
) -> Result<Json<Proposal>, ApiError> {
    let orch = orchestrator(app)?;
    let reason = body.and_then(|Json(b)| b["reason"].as_str().map(str::to_string));
    Ok(Json(orch.decide(id, approve, reason).await?))
}

pub async fn missions(
    State(app): State<Arc<App>>,
    Params(query): Params,
) -> Result<Json<List<Value>>, ApiError> {
    let orch = orchestrator(&app)?;
    let missions = orch
        .store
        .missions(
            query.get("status").map(String::as_str),
            query.get("agent").map(String::as_str),
            limit(&query),
        )
        .await?;
    let mut out = Vec::with_capacity(missions.len());
    for mission in missions {
        let steps = orch.store.steps_of(&mission.key).await?;
        out.push(with_steps(mission, steps));
    }
    Ok(Json(List::new(out)))
}

fn with_steps(mission: Mission, steps: Vec<Step>) -> Value {
    let mut value = serde_json::to_value(mission).unwrap_or_default();
    value["steps"] = json!(steps);
    value
}

pub async fn mission(State(app): State<Arc<App>>, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    let orch = orchestrator(&app)?;
    let mission = orch.store.mission(&id).await?.ok_or_else(|| ApiError::NotFound {
        message: format!("no mission {id:?}"),
        code: "mission_not_found",
    })?;
    let steps = orch.store.steps_of(&id).await?;
    Ok(Json(with_steps(mission, steps)))
}

pub async fn cancel(State(app): State<Arc<App>>, Path(id): Path<String>) -> Result<Json<Mission>, ApiError> {
    let orch = orchestrator(&app)?;
    Ok(Json(orch.cancel(&id).await?))
}

pub async fn steps(State(app): State<Arc<App>>, Params(query): Params) -> Result<Json<List<Step>>, ApiError> {
    let orch = orchestrator(&app)?;
    let steps = orch
        .store
        .steps(
            query.get("status").map(String::as_str),
            query.get("agent").map(String::as_str),
            limit(&query),
        )
        .await?;
    Ok(Json(List::new(steps)))
}
