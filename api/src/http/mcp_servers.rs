//! `GET /v1/mcp/servers`: each configured MCP server's client on this
//! replica: state, restarts, last error, process and tools.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;

use super::views::List;
use crate::app::App;
use crate::mcp_client::McpServerView;

pub async fn list(State(app): State<Arc<App>>) -> Json<List<McpServerView>> {
    Json(List::new(app.mcp.views()))
}
