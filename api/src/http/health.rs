//! Operational routes: `/health` (open: its status to anyone, each
//! dependency's detail to a caller with a key, the UI's session or on a
//! key-less gateway), `/metrics`, and the JSON answers for unknown routes and
//! wrong methods.

use std::sync::Arc;

use axum::Extension;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::error::ApiError;
use super::ui_bodies::{Health, HealthSummary};
use crate::app::App;
use crate::health::State as DepState;

/// Without a key only `{"status"}`: the detail (addresses, paths, error
/// text, MCP servers' commands and tools) is for whoever runs the gateway.
pub async fn health(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    session: Option<Extension<tower_sessions::Session>>,
) -> Response {
    let session = session.map(|Extension(session)| session);
    let detailed = super::middleware::authenticated(&app, &headers, session.as_ref()).await;
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
    let status = if degraded { "degraded" } else { "ok" };
    if !detailed {
        return Json(HealthSummary { status }).into_response();
    }
    Json(Health {
        status,
        version: env!("CARGO_PKG_VERSION"),
        uptime_seconds: app.started.elapsed().as_secs(),
        dependencies,
        circuits: app.router.circuits(),
        exec: exec_health(app.agents.tool_settings()),
        mcp,
    })
    .into_response()
}

fn exec_health(tools: &crate::config::ToolsConfig) -> super::ui_bodies::ExecHealth {
    let support = crate::sandbox::support();
    super::ui_bodies::ExecHealth {
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
