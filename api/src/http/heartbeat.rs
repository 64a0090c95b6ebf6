//! `POST /v1/orchestration/heartbeat` (admin): one turn of the control loop,
//! for an outside cron on deployments that keep workers off (see
//! `orchestration::heartbeat`).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;

use super::error::ApiError;
use super::missions::orchestrator;
use crate::app::App;
use crate::orchestration::HeartbeatReport;

pub async fn heartbeat(State(app): State<Arc<App>>) -> Result<Json<HeartbeatReport>, ApiError> {
    let orch = orchestrator(&app)?;
    Ok(Json(orch.heartbeat().await?))
}
