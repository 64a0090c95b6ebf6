//! `/v1/agents` (list, get, create from the templates, enable/disable, model,
//! permission mode, workspace files), `/v1/inbox` and `/v1/approvals`.
//!
//! What an agent may do (its model, permission mode, whether it runs) is the
//! owner's to decide: changing it needs an admin key or the UI's session, so
//! a chat key cannot raise its own agent to `allow-all`. A chat key may
//! rename an agent and read and write its workspace files.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use serde::Deserialize;

use super::agent_scope::{AgentPath, AgentQuery};
use super::body::{JsonObject, TextDocument, query_number, typed};
use super::error::ApiError;
use super::middleware::CallerScope;
use super::query::Params;
use super::ui_bodies::{AgentDetail, AgentView, ApprovalDecision, List};
use crate::agents::approvals::Approval;
use crate::agents::registry::parse_mode;
use crate::agents::{AgentDef, AgentPatch, workspace};
use crate::app::App;
use crate::auth::{KeyError, Scope};
use crate::config::PermissionMode;
use crate::inbox::InboxMessage;
use crate::memory::{FileContent, WriteOutcome};

async fn find(app: &App, id: &str) -> Result<AgentDef, ApiError> {
    app.agents
        .registry
        .get(id)
        .await?
        .ok_or_else(|| ApiError::NotFound {
            message: format!("no agent {id:?}"),
            code: "agent_not_found",
        })
}

pub async fn list(State(app): State<Arc<App>>) -> Result<Json<List<AgentView>>, ApiError> {
    let agents = app.agents.registry.list().await?;
    Ok(Json(List::new(agents.iter().map(AgentView::from).collect())))
}

pub async fn get(
    State(app): State<Arc<App>>,
    AgentPath(agent): AgentPath,
) -> Result<Json<AgentDetail>, ApiError> {
    let agent = find(&app, agent.as_str()).await?;
    let files = app.memory.list_files(&agent.id).await.unwrap_or_default();
    Ok(Json(AgentDetail {
        agent: AgentView::from(&agent),
        files: files
            .into_iter()
            .filter(|f| f.agent == agent.id)
            .map(|f| f.path)
            .collect(),
    }))
}

fn workspace_name(name: &str) -> Result<&str, ApiError> {
    if workspace::is_workspace_file(name) {
        Ok(name)
    } else {
        Err(ApiError::bad_request(
            format!(
                "{name:?} is not a workspace file ({})",
                workspace::TEMPLATES
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Some("name".into()),
        ))
    }
}

/// The `{name}` of a workspace file route (its `{agent}` is taken by `AgentPath`).
#[derive(Deserialize)]
pub(super) struct FileName {
    name: String,
}

pub async fn read_file(
    State(app): State<Arc<App>>,
    AgentPath(agent): AgentPath,
    Path(FileName { name }): Path<FileName>,
) -> Result<Json<FileContent>, ApiError> {
    let agent = find(&app, agent.as_str()).await?;
    let name = workspace_name(&name)?;
    app.agents.prepare(&agent).await?;
    let file = app.memory.read_file(&agent.id, name).await?;
    Ok(Json(file))
}

pub async fn write_file(
    State(app): State<Arc<App>>,
    AgentPath(agent): AgentPath,
    Path(FileName { name }): Path<FileName>,
    TextDocument(content): TextDocument,
) -> Result<Json<WriteOutcome>, ApiError> {
    let agent = find(&app, agent.as_str()).await?;
    let name = workspace_name(&name)?;
    app.agents.prepare(&agent).await?;
    let outcome = app.memory.write_file(&agent.id, name, content, None).await?;
    Ok(Json(outcome))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(optional_fields))]
#[serde(deny_unknown_fields)]
pub(super) struct CreateAgent {
    id: String,
    name: Option<String>,
    model: Option<String>,
    permission_mode: Option<String>,
}

fn mode(text: Option<&str>) -> Result<Option<PermissionMode>, ApiError> {
    text.map(|m| {
        parse_mode(m).ok_or_else(|| {
            ApiError::bad_request(
                "permission_mode: must be \"safe\", \"ask\" or \"allow-all\"",
                Some("permission_mode".into()),
            )
        })
    })
    .transpose()
}

/// Refuses a change of what an agent may do (`fields` that are set) to a caller without the admin scope.
fn owner_decides(scope: Scope, fields: &[(&str, bool)]) -> Result<(), ApiError> {
    let asked: Vec<&str> = fields
        .iter()
        .filter(|(_, set)| *set)
        .map(|(name, _)| *name)
        .collect();
    if scope == Scope::Admin || asked.is_empty() {
        return Ok(());
    }
    Err(KeyError::OutOfScope(format!(
        "{} of an agent decide what it may do: changing them needs an admin key or the UI",
        asked.join(", ")
    ))
    .into())
}

pub async fn create(
    State(app): State<Arc<App>>,
    CallerScope(scope): CallerScope,
    JsonObject(body): JsonObject,
) -> Result<Json<AgentView>, ApiError> {
    let request: CreateAgent = typed(&body)?;
    owner_decides(
        scope,
        &[
            ("model", request.model.is_some()),
            ("permission_mode", request.permission_mode.is_some()),
        ],
    )?;
    crate::memory::paths::agent(&request.id)
        .ok()
        .filter(|id| *id != crate::memory::paths::SHARED)
        .ok_or_else(|| {
            ApiError::bad_request(
                "id: 1-64 of a-z, 0-9, '-' and '_', not starting with '_'",
                Some("id".into()),
            )
        })?;
    let permission_mode = mode(request.permission_mode.as_deref())?;
    if app.agents.registry.get(&request.id).await?.is_some() {
        return Err(ApiError::Conflict(format!(
            "an agent {:?} already exists",
            request.id
        )));
    }
    app.agents
        .registry
        .create(
            &request.id,
            request.name.as_deref(),
            request.model.as_deref(),
            permission_mode,
        )
        .await?;
    let agent = find(&app, &request.id).await?;
    app.agents.prepare(&agent).await?;
    Ok(Json(AgentView::from(&agent)))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(optional_fields))]
#[serde(deny_unknown_fields)]
pub(super) struct PatchAgent {
    enabled: Option<bool>,
    model: Option<String>,
    permission_mode: Option<String>,
    name: Option<String>,
}

pub async fn patch(
    State(app): State<Arc<App>>,
    AgentPath(agent): AgentPath,
    CallerScope(scope): CallerScope,
    JsonObject(body): JsonObject,
) -> Result<Json<AgentView>, ApiError> {
    let id = agent.as_str();
    find(&app, id).await?;
    let request: PatchAgent = typed(&body)?;
    owner_decides(
        scope,
        &[
            ("enabled", request.enabled.is_some()),
            ("model", request.model.is_some()),
            ("permission_mode", request.permission_mode.is_some()),
        ],
    )?;
    let change = AgentPatch {
        enabled: request.enabled,
        model: request.model,
        permission_mode: mode(request.permission_mode.as_deref())?,
        name: request.name,
    };
    app.agents.registry.patch(id, &change).await?;
    Ok(Json(AgentView::from(&find(&app, id).await?)))
}

pub async fn inbox(
    State(app): State<Arc<App>>,
    AgentQuery(agent): AgentQuery,
    Params(params): Params,
) -> Result<Json<List<InboxMessage>>, ApiError> {
    let agent = agent.as_str();
    let status = params.get("status").map(String::as_str);
    if let Some(status) = status
        && !matches!(status, "pending" | "claimed" | "read")
    {
        return Err(ApiError::bad_request(
            "status: must be \"pending\", \"claimed\" or \"read\"",
            Some("status".into()),
        ));
    }
    let limit = query_number(&params, "limit", 50, 500)?.max(1);
    let messages = app.agents.inbox.list(agent, status, limit).await?;
    Ok(Json(List::new(messages)))
}

pub async fn approvals(State(app): State<Arc<App>>) -> Result<Json<List<Approval>>, ApiError> {
    let pending = app.agents.approvals.pending().await?;
    Ok(Json(List::new(pending)))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(optional_fields))]
#[cfg_attr(test, ts(rename = "DecideApproval"))]
#[serde(deny_unknown_fields)]
pub(super) struct Decide {
    /// `approve` or `deny`.
    decision: String,
}

pub async fn decide(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    JsonObject(body): JsonObject,
) -> Result<Json<ApprovalDecision>, ApiError> {
    let request: Decide = typed(&body)?;
    let approve = match request.decision.as_str() {
        "approve" => true,
        "deny" => false,
        _ => {
            return Err(ApiError::bad_request(
                "decision: must be \"approve\" or \"deny\"",
                Some("decision".into()),
            ));
        }
    };
    if !app.agents.approvals.decide(&id, approve).await? {
        return Err(ApiError::NotFound {
            message: format!("no pending approval {id:?} (it may have timed out)"),
            code: "approval_not_found",
        });
    }
    Ok(Json(ApprovalDecision {
        id,
        decision: request.decision,
    }))
}
