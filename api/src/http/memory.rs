//! `/v1/memory`: the memory files (list, read, write, delete), notes appended
//! to today's log or MEMORY.md, search, index status and an on-demand sync.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::agent_scope::{AgentInBody, AgentPath, AgentQuery, CheckedAgent};
use super::body::{TextDocument, query_number};
use super::error::ApiError;
use super::middleware::CallerScope;
use super::query::Params;
use super::ui_bodies::{List, MemoryFileDeleted};
use crate::app::App;
use crate::auth::Scope;
use crate::memory::paths::SHARED;
use crate::memory::{FileInfo, Mode, NoteTarget, SearchResults, Status, SyncReport, WriteOutcome};

const MAX_RESULTS: usize = 100;

/// The `{*path}` of a memory file route (its `{agent}` is taken by `AgentPath`).
#[derive(Deserialize)]
pub(super) struct FilePath {
    path: String,
}

/// A shared project's `ACCESS.md` says which agents may read and write the
/// project: only the owner's authority (an admin key, the UI) changes it.
fn may_change(scope: Scope, agent: &CheckedAgent, path: &str) -> Result<(), ApiError> {
    if agent.as_str() == SHARED && crate::memory::access::is_access_file(path) && scope != Scope::Admin {
        return Err(ApiError::Forbidden(
            "a project's ACCESS.md decides which agents reach the project: changing it needs an admin key or the UI",
        ));
    }
    Ok(())
}

pub async fn list_files(
    State(app): State<Arc<App>>,
    AgentQuery(agent): AgentQuery,
) -> Result<Json<List<FileInfo>>, ApiError> {
    let files = app.memory.list_files(agent.as_str()).await?;
    Ok(Json(List::new(files)))
}

/// JSON by default; the raw text when the client asks for `text/markdown` or `text/plain`.
pub async fn read_file(
    State(app): State<Arc<App>>,
    AgentPath(agent): AgentPath,
    Path(FilePath { path }): Path<FilePath>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let file = app.memory.read_file(agent.as_str(), &path).await?;
    let etag = HeaderValue::from_str(&format!("\"{}\"", file.etag)).ok();
    let wants_text = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/markdown") || v.contains("text/plain"));
    let mut response = if wants_text {
        (
            [(header::CONTENT_TYPE, "text/markdown; charset=utf-8")],
            file.content,
        )
            .into_response()
    } else {
        Json(file).into_response()
    };
    if let Some(etag) = etag {
        response.headers_mut().insert(header::ETAG, etag);
    }
    Ok(response)
}

/// Replaces a file; with `If-Match: "<etag>"` only if nobody changed it since.
pub async fn write_file(
    State(app): State<Arc<App>>,
    AgentPath(agent): AgentPath,
    Path(FilePath { path }): Path<FilePath>,
    CallerScope(scope): CallerScope,
    headers: HeaderMap,
    TextDocument(content): TextDocument,
) -> Result<Json<WriteOutcome>, ApiError> {
    may_change(scope, &agent, &path)?;
    let if_match = headers
        .get(header::IF_MATCH)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().trim_start_matches("W/").trim_matches('"').to_string());
    let outcome = app
        .memory
        .write_file(agent.as_str(), &path, content, if_match)
        .await?;
    Ok(Json(outcome))
}

pub async fn delete_file(
    State(app): State<Arc<App>>,
    AgentPath(agent): AgentPath,
    Path(FilePath { path }): Path<FilePath>,
    CallerScope(scope): CallerScope,
) -> Result<Json<MemoryFileDeleted>, ApiError> {
    may_change(scope, &agent, &path)?;
    app.memory.delete_file(agent.as_str(), &path).await?;
    Ok(Json(MemoryFileDeleted {
        agent: agent.into_string(),
        path,
        deleted: true,
    }))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(optional_fields))]
#[serde(deny_unknown_fields)]
pub(super) struct NoteRequest {
    // The agent (`main` when absent), read and checked by `AgentInBody`.
    #[allow(dead_code)]
    agent: Option<String>,
    content: String,
    /// `daily` (default) or `memory`.
    target: Option<String>,
}

/// Appends a note to today's daily log (default) or to MEMORY.md.
pub async fn append_note(
    State(app): State<Arc<App>>,
    AgentInBody { agent, body: request }: AgentInBody<NoteRequest>,
) -> Result<Json<WriteOutcome>, ApiError> {
    let agent = agent.as_str();
    let target = match request.target.as_deref() {
        None | Some("daily") => NoteTarget::Daily(app.agents.registry.timezone_of(agent).await),
        Some("memory") => NoteTarget::Curated,
        Some(_) => {
            return Err(ApiError::bad_request(
                "target: must be \"daily\" or \"memory\"",
                Some("target".into()),
            ));
        }
    };
    let outcome = app.memory.append_note(agent, target, &request.content).await?;
    Ok(Json(outcome))
}

pub async fn search(
    State(app): State<Arc<App>>,
    AgentQuery(agent): AgentQuery,
    Params(params): Params,
) -> Result<Json<SearchResults>, ApiError> {
    let query = params
        .get("q")
        .filter(|q| !q.trim().is_empty())
        .ok_or_else(|| ApiError::bad_request("q: give a search query", Some("q".into())))?;
    let mode = match params.get("mode") {
        None => Mode::Hybrid,
        Some(text) => Mode::parse(text).ok_or_else(|| {
            ApiError::bad_request(
                "mode: must be \"hybrid\", \"vector\" or \"text\"",
                Some("mode".into()),
            )
        })?,
    };
    let limit = query_number(&params, "limit", 10, MAX_RESULTS)?.max(1);
    let results = app.memory.search(agent.as_str(), query, limit, mode).await?;
    Ok(Json(results))
}

pub async fn status(State(app): State<Arc<App>>) -> Result<Json<Status>, ApiError> {
    Ok(Json(app.memory.status().await?))
}

/// Compares the files with the index now instead of at the next interval.
pub async fn sync(State(app): State<Arc<App>>) -> Result<Json<SyncReport>, ApiError> {
    let report = app.memory.sync_files(&|_, _| {}).await?;
    Ok(Json(report))
}
