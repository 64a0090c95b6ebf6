//! `GET /v1/usage` (tokens and cost per key, agent, model, provider, day or
//! session), `GET /v1/usage/limits` (budgets and what is left), and the
//! `x-onyx-cost` header of non-streamed answers. An admin key (or the UI)
//! sees everyone's usage; a chat-scope key sees only its own.

use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderValue;
use axum::response::Response;
use axum::{Extension, Json};
use chrono::{DateTime, NaiveDate, Utc};

use super::error::ApiError;
use super::query::Params;
use super::ui_bodies::List;
use crate::app::App;
use crate::auth::Scope;
use crate::providers::Attribution;
use crate::usage::{GroupBy, LimitStatus, Report, UsageQuery};

pub const COST_HEADER: &str = "x-onyx-cost";
const DEFAULT_DAYS: i64 = 30;

/// Adds `x-onyx-cost` (USD) when the answer's price is known.
pub fn with_cost(mut response: Response, cost: Option<f64>) -> Response {
    if let Some(cost) = cost
        && let Ok(value) = HeaderValue::from_str(&format!("{cost:.6}"))
    {
        response.headers_mut().insert(COST_HEADER, value);
    }
    response
}

pub async fn report(
    State(app): State<Arc<App>>,
    scope: Option<Extension<Scope>>,
    who: Option<Extension<Attribution>>,
    Params(params): Params,
) -> Result<Json<Report>, ApiError> {
    let now = crate::clock::now();
    let from = match params.get("from") {
        Some(text) => bound(text, "from", false)?,
        None => now - chrono::Duration::days(DEFAULT_DAYS),
    };
    let to = match params.get("to") {
        Some(text) => bound(text, "to", true)?,
        None => now + chrono::Duration::seconds(1),
    };
    if from >= to {
        return Err(ApiError::bad_request(
            "from: must be before `to`",
            Some("from".into()),
        ));
    }
    let group_by = match params.get("group_by").map(String::as_str) {
        None => GroupBy::Day,
        Some(text) => GroupBy::parse(text).ok_or_else(|| {
            ApiError::bad_request(
                format!("group_by: {text:?} is not one of {}", GroupBy::NAMES),
                Some("group_by".into()),
            )
        })?,
    };
    let query = UsageQuery {
        from: crate::clock::stamp(from),
        to: crate::clock::stamp(to),
        group_by,
        key_id: own_key(scope.as_deref(), who.as_deref()),
    };
    Ok(Json(app.usage.report(&query).await?))
}

pub async fn limits(
    State(app): State<Arc<App>>,
    scope: Option<Extension<Scope>>,
    who: Option<Extension<Attribution>>,
) -> Result<Json<List<LimitStatus>>, ApiError> {
    let own = own_key(scope.as_deref(), who.as_deref());
    let keys = app
        .auth
        .list()
        .await?
        .into_iter()
        .filter(|k| own.as_deref().is_none_or(|id| id == k.id))
        .filter_map(|k| k.limits.map(|l| (k.id, k.name, l)))
        .collect();
    let mut statuses = app.usage.limits_overview(keys).await?;
    if own.is_some() {
        statuses.retain(|s| s.scope.starts_with("key:"));
    }
    Ok(Json(List::new(statuses)))
}

/// A chat-scope key's own id: what it may see; `None` for admins (everything).
fn own_key(scope: Option<&Scope>, who: Option<&Attribution>) -> Option<String> {
    match scope {
        Some(Scope::Admin) => None,
        // Without a key id nothing matches: `-` is no key's id.
        _ => Some(who.and_then(|w| w.key.as_deref()).unwrap_or("-").to_string()),
    }
}

/// An RFC 3339 time or a `YYYY-MM-DD` day (a `to` day counts whole).
fn bound(text: &str, param: &str, end: bool) -> Result<DateTime<Utc>, ApiError> {
    if let Some(at) = crate::clock::parse_stamp(text) {
        return Ok(at);
    }
    let day = NaiveDate::parse_from_str(text, "%Y-%m-%d").map_err(|_| {
        ApiError::bad_request(
            format!("{param}: {text:?} is neither an RFC 3339 time nor a YYYY-MM-DD date"),
            Some(param.into()),
        )
    })?;
    let day = if end { day.succ_opt().unwrap_or(day) } else { day };
    Ok(day.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc())
}
