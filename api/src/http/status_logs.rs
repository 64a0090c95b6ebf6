//! What the control UI reads about the running gateway: `/v1/status`
//! (version, uptime, counters) and `/v1/logs` (recent lines, or a live SSE tail
//! with `?follow=true`).

use std::convert::Infallible;
use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::error::ApiError;
use super::query::Params;
use super::ui_bodies::{GatewayStatus, List};
use crate::app::App;
use crate::observability::tail::{LogLine, tail};

pub async fn status(State(app): State<Arc<App>>) -> Json<GatewayStatus> {
    Json(GatewayStatus {
        version: env!("CARGO_PKG_VERSION"),
        uptime_seconds: app.started.elapsed().as_secs(),
        counters: app.metrics.counters(),
        plugins: app.plugins.statuses(),
    })
}

const LEVELS: &[&str] = &["error", "warn", "info", "debug", "trace"];

/// A line passes when it is at `level` or more severe and contains `q`.
fn passes(line: &LogLine, level: usize, q: Option<&str>) -> bool {
    let rank = LEVELS
        .iter()
        .position(|l| *l == line.level)
        .unwrap_or(LEVELS.len());
    rank <= level
        && q.is_none_or(|q| {
            let q = q.to_lowercase();
            line.message.to_lowercase().contains(&q) || line.target.to_lowercase().contains(&q)
        })
}

pub async fn logs(Params(params): Params) -> Result<Response, ApiError> {
    let level = match params.get("level").map(String::as_str) {
        None | Some("") => 2,
        Some(name) => LEVELS.iter().position(|l| *l == name).ok_or_else(|| {
            ApiError::bad_request(
                format!("level: {name:?} is not one of {}", LEVELS.join(", ")),
                Some("level".into()),
            )
        })?,
    };
    let q = params.get("q").filter(|q| !q.is_empty()).cloned();
    let recent: Vec<LogLine> = tail()
        .recent()
        .into_iter()
        .filter(|l| passes(l, level, q.as_deref()))
        .collect();
    if params.get("follow").map(String::as_str) != Some("true") {
        let data = recent.iter().rev().take(500).rev().collect::<Vec<_>>();
        return Ok(Json(List::new(data)).into_response());
    }
    let mut live = tail().follow();
    let stream = async_stream::stream! {
        for line in recent.into_iter().rev().take(200).rev() {
            yield Ok::<_, Infallible>(super::sse::json(&json!(line)));
        }
        loop {
            match live.recv().await {
                Ok(line) if passes(&line, level, q.as_deref()) => {
                    yield Ok(super::sse::json(&json!(line)));
                }
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(_) => break,
            }
        }
    };
    Ok(super::sse::response(Body::from_stream(stream)))
}
