//! `/v1/memory`: the memory files (list, read, write, delete), notes appended
//! to today's log or MEMORY.md, search, index status and an on-demand sync.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::body::{JsonObject, TextDocument, query_number, typed};
use super::error::ApiError;
use super::views::{List, MemoryFileDeleted};
use crate::agents::MAIN as DEFAULT_AGENT;
use crate::app::App;
use crate::memory::{FileInfo, Mode, NoteTarget, SearchResults, Status, SyncReport, WriteOutcome};

const MAX_RESULTS: usize = 100;

fn agent_param(params: &HashMap<String, String>) -> &str {
    params
        .get("agent")
        .map(String::as_str)
        .filter(|a| !a.is_empty())
        .unwrap_or(DEFAULT_AGENT)
}

pub async fn list_files(
    State(app): State<Arc<App>>,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Json<List<FileInfo>>, ApiError> {
    let files = app.memory.list_files(agent_param(&params)).await?;
    Ok(Json(List::new(files)))
}

/// JSON by default; the raw text when the client asks for `text/markdown` or `text/plain`.
pub async fn read_file(
    State(app): State<Arc<App>>,
    Path((agent, path)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let file = app.memory.read_file(&agent, &path).await?;
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
    Path((agent, path)): Path<(String, String)>,
    headers: HeaderMap,
    TextDocument(content): TextDocument,
) -> Result<Json<WriteOutcome>, ApiError> {
    let if_match = headers
        .get(header::IF_MATCH)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().trim_start_matches("W/").trim_matches('"').to_string());
    let outcome = app.memory.write_file(&agent, &path, content, if_match).await?;
    Ok(Json(outcome))
}

pub async fn delete_file(
    State(app): State<Arc<App>>,
    Path((agent, path)): Path<(String, String)>,
) -> Result<Json<MemoryFileDeleted>, ApiError> {
    app.memory.delete_file(&agent, &path).await?;
    Ok(Json(MemoryFileDeleted {
        agent,
        path,
        deleted: true,
    }))
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(optional_fields))]
#[serde(deny_unknown_fields)]
pub(super) struct NoteRequest {
    agent: Option<String>,
    content: String,
    /// `daily` (default) or `memory`.
    target: Option<String>,
}

/// Appends a note to today's daily log (default) or to MEMORY.md.
pub async fn append_note(
    State(app): State<Arc<App>>,
    JsonObject(body): JsonObject,
) -> Result<Json<WriteOutcome>, ApiError> {
    let request: NoteRequest = typed(&body)?;
    let agent = request.agent.as_deref().unwrap_or(DEFAULT_AGENT);
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
    Query(params): Query<HashMap<String, String>>,
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
    let results = app
        .memory
        .search(agent_param(&params), query, limit, mode)
        .await?;
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
