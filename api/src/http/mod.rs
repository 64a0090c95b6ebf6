//! The axum application: routes in tiers by who they admit ([`Access`]), the
//! auth and request-context middleware, and OpenAI-shaped errors for
//! everything that goes wrong (unknown routes, wrong methods, oversized or
//! malformed bodies). Handlers are thin.

mod agent_chat;
mod agent_scope;
mod agents;
mod answer;
mod audit;
mod body;
mod chat;
mod chat_session;
mod client;
mod control;
mod edge;
mod embeddings;
mod error;
mod health;
mod heartbeat;
mod inbound_chat;
mod keys;
mod knowledge;
mod login;
mod mcp;
mod mcp_oauth;
mod mcp_servers;
mod memory;
mod messages;
mod middleware;
mod missions;
mod models;
mod notifications;
mod openapi;
mod owned;
mod providers;
mod query;
mod request_context;
mod responses;
mod run_events;
mod runs;
mod sessions;
mod skills;
mod sse;
mod status_logs;
mod subscriptions;
mod tasks;
#[cfg(test)]
mod ts_types;
mod ui;
mod ui_bodies;
mod ui_headers;
mod ui_sessions;
mod usage;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{MethodRouter, delete, get, post, put};
use tower_sessions_surrealdb_store::SurrealSessionStore;

pub use error::ApiError;

use crate::app::App;
use crate::storage::Client;

/// Who a route admits, beyond a valid key (or the UI's signed-in session,
/// or anyone on a key-less gateway, which `edge` keeps to loopback pages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone: `/health` (status only without a key), the login routes.
    Open,
    /// Admin keys and the owner's UI session: keys, providers, policy,
    /// approvals, an agent's trust and reviews.
    Admin,
    /// Any key not scoped to agents: what spans every agent.
    Owner,
    /// Any key, one scoped to agents too: each handler takes its agent
    /// through an `agent_scope` or `owned` extractor, which checks it.
    Agent,
}

/// Routes as they are added, with their paths kept for the tests that walk every route.
struct Table {
    access: Access,
    router: Router<Arc<App>>,
    paths: Vec<&'static str>,
}

impl Table {
    fn new(access: Access) -> Self {
        Self {
            access,
            router: Router::new(),
            paths: Vec::new(),
        }
    }

    fn route(mut self, path: &'static str, methods: MethodRouter<Arc<App>>) -> Self {
        self.router = self.router.route(path, methods);
        self.paths.push(path);
        self
    }
}

/// Every route's path and who it admits (for tests that walk them all).
pub fn routes() -> Vec<(&'static str, Access)> {
    let Tables {
        open,
        admin,
        owner,
        agent,
        mcp,
        messages,
    } = tables();
    [open, admin, owner, agent, mcp, messages]
        .into_iter()
        .flat_map(|table| {
            let access = table.access;
            table.paths.into_iter().map(move |path| (path, access))
        })
        .collect()
}

struct Tables {
    open: Table,
    admin: Table,
    owner: Table,
    agent: Table,
    /// `/mcp` (`Access::Agent`), behind the old MCP page's redirect for browsers.
    mcp: Table,
    /// The Anthropic-shaped routes (`Access::Agent`), which answer errors in their own shape.
    messages: Table,
}

fn tables() -> Tables {
    let open = Table::new(Access::Open)
        .route("/health", get(health::health))
        .route("/openapi.json", get(openapi::serve))
        .route("/auth/login", post(login::login))
        .route("/auth/logout", post(login::logout))
        .route("/auth/me", get(login::me))
        // The browser arrives from the authorization server: its one-time state admits it.
        .route(mcp_oauth::CALLBACK_PATH, get(mcp_oauth::callback));
    let admin = Table::new(Access::Admin)
        .route("/v1/keys", get(keys::list).post(keys::create))
        .route("/v1/keys/{id}", delete(keys::revoke))
        .route("/v1/audit", get(audit::list))
        // Provider addresses and the log tail are for whoever runs the gateway.
        .route("/v1/providers", get(providers::list).post(providers::create))
        .route(
            "/v1/providers/{name}",
            get(providers::get)
                .patch(providers::patch)
                .delete(providers::delete),
        )
        .route("/v1/providers/{name}/test", post(providers::test))
        .route(
            "/v1/providers/{name}/refresh-models",
            post(providers::refresh_models),
        )
        .route("/v1/aliases", get(providers::list_aliases))
        .route(
            "/v1/aliases/{name}",
            put(providers::put_alias).delete(providers::delete_alias),
        )
        .route("/v1/subscriptions", get(subscriptions::list))
        .route(
            "/v1/subscriptions/{name}/login",
            get(subscriptions::login_state)
                .post(subscriptions::start_login)
                .delete(subscriptions::cancel_login),
        )
        .route(
            "/v1/subscriptions/{name}/login/code",
            post(subscriptions::login_code),
        )
        .route("/v1/logs", get(status_logs::logs))
        // MCP servers: their commands, URLs and the names of their secrets.
        .route(
            "/v1/mcp/servers",
            get(mcp_servers::list).post(mcp_servers::create),
        )
        .route(
            "/v1/mcp/servers/{name}",
            get(mcp_servers::get)
                .patch(mcp_servers::patch)
                .delete(mcp_servers::delete),
        )
        .route("/v1/mcp/servers/{name}/restart", post(mcp_servers::restart))
        .route("/v1/mcp/servers/{name}/oauth/start", post(mcp_oauth::start))
        // The loop's rules and who is trusted with what.
        .route("/v1/policy", get(control::policies))
        .route(
            "/v1/policy/{key}",
            get(control::policy)
                .put(control::set_policy)
                .delete(control::delete_policy),
        )
        .route(
            "/v1/triggers",
            get(control::triggers).post(control::create_trigger),
        )
        .route(
            "/v1/triggers/{id}",
            put(control::update_trigger).delete(control::delete_trigger),
        )
        .route("/v1/agents/{agent}/trust", put(control::set_trust))
        .route(
            "/v1/agents/{agent}/reviews",
            get(control::reviews).post(control::review),
        )
        .route("/v1/proposals/{id}/approve", post(missions::approve))
        .route("/v1/proposals/{id}/reject", post(missions::reject))
        .route("/v1/orchestration/heartbeat", post(heartbeat::heartbeat))
        .route("/v1/knowledge", get(knowledge::sources))
        // A pending tool call runs once someone with the owner's authority says so.
        .route("/v1/approvals/{id}", post(agents::decide));
    let owner = Table::new(Access::Owner)
        .route("/v1/embeddings", post(embeddings::create_embeddings))
        .route("/v1/memory/status", get(memory::status))
        .route("/v1/memory/sync", post(memory::sync))
        .route("/v1/proposals", get(missions::proposals).post(missions::propose))
        .route("/v1/proposals/{id}", get(missions::proposal))
        .route("/v1/missions", get(missions::missions))
        .route("/v1/missions/{id}", get(missions::mission))
        .route("/v1/missions/{id}/cancel", post(missions::cancel))
        .route("/v1/steps", get(missions::steps))
        .route("/v1/events", get(control::events))
        .route("/v1/events/stream", get(control::stream))
        .route("/v1/agents/standing", get(control::standing))
        .route("/v1/skills", get(skills::list))
        .route(
            "/v1/skills/{scope}/{name}",
            get(skills::get).put(skills::put).delete(skills::delete),
        )
        .route(
            "/v1/skills/{scope}/{name}/files/{*file}",
            get(skills::read_file).put(skills::write_file),
        )
        .route("/v1/agents", get(agents::list).post(agents::create))
        .route("/v1/approvals", get(agents::approvals))
        .route("/v1/notifications", get(notifications::list))
        .route("/v1/notifications/read", post(notifications::mark_read))
        .route("/v1/notifications/stream", get(notifications::stream))
        .route("/v1/status", get(status_logs::status))
        .route("/v1/usage", get(usage::report))
        .route("/v1/usage/limits", get(usage::limits))
        .route("/metrics", get(health::metrics));
    let agent = Table::new(Access::Agent)
        .route("/v1/models", get(models::list_models))
        .route("/v1/chat/completions", post(chat::chat_completions))
        .route("/v1/responses", post(responses::create))
        .route(
            "/v1/responses/{id}",
            get(responses::get).delete(responses::delete),
        )
        .route("/v1/responses/{id}/input_items", get(responses::input_items))
        .route("/v1/sessions", get(sessions::list))
        .route(
            "/v1/sessions/{id}",
            get(sessions::get).patch(sessions::patch).delete(sessions::delete),
        )
        .route("/v1/sessions/{id}/export", get(sessions::export))
        .route("/v1/sessions/{id}/compact", post(sessions::compact))
        .route("/v1/memory", post(memory::append_note))
        .route("/v1/memory/files", get(memory::list_files))
        .route(
            "/v1/memory/files/{agent}/{*path}",
            get(memory::read_file)
                .put(memory::write_file)
                .delete(memory::delete_file),
        )
        .route("/v1/memory/search", get(memory::search))
        .route("/v1/agents/{agent}", get(agents::get).patch(agents::patch))
        .route(
            "/v1/agents/{agent}/files/{name}",
            get(agents::read_file).put(agents::write_file),
        )
        .route("/v1/inbox", get(agents::inbox))
        .route("/v1/tasks", get(tasks::list).post(tasks::create))
        .route(
            "/v1/tasks/{id}",
            get(tasks::get).patch(tasks::patch).delete(tasks::delete),
        )
        .route("/v1/tasks/{id}/run", post(tasks::run_now))
        .route("/v1/tasks/{id}/runs", get(tasks::runs))
        .route("/v1/runs", get(runs::list))
        .route("/v1/runs/{id}", get(runs::get))
        .route("/v1/runs/{id}/cancel", post(runs::cancel))
        .route("/v1/runs/{id}/events", get(runs::events));
    // Its own table: a browser's bookmark of the old MCP page (`ui::old_mcp_page`) needs no key.
    let mcp = Table::new(Access::Agent).route(
        "/mcp",
        post(mcp::post).get(mcp::not_offered).delete(mcp::not_offered),
    );
    Tables {
        open,
        admin,
        owner,
        agent,
        mcp,
        messages: messages::table(),
    }
}

/// The whole HTTP surface: the route tables, each behind its access check.
pub fn router(app: Arc<App>) -> Router {
    let Tables {
        open,
        admin,
        owner,
        agent,
        mcp,
        messages,
    } = tables();
    let protected = Router::new()
        .merge(
            admin
                .router
                .route_layer(axum::middleware::from_fn(middleware::require_admin)),
        )
        .merge(
            owner
                .router
                .route_layer(axum::middleware::from_fn(middleware::require_unscoped)),
        )
        .merge(agent.router)
        .method_not_allowed_fallback(health::method_not_allowed)
        .route_layer(middleware::require_api_key(app.clone()));
    let mcp_endpoint = mcp
        .router
        .method_not_allowed_fallback(health::method_not_allowed)
        .route_layer(middleware::require_api_key(app.clone()))
        // Outside the auth: a browser's bookmark of the old MCP page needs no key.
        .route_layer(axum::middleware::from_fn(ui::old_mcp_page));
    let router = open
        .router
        .merge(protected)
        .merge(mcp_endpoint)
        .merge(messages::with_layers(messages.router, app.clone()))
        .fallback(ui::fallback);
    match app.db.client() {
        Client::Any(db) => with_request_layers(router, app, SurrealSessionStore::new(db, UI_SESSIONS.into())),
        Client::Embedded(db) => {
            with_request_layers(router, app, SurrealSessionStore::new(db, UI_SESSIONS.into()))
        }
    }
}

/// The table of the UI's cookie sessions.
const UI_SESSIONS: &str = "ui_session";

/// What every request goes through, stacked into one layer so each route is
/// wrapped (and boxed) once, outermost first: its context (id, span,
/// metrics), the panic catcher, the body limit, the UI's login sessions,
/// kept in SurrealDB (whichever client it is), for the requests that can use
/// one (`ui_sessions`), a key-less gateway's Host and Origin rules (`edge`),
/// and CORS for the configured origins (`gateway.cors`).
fn with_request_layers<S>(router: Router<Arc<App>>, app: Arc<App>, store: S) -> Router
where
    S: tower_sessions::SessionStore + Clone,
{
    let sessions = tower_sessions::SessionManagerLayer::new(store)
        .with_name("onyx_session")
        .with_http_only(true)
        .with_same_site(tower_sessions::cookie::SameSite::Strict)
        .with_secure(false)
        .with_expiry(tower_sessions::Expiry::OnInactivity(
            tower_sessions::cookie::time::Duration::days(7),
        ));
    let per_request = tower::ServiceBuilder::new()
        .layer(request_context::RequestContextLayer::new(app.clone()))
        // Last line of defence: a bug must still answer in OpenAI's shape, not drop the connection.
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(
            health::panic_response,
        ))
        .layer(DefaultBodyLimit::max(app.max_body_bytes))
        .layer(ui_sessions::UiSessionsLayer::new(sessions))
        .layer(edge::KeylessEdgeLayer::new(app.clone()))
        // Inside the edge: a key-less gateway refuses other origins, preflights too.
        .option_layer(app.cors.as_ref().map(cors_layer));
    router.layer(per_request).with_state(app)
}

/// `gateway.cors`: preflights from the configured origins answered, and
/// their requests' answers marked readable, before any auth (a preflight
/// carries no key; the request that follows must). Never with credentials:
/// a page sends its key in `Authorization`, and the UI's cookie stays its own.
fn cors_layer(cors: &crate::config::Cors) -> tower_http::cors::CorsLayer {
    use axum::http::{HeaderName, Method};
    use tower_http::cors::{AllowHeaders, AllowOrigin, CorsLayer};
    CorsLayer::new()
        .allow_origin(AllowOrigin::list(cors.origins.iter().cloned()))
        .allow_methods([
            Method::GET,
            Method::POST,
            Method::PUT,
            Method::PATCH,
            Method::DELETE,
        ])
        // The SDKs send headers of their own (`x-stainless-*`, `anthropic-version`).
        .allow_headers(AllowHeaders::mirror_request())
        .expose_headers(
            [
                "x-onyx-session-id",
                "x-onyx-run-id",
                "x-onyx-session-history",
                "x-onyx-tools-left-out",
                "x-onyx-cost",
                "x-request-id",
            ]
            .map(HeaderName::from_static),
        )
        .max_age(std::time::Duration::from_secs(600))
}
