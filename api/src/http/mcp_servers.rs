//! `/v1/mcp/servers`: each MCP server's client on this replica (state,
//! restarts, last error, process and tools), and (admin scope) servers
//! added, edited (a JSON merge patch), removed and restarted live. Added
//! servers are stored for every replica; the config file's are read-only
//! here. `env` and `headers` values are write-only: answers name them only.
//! Every change is an audit event naming what changed, never a value.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;

use super::body::JsonObject;
use super::client::ClientIp;
use super::error::ApiError;
use super::middleware::Caller;
use super::providers::{field_names, invalid_fields, take_name};
use super::ui_bodies::{Deleted, List};
use crate::app::App;
use crate::audit::Action;
use crate::mcp_client::api_added::{SpecError, parse_spec};
use crate::mcp_client::{ChangeError, McpServerView};

impl From<ChangeError> for ApiError {
    fn from(err: ChangeError) -> Self {
        match err {
            ChangeError::Store(SpecError::Db(err)) => ApiError::Db(err),
            ChangeError::Store(SpecError::Invalid(err)) => invalid_fields(err),
            err @ (ChangeError::NotFound(_) | ChangeError::Store(SpecError::NotFound(..))) => {
                ApiError::NotFound {
                    message: err.to_string(),
                    code: "mcp_server_not_found",
                }
            }
            other => ApiError::Conflict(other.to_string()),
        }
    }
}

/// Records a server change (what changed, never a value).
async fn audit(app: &App, caller: &Caller, client: ClientIp, target: &str, detail: String) {
    super::providers::audit(app, caller, client, Action::McpServerChanged, target, detail).await;
}

pub async fn list(State(app): State<Arc<App>>) -> Json<List<McpServerView>> {
    Json(List::new(app.mcp.views()))
}

pub async fn get(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
) -> Result<Json<McpServerView>, ApiError> {
    app.mcp
        .server_view(&name)
        .map(Json)
        .ok_or_else(|| ChangeError::NotFound(name).into())
}

/// `POST /v1/mcp/servers`: `{ "name": …, …the config file's server fields }`.
pub async fn create(
    State(app): State<Arc<App>>,
    caller: Caller,
    client: ClientIp,
    JsonObject(mut body): JsonObject,
) -> Result<(StatusCode, Json<McpServerView>), ApiError> {
    let name = take_name(&mut body, "tools are offered as mcp__name__tool")?;
    let fields = field_names(&body);
    let spec = parse_spec(body).map_err(invalid_fields)?;
    let view = app.mcp.add(&name, spec).await?;
    let detail = format!("added ({} server; fields {fields})", view.transport);
    audit(&app, &caller, client, &name, detail).await;
    Ok((StatusCode::CREATED, Json(view)))
}

/// `PATCH /v1/mcp/servers/{name}`: a JSON merge patch over its fields.
pub async fn patch(
    State(app): State<Arc<App>>,
    caller: Caller,
    client: ClientIp,
    Path(name): Path<String>,
    JsonObject(body): JsonObject,
) -> Result<Json<McpServerView>, ApiError> {
    if body.get("name").is_some() {
        return Err(ApiError::bad_request(
            "name: a server cannot be renamed; add one under the new name and remove this one",
            Some("name".into()),
        ));
    }
    let detail = format!("changed {}", field_names(&body));
    let view = app.mcp.edit(&name, body).await?;
    audit(&app, &caller, client, &name, detail).await;
    Ok(Json(view))
}

pub async fn delete(
    State(app): State<Arc<App>>,
    caller: Caller,
    client: ClientIp,
    Path(name): Path<String>,
) -> Result<Json<Deleted>, ApiError> {
    app.mcp.remove(&name).await?;
    audit(&app, &caller, client, &name, "removed".into()).await;
    Ok(Json(Deleted::new(name, "mcp_server.deleted")))
}

/// `POST /v1/mcp/servers/{name}/restart`: a fresh client on this replica.
pub async fn restart(
    State(app): State<Arc<App>>,
    caller: Caller,
    client: ClientIp,
    Path(name): Path<String>,
) -> Result<Json<McpServerView>, ApiError> {
    let view = app.mcp.restart(&name).await?;
    audit(&app, &caller, client, &name, "restarted".into()).await;
    Ok(Json(view))
}
