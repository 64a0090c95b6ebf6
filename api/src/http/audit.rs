//! `GET /v1/audit` (admin scope): the audit log, newest first; `limit`
//! (1 to 1000, default 100).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;

use super::error::ApiError;
use super::query::Params;
use super::ui_bodies::List;
use crate::app::App;
use crate::audit::{AuditEvent, MAX_LIMIT};

const DEFAULT_LIMIT: usize = 100;

pub async fn list(
    State(app): State<Arc<App>>,
    Params(params): Params,
) -> Result<Json<List<AuditEvent>>, ApiError> {
    let limit = match params.get("limit") {
        None => DEFAULT_LIMIT,
        Some(text) => match text.trim().parse::<usize>() {
            Ok(n) if (1..=MAX_LIMIT).contains(&n) => n,
            _ => {
                return Err(ApiError::bad_request(
                    format!("limit: must be a whole number from 1 to {MAX_LIMIT}, not {text:?}"),
                    Some("limit".into()),
                ));
            }
        },
    };
    Ok(Json(List::new(crate::audit::recent(&app.db, limit).await?)))
}
