//! `/v1/notifications`: what agents told the owner outside a watched turn
//! (see `crate::notifications`): the newest with the unread count, marking
//! them read, and `GET /v1/notifications/stream`, server-sent events the UI
//! follows on every page (each event's `id` resumes it: `Last-Event-ID`).
//! Owner-tier routes: a key scoped to agents never reads the owner's feed.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use futures::StreamExt;
use serde::{Deserialize, Serialize};

use super::body::{JsonObject, query_number, typed};
use super::error::ApiError;
use super::query::Params;
use crate::app::App;
use crate::notifications::Notification;

/// How often an idle stream sends a comment line.
const MAX_LIMIT: usize = crate::notifications::KEEP;

/// `GET /v1/notifications`: newest first, with how many are unread.
#[derive(Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct NotificationList {
    pub object: &'static str,
    pub data: Vec<Notification>,
    pub unread: usize,
}

/// `POST /v1/notifications/read`: `ids` to mark, or every one without it.
#[derive(Deserialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(optional_fields))]
#[serde(deny_unknown_fields)]
pub(super) struct MarkRead {
    ids: Option<Vec<String>>,
}

#[derive(Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct MarkedRead {
    pub marked: usize,
    pub unread: usize,
}

pub async fn list(
    State(app): State<Arc<App>>,
    Params(params): Params,
) -> Result<Json<NotificationList>, ApiError> {
    let unread_only = match params.get("unread").map(String::as_str) {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => {
            return Err(ApiError::bad_request(
                "unread: must be \"true\" or \"false\"",
                Some("unread".into()),
            ));
        }
    };
    let limit = query_number(&params, "limit", 50, MAX_LIMIT)?.max(1);
    Ok(Json(NotificationList {
        object: "list",
        data: app.notifications.list(unread_only, limit).await?,
        unread: app.notifications.unread().await?,
    }))
}

pub async fn mark_read(
    State(app): State<Arc<App>>,
    JsonObject(body): JsonObject,
) -> Result<Json<MarkedRead>, ApiError> {
    let MarkRead { ids } = typed(&body)?;
    if let Some(ids) = &ids
        && ids.len() > MAX_LIMIT
    {
        return Err(ApiError::bad_request(
            format!("ids: at most {MAX_LIMIT} at once"),
            Some("ids".into()),
        ));
    }
    let marked = app.notifications.mark_read(ids.as_deref()).await?;
    Ok(Json(MarkedRead {
        marked,
        unread: app.notifications.unread().await?,
    }))
}

/// Where a stream starts: after `Last-Event-ID` (a reconnecting browser) or
/// `?after=`, else from now on; either must be an id this API sent.
fn resume_point(
    headers: &HeaderMap,
    params: &std::collections::HashMap<String, String>,
) -> Result<Option<String>, ApiError> {
    let (given, param) = match headers.get("last-event-id") {
        Some(value) => (
            Some(value.to_str().unwrap_or_default().trim().to_string()),
            "Last-Event-ID",
        ),
        None => (params.get("after").cloned(), "after"),
    };
    match given {
        None => Ok(None),
        Some(id) => match uuid::Uuid::parse_str(&id) {
            Ok(uuid) if uuid.get_version_num() == 7 => Ok(Some(uuid.hyphenated().to_string())),
            _ => Err(ApiError::bad_request(
                format!("{param}: not a notification id this API sent"),
                Some(param.into()),
            )),
        },
    }
}

pub async fn stream(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Params(params): Params,
) -> Result<Response, ApiError> {
    let after = resume_point(&headers, &params)?;
    let mut items = Box::pin(app.notifications.follow(after, app.shutting_down.subscribe()));
    let body = async_stream::stream! {
        yield Ok::<_, std::convert::Infallible>(super::sse::keep_alive());
        loop {
            let next = tokio::select! {
                item = items.next() => Some(item),
                () = tokio::time::sleep(super::sse::KEEP_ALIVE) => None,
            };
            match next {
                Some(Some(item)) => match serde_json::to_value(&item) {
                    Ok(value) => yield Ok(super::sse::json_with_id(&item.id, &value)),
                    Err(err) => tracing::warn!(error = %err, "a notification could not be encoded"),
                },
                // Shutdown: the stream ends and the browser reconnects elsewhere.
                Some(None) => break,
                None => yield Ok(super::sse::keep_alive()),
            }
        }
    };
    Ok(super::sse::response(Body::from_stream(body)))
}
