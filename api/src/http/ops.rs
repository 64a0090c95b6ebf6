//! Operational routes: `/health` (open), `/metrics`, and the JSON answers for
//! unknown routes and wrong methods.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, Uri, header};
use axum::response::IntoResponse;
use serde_json::json;

use super::error::ApiError;
use super::views::Health;
use crate::app::App;
use crate::health::State as DepState;

pub async fn health(State(app): State<Arc<App>>) -> impl IntoResponse {
    let stores = crate::health::Stores {
        db: &app.db,
        objects: app.objects.as_ref(),
        parked_sessions: app.sessions.pending_count(),
    };
    let mut dependencies = app.health.dependencies(&app.router, stores, &app.memory).await;
    dependencies.extend(app.plugins.health());
    let mcp = app.mcp.views();
    let degraded = dependencies.iter().any(|d| d.status == DepState::Down)
        || mcp
            .iter()
            .any(|s| s.state == crate::mcp_client::ServerState::Failed);
    Json(Health {
        status: if degraded { "degraded" } else { "ok" },
        version: env!("CARGO_PKG_VERSION"),
        uptime_seconds: app.started.elapsed().as_secs(),
        dependencies,
        circuits: app.router.circuits(),
        exec: exec_health(app.agents.tool_settings()),
        mcp,
    })
}

fn exec_health(tools: &crate::config::ToolsConfig) -> super::views::ExecHealth {
    let support = crate::sandbox::support();
    super::views::ExecHealth {
        confined: support.confined(),
        network_cut: !tools.exec_sandbox.network && support.network_namespace,
        require_sandbox: tools.exec_sandbox.require,
        detail: support.describe(),
        confinement: support,
    }
}

pub async fn metrics(State(app): State<Arc<App>>) -> impl IntoResponse {
    app.router.export_circuits();
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        app.metrics.render(),
    )
}

/// Answers a request whose handler panicked (logged; the client sees no details).
pub fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> axum::response::Response {
    tracing::error!("a request handler panicked");
    let body =
        json!({"error": {"message": "internal error", "type": "server_error", "param": null, "code": null}});
    (StatusCode::INTERNAL_SERVER_ERROR, Json(body)).into_response()
}

pub async fn not_found(uri: Uri) -> ApiError {
    ApiError::NotFound {
        message: format!("no route {}", uri.path()),
        code: "unknown_route",
    }
}

pub async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}
