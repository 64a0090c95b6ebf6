//! `/v1/sessions`: list (filters, text search, cursor pagination, newest
//! first), get (metadata + messages with offset/limit), export (JSONL),
//! rename/archive, per-session settings (model, reasoning effort, permission
//! mode), delete (log and metadata; idempotent), compact now.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;

use super::agent_scope::AgentFilter;
use super::body::{JsonObject, query_number, typed};
use super::error::ApiError;
use super::owned::SessionId;
use super::query::Params;
use super::ui_bodies::{CompactionReport, Deleted, SessionDetail, SessionPage};
use crate::agents::registry::mode_name;
use crate::app::App;
use crate::config::PermissionMode;
use crate::sessions::{ListFilter, ReasoningEffort, SessionMeta, SessionSettings, Status, decode_cursor};

const MAX_LIMIT: usize = 200;

fn status(text: &str) -> Result<Status, ApiError> {
    match text {
        "active" => Ok(Status::Active),
        "archived" => Ok(Status::Archived),
        _ => Err(ApiError::bad_request(
            "status: must be \"active\" or \"archived\"",
            Some("status".into()),
        )),
    }
}

pub async fn list(
    State(app): State<Arc<App>>,
    AgentFilter(agent): AgentFilter,
    Params(params): Params,
) -> Result<Json<SessionPage>, ApiError> {
    let cursor = params.get("cursor").cloned();
    if let Some(cursor) = &cursor
        && decode_cursor(cursor).is_none()
    {
        return Err(ApiError::bad_request(
            "cursor: not a cursor this API returned",
            Some("cursor".into()),
        ));
    }
    let updated_since = params.get("updated_since").cloned();
    if let Some(since) = &updated_since
        && humantime::parse_rfc3339_weak(since).is_err()
    {
        return Err(ApiError::bad_request(
            "updated_since: not an RFC 3339 time",
            Some("updated_since".into()),
        ));
    }
    let filter = ListFilter {
        agent: agent.map(|a| a.into_string()),
        status: params.get("status").map(|s| status(s)).transpose()?,
        source: params.get("source").cloned(),
        updated_since,
        query: params.get("q").filter(|q| !q.trim().is_empty()).cloned(),
        limit: query_number(&params, "limit", 50, MAX_LIMIT)?.max(1),
        cursor,
    };
    let (data, next_cursor) = app.sessions.list(&filter).await?;
    Ok(Json(SessionPage {
        object: "list",
        data,
        has_more: next_cursor.is_some(),
        next_cursor,
    }))
}

pub async fn get(
    State(app): State<Arc<App>>,
    SessionId(id): SessionId,
    Params(params): Params,
) -> Result<Json<SessionDetail>, ApiError> {
    let offset = query_number(&params, "offset", 0, usize::MAX)?;
    let limit = query_number(&params, "limit", 100, 1000)?;
    let session = app.sessions.get(&id).await?;
    let messages = app.sessions.messages(&session).await?;
    let total = messages.len();
    let page: Vec<_> = messages.into_iter().skip(offset).take(limit).collect();
    Ok(Json(SessionDetail {
        session,
        object: "session",
        messages: page,
        total_messages: total,
    }))
}

pub async fn export(State(app): State<Arc<App>>, SessionId(id): SessionId) -> Result<Response, ApiError> {
    let session = app.sessions.get(&id).await?;
    let messages = app.sessions.messages(&session).await?;
    let mut jsonl = Vec::new();
    for message in &messages {
        if serde_json::to_writer(&mut jsonl, message).is_ok() {
            jsonl.push(b'\n');
        }
    }
    let disposition = format!("attachment; filename=\"session-{}.jsonl\"", session.id);
    let mut response = jsonl.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson"),
    );
    if let Ok(value) = HeaderValue::from_str(&disposition) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    Ok(response)
}

#[derive(Deserialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(optional_fields))]
#[cfg_attr(test, ts(rename = "SessionPatch"))]
#[schemars(rename = "SessionPatch")]
#[serde(deny_unknown_fields)]
pub(super) struct Patch {
    title: Option<String>,
    status: Option<Status>,
    settings: Option<SettingsPatch>,
}

/// A change of the session's settings: an absent field is kept, `null`
/// clears it (back to the agent's), a value sets it.
#[derive(Deserialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(optional_fields))]
#[cfg_attr(test, ts(rename = "SessionSettingsPatch"))]
#[serde(deny_unknown_fields)]
pub(super) struct SettingsPatch {
    #[serde(default, deserialize_with = "present")]
    model: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    reasoning_effort: Option<Option<ReasoningEffort>>,
    #[serde(default, deserialize_with = "present")]
    #[cfg_attr(
        test,
        ts(optional = nullable, type = "\"safe\" | \"ask\" | \"allow-all\" | null")
    )]
    permission_mode: Option<Option<PermissionMode>>,
}

/// A field that is present (`null` included): `Some(None)` for `null`.
fn present<'de, T: Deserialize<'de>, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(deserializer).map(Some)
}

/// The session's settings with the change applied, once the model routes
/// and the mode is not above the agent's own.
async fn changed_settings(
    app: &App,
    session: &SessionMeta,
    change: SettingsPatch,
) -> Result<SessionSettings, ApiError> {
    let mut settings = session.settings.clone();
    if let Some(model) = change.model {
        if let Some(model) = &model
            && let Err(err) = app.router.resolve(model)
        {
            return Err(ApiError::bad_request(
                format!(
                    "settings.model: {model:?} cannot be routed ({err}); GET /v1/models lists the models"
                ),
                Some("settings.model".into()),
            ));
        }
        settings.model = model;
    }
    if let Some(effort) = change.reasoning_effort {
        settings.reasoning_effort = effort;
    }
    if let Some(mode) = change.permission_mode {
        if let Some(mode) = mode {
            let agent = app.agents.registry.get(&session.agent_id).await?.ok_or_else(|| {
                ApiError::bad_request(
                    format!(
                        "settings.permission_mode: the session's agent {:?} no longer exists",
                        session.agent_id
                    ),
                    Some("settings.permission_mode".into()),
                )
            })?;
            if agent.permission_mode.stricter(mode) != mode {
                return Err(ApiError::bad_request(
                    format!(
                        "settings.permission_mode: {:?} is above the agent's own {:?}",
                        mode_name(mode),
                        mode_name(agent.permission_mode)
                    ),
                    Some("settings.permission_mode".into()),
                ));
            }
        }
        settings.permission_mode = mode;
    }
    Ok(settings)
}

pub async fn patch(
    State(app): State<Arc<App>>,
    SessionId(id): SessionId,
    JsonObject(body): JsonObject,
) -> Result<Json<Value>, ApiError> {
    let patch: Patch = typed(&body)?;
    if let Some(title) = &patch.title
        && (title.trim().is_empty() || title.chars().count() > 200)
    {
        return Err(ApiError::bad_request(
            "title: must be 1 to 200 characters",
            Some("title".into()),
        ));
    }
    // Checked before anything changes: a refused setting leaves the title too.
    let settings = match patch.settings {
        Some(change) => Some(changed_settings(&app, &app.sessions.get(&id).await?, change).await?),
        None => None,
    };
    let mut session = app
        .sessions
        .update(&id, patch.title.as_deref(), patch.status)
        .await?;
    if let Some(settings) = settings {
        session = app.sessions.set_settings(&id, &settings).await?;
    }
    Ok(Json(serde_json::to_value(session).unwrap_or_default()))
}

pub async fn delete(
    State(app): State<Arc<App>>,
    SessionId(id): SessionId,
) -> Result<Json<Deleted>, ApiError> {
    app.sessions.delete(&id).await?;
    Ok(Json(Deleted::new(id, "session.deleted")))
}

/// Compacts the session now: a memory flush, then its older turns become a
/// summary (the log keeps them). Short sessions are left as they are.
pub async fn compact(
    State(app): State<Arc<App>>,
    SessionId(id): SessionId,
) -> Result<Json<CompactionReport>, ApiError> {
    let session = app.sessions.get(&id).await?;
    let compacted = app.agents.compact_session(&session).await?;
    Ok(Json(match compacted {
        Some(done) => CompactionReport {
            compacted: true,
            turns: done.turns,
            before_tokens: done.before_tokens,
            after_tokens: done.after_tokens,
            fallback: done.fallback,
            notice: Some(done.notice()),
        },
        None => CompactionReport::default(),
    }))
}
