//! Every operation of the router: its method and path, the query parameters
//! it reads, and the Rust types of its request body and its answer. The
//! router (`http::tables`) says who may call each path; a test keeps the two
//! lists to the same paths, and the `it` suite to the same methods.

use serde_json::{Map, Value};

use super::{SchemaFn, schema_of};
use crate::agents::approvals::Approval;
use crate::agents::runs::AgentRun;
use crate::audit::AuditEvent;
use crate::chat::{ChatRequest, Completion, EmbeddingsRequest};
use crate::health::DependencyHealth;
use crate::http::ui_bodies::{
    AgentDetail, AgentView, ApprovalDecision, CompactionReport, CreatedKey, Deleted, GatewayStatus, Health,
    HealthSummary, KeyRevoked, List, Me, MemoryFileDeleted, ModelView, RunView, SessionDetail, SessionPage,
    TaskView,
};
use crate::http::{
    agents, control, keys, knowledge, login, memory as memory_routes, missions, notifications,
};
use crate::http::{providers, sessions, subscriptions};
use crate::inbox::InboxMessage;
use crate::mcp_client::McpServerView;
use crate::mcp_client::oauth::SignInStart;
use crate::memory::{FileContent, FileInfo, SearchResults, Status as MemoryStatus, SyncReport, WriteOutcome};
use crate::observability::tail::LogLine;
use crate::orchestration::trust::ReviewInput;
use crate::orchestration::{HeartbeatReport, Mission, Proposal, ReactionTrigger, Review, Step};
use crate::providers::registry::{AliasView, ProviderView};
use crate::providers::subscription::device_login::SignInView;
use crate::skills::{Skill, SkillSummary};
use crate::tasks::{NewTask, TaskPatch};
use crate::usage::{LimitStatus, Report};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Get,
    Post,
    Put,
    Patch,
    Delete,
}

/// What a request carries.
pub enum Body {
    None,
    Json(SchemaFn),
    /// A JSON body the route reads when there is one.
    OptionalJson(SchemaFn),
    /// The document itself (`text/plain` or `text/markdown`).
    Text,
}

/// What a successful request answers.
pub enum SuccessBody {
    /// JSON with this status.
    Json(u16, SchemaFn),
    /// JSON, or server-sent events when the request asks to stream.
    JsonOrStream(SchemaFn),
    EventStream,
    /// A document of this content type.
    Text(&'static str),
    /// JSON, or the file as this content type when `Accept` asks for it.
    JsonOrText(SchemaFn, &'static str),
    /// No body.
    Empty(u16),
}

pub struct Operation {
    pub verb: Verb,
    pub path: &'static str,
    pub summary: &'static str,
    /// `(name, what it does)`; every query parameter is optional.
    pub query: &'static [(&'static str, &'static str)],
    pub body: Body,
    pub answer: SuccessBody,
}

fn op(verb: Verb, path: &'static str, summary: &'static str) -> Operation {
    Operation {
        verb,
        path,
        summary,
        query: &[],
        body: Body::None,
        answer: SuccessBody::Json(200, schema_of::<Value>),
    }
}

fn get(path: &'static str, summary: &'static str) -> Operation {
    op(Verb::Get, path, summary)
}
fn post(path: &'static str, summary: &'static str) -> Operation {
    op(Verb::Post, path, summary)
}
fn put(path: &'static str, summary: &'static str) -> Operation {
    op(Verb::Put, path, summary)
}
fn patch(path: &'static str, summary: &'static str) -> Operation {
    op(Verb::Patch, path, summary)
}
fn delete(path: &'static str, summary: &'static str) -> Operation {
    op(Verb::Delete, path, summary)
}

impl Operation {
    fn query(mut self, query: &'static [(&'static str, &'static str)]) -> Self {
        self.query = query;
        self
    }
    fn takes<T: schemars::JsonSchema>(mut self) -> Self {
        self.body = Body::Json(schema_of::<T>);
        self
    }
    fn may_take<T: schemars::JsonSchema>(mut self) -> Self {
        self.body = Body::OptionalJson(schema_of::<T>);
        self
    }
    fn takes_text(mut self) -> Self {
        self.body = Body::Text;
        self
    }
    fn answers<T: schemars::JsonSchema>(mut self) -> Self {
        self.answer = SuccessBody::Json(200, schema_of::<T>);
        self
    }
    fn creates<T: schemars::JsonSchema>(mut self) -> Self {
        self.answer = SuccessBody::Json(201, schema_of::<T>);
        self
    }
    fn accepts<T: schemars::JsonSchema>(mut self) -> Self {
        self.answer = SuccessBody::Json(202, schema_of::<T>);
        self
    }
    fn answers_with(mut self, answer: SuccessBody) -> Self {
        self.answer = answer;
        self
    }
}

/// The fields Onyx reads from an OpenAI Responses or Anthropic Messages body
/// before it translates it or passes it upstream; the rest goes on as it came.
#[derive(schemars::JsonSchema)]
#[allow(dead_code)] // Described, not parsed: the handlers read these fields from the raw body.
pub struct ModelRequest {
    pub model: String,
    #[schemars(default)]
    pub stream: Option<bool>,
    #[schemars(flatten)]
    pub rest: Map<String, Value>,
}

/// An object of any fields (config-shaped bodies the handler validates as config).
type AnyObject = Map<String, Value>;

const AGENT: (&str, &str) = (
    "agent",
    "The agent (a key scoped to agents must name one of its own).",
);
const LIMIT: (&str, &str) = ("limit", "How many at most.");

fn open_routes() -> Vec<Operation> {
    vec![
        get(
            "/openapi.json",
            "This document: OpenAPI 3.1, generated from the handlers' types.",
        ),
        get(
            "/health",
            "Whether Onyx and each dependency are up (the status alone without a key).",
        )
        .answers_with(SuccessBody::Json(200, health)),
        post(
            "/auth/login",
            "The control UI's password sign-in (sets the session cookie).",
        )
        .takes::<login::Login>(),
        post("/auth/logout", "Ends the UI session."),
        get("/auth/me", "Whether this browser is signed in.").answers::<Me>(),
    ]
}

/// `/health`: the whole picture for a caller with a key, the status alone otherwise.
fn health(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let full = generator.subschema_for::<Health>();
    let summary = generator.subschema_for::<HealthSummary>();
    schemars::json_schema!({"anyOf": [full, summary]})
}

fn admin_routes() -> Vec<Operation> {
    vec![
        get("/v1/keys", "API keys (hashes are never shown).").answers::<List<crate::auth::StoredKey>>(),
        post("/v1/keys", "Creates a key; its secret is shown once.")
            .takes::<keys::Create>()
            .creates::<CreatedKey>(),
        delete("/v1/keys/{id}", "Revokes a key.").answers::<KeyRevoked>(),
        get("/v1/audit", "The audit log, newest first.")
            .query(&[LIMIT])
            .answers::<List<AuditEvent>>(),
        get("/v1/providers", "Model providers.").answers::<List<ProviderView>>(),
        post("/v1/providers", "Adds a provider (its config entry).")
            .takes::<AnyObject>()
            .creates::<ProviderView>(),
        get("/v1/providers/{name}", "One provider.").answers::<ProviderView>(),
        patch("/v1/providers/{name}", "Changes a provider's config entry.")
            .takes::<AnyObject>()
            .answers::<ProviderView>(),
        delete("/v1/providers/{name}", "Removes a provider.").answers::<Deleted>(),
        post("/v1/providers/{name}/test", "Checks that the provider answers.").answers::<DependencyHealth>(),
        post(
            "/v1/providers/{name}/refresh-models",
            "Fetches the provider's model list again.",
        )
        .answers::<List<String>>(),
        get("/v1/aliases", "Model aliases.").answers::<List<AliasView>>(),
        put("/v1/aliases/{name}", "Sets an alias's models, tried in order.")
            .takes::<providers::PutAlias>()
            .answers::<AliasView>(),
        delete("/v1/aliases/{name}", "Removes an alias.").answers::<Deleted>(),
        get("/v1/subscriptions", "Vendor subscriptions (CLI sign-ins).")
            .answers::<List<subscriptions::SubscriptionView>>(),
        get("/v1/subscriptions/{name}/login", "A sign-in in progress.").answers::<SignInView>(),
        post("/v1/subscriptions/{name}/login", "Starts a device sign-in.").accepts::<SignInView>(),
        delete("/v1/subscriptions/{name}/login", "Cancels a sign-in.").answers_with(SuccessBody::Empty(204)),
        post(
            "/v1/subscriptions/{name}/login/code",
            "Hands the sign-in the code the vendor showed.",
        )
        .takes::<subscriptions::PastedCode>()
        .answers::<SignInView>(),
        get("/v1/logs", "Recent log lines; `follow=true` streams them.")
            .query(&[
                (
                    "level",
                    "The lowest level shown (error, warn, info, debug, trace).",
                ),
                ("q", "Only lines containing this."),
                ("follow", "`true` streams new lines as server-sent events."),
            ])
            .answers_with(SuccessBody::JsonOrStream(schema_of::<List<LogLine>>)),
        get("/v1/mcp/servers", "MCP servers and their tools.").answers::<List<McpServerView>>(),
        post("/v1/mcp/servers", "Adds an MCP server (its config entry).")
            .takes::<AnyObject>()
            .creates::<McpServerView>(),
        get("/v1/mcp/servers/{name}", "One MCP server.").answers::<McpServerView>(),
        patch("/v1/mcp/servers/{name}", "Changes an MCP server's config entry.")
            .takes::<AnyObject>()
            .answers::<McpServerView>(),
        delete("/v1/mcp/servers/{name}", "Removes an MCP server.").answers::<Deleted>(),
        post("/v1/mcp/servers/{name}/restart", "Restarts an MCP server.").answers::<McpServerView>(),
        post(
            "/v1/mcp/servers/{name}/oauth/start",
            "Starts an OAuth sign-in to a remote MCP server: the authorization URL to open.",
        )
        .answers::<SignInStart>(),
        get(
            "/v1/mcp/oauth/callback",
            "Where the authorization server sends the browser back: exchanges the code (its one-time state admits it).",
        )
        .query(&[
            ("code", "The authorization code."),
            ("state", "The sign-in's one-time state."),
            ("iss", "The authorization server that answered (RFC 9207)."),
            ("error", "The authorization server's refusal."),
            ("error_description", "Its explanation."),
        ])
        .answers_with(SuccessBody::Text("text/html")),
        get("/v1/policy", "The orchestration policies."),
        get("/v1/policy/{key}", "One policy."),
        put("/v1/policy/{key}", "Sets a policy.").takes::<Value>(),
        delete("/v1/policy/{key}", "Removes a policy.").answers::<Deleted>(),
        get("/v1/triggers", "Reaction triggers.").answers::<List<ReactionTrigger>>(),
        post("/v1/triggers", "Adds a reaction trigger.")
            .takes::<control::TriggerInput>()
            .creates::<ReactionTrigger>(),
        put("/v1/triggers/{id}", "Replaces a reaction trigger.")
            .takes::<control::TriggerInput>()
            .answers::<ReactionTrigger>(),
        delete("/v1/triggers/{id}", "Removes a reaction trigger.").answers::<Deleted>(),
        put("/v1/agents/{agent}/trust", "Sets what an agent is trusted with.").takes::<AnyObject>(),
        get("/v1/agents/{agent}/reviews", "Reviews of an agent's work.").answers::<List<Review>>(),
        post("/v1/agents/{agent}/reviews", "Reviews an agent's work.")
            .takes::<ReviewInput>()
            .creates::<Review>(),
        post(
            "/v1/proposals/{id}/approve",
            "Approves a proposal into a mission.",
        )
        .may_take::<Value>()
        .answers::<Proposal>(),
        post("/v1/proposals/{id}/reject", "Rejects a proposal.")
            .may_take::<Value>()
            .answers::<Proposal>(),
        post("/v1/orchestration/heartbeat", "Runs the control loop once.").answers::<HeartbeatReport>(),
        get("/v1/knowledge", "Knowledge sources and their state.").answers::<knowledge::Sources>(),
        post("/v1/approvals/{id}", "Allows or denies a pending tool call.")
            .takes::<agents::Decide>()
            .answers::<ApprovalDecision>(),
    ]
}

fn owner_routes() -> Vec<Operation> {
    vec![
        post("/v1/embeddings", "OpenAI-compatible embeddings.").takes::<EmbeddingsRequest>(),
        get(
            "/v1/memory/status",
            "The memory index: files, chunks, the embedder.",
        )
        .answers::<MemoryStatus>(),
        post("/v1/memory/sync", "Indexes changed memory files now.").answers::<SyncReport>(),
        get("/v1/proposals", "Proposals, newest first.")
            .query(&[AGENT, ("status", "Only proposals in this status."), LIMIT])
            .answers::<List<Proposal>>(),
        post("/v1/proposals", "Proposes work (a mission of steps).")
            .takes::<missions::NewProposal>()
            .creates::<Proposal>(),
        get("/v1/proposals/{id}", "One proposal.").answers::<Proposal>(),
        get("/v1/missions", "Missions, newest first.")
            .query(&[AGENT, ("status", "Only missions in this status."), LIMIT])
            .answers::<List<Value>>(),
        get("/v1/missions/{id}", "One mission with its steps."),
        post("/v1/missions/{id}/cancel", "Cancels a mission.").answers::<Mission>(),
        get("/v1/steps", "Mission steps.")
            .query(&[AGENT, ("status", "Only steps in this status."), LIMIT])
            .answers::<List<Step>>(),
        get("/v1/events", "Orchestration events, oldest first.")
            .query(&[
                AGENT,
                ("type", "Only events of this type."),
                ("after", "Only events after this key."),
                LIMIT,
            ])
            .answers::<List<crate::orchestration::OpsEvent>>(),
        get("/v1/events/stream", "Orchestration events as server-sent events.")
            .query(&[
                AGENT,
                ("type", "Only events of this type."),
                ("after", "Start after this key."),
            ])
            .answers_with(SuccessBody::EventStream),
        get("/v1/agents/standing", "Each agent's trust and standing."),
        get("/v1/skills", "Skills (shared and per agent).")
            .query(&[AGENT])
            .answers::<List<SkillSummary>>(),
        get("/v1/skills/{scope}/{name}", "One skill.").answers::<Skill>(),
        put("/v1/skills/{scope}/{name}", "Writes a skill's SKILL.md.")
            .takes_text()
            .answers::<Skill>(),
        delete("/v1/skills/{scope}/{name}", "Removes a skill.").answers::<Deleted>(),
        get("/v1/skills/{scope}/{name}/files/{*file}", "A file of a skill.")
            .answers_with(SuccessBody::Text("text/plain")),
        put(
            "/v1/skills/{scope}/{name}/files/{*file}",
            "Writes a file of a skill.",
        )
        .takes_text()
        .answers::<Skill>(),
        get("/v1/agents", "Agents.").answers::<List<AgentView>>(),
        post("/v1/agents", "Creates an agent.")
            .takes::<agents::CreateAgent>()
            .answers::<AgentView>(),
        get("/v1/approvals", "Tool calls waiting for a decision.").answers::<List<Approval>>(),
        get("/v1/notifications", "Notifications, newest first.")
            .query(&[
                ("unread", "`true`: only unread ones."),
                ("after", "Only those after this id."),
                LIMIT,
            ])
            .answers::<notifications::NotificationList>(),
        post("/v1/notifications/read", "Marks notifications read.")
            .takes::<notifications::MarkRead>()
            .answers::<notifications::MarkedRead>(),
        get("/v1/notifications/stream", "Notifications as server-sent events.")
            .query(&[("after", "Start after this id.")])
            .answers_with(SuccessBody::EventStream),
        get(
            "/v1/status",
            "The gateway at a glance: agents, providers, plugins, counters.",
        )
        .answers::<GatewayStatus>(),
        get("/v1/usage", "Usage and cost, grouped.")
            .query(&[
                ("from", "Start (RFC 3339 or a date)."),
                ("to", "End (RFC 3339 or a date)."),
                ("group_by", "model, provider, agent, key or day."),
            ])
            .answers::<Report>(),
        get("/v1/usage/limits", "Budgets and rate limits with what is spent.").answers::<List<LimitStatus>>(),
        get("/metrics", "Prometheus metrics.").answers_with(SuccessBody::Text("text/plain")),
    ]
}

fn agent_routes() -> Vec<Operation> {
    vec![
        get(
            "/v1/models",
            "Models and agents (`onyx:{agent}`) to call, OpenAI-compatible.",
        )
        .answers::<List<ModelView>>(),
        post(
            "/v1/chat/completions",
            "OpenAI-compatible chat completions (JSON or streamed).",
        )
        .takes::<ChatRequest>()
        .answers_with(SuccessBody::JsonOrStream(schema_of::<Completion>)),
        post(
            "/v1/responses",
            "OpenAI-compatible Responses API (JSON or streamed).",
        )
        .takes::<ModelRequest>()
        .answers_with(SuccessBody::JsonOrStream(schema_of::<Value>)),
        get("/v1/responses/{id}", "A stored response."),
        delete("/v1/responses/{id}", "Deletes a stored response."),
        get(
            "/v1/responses/{id}/input_items",
            "A stored response's input items.",
        )
        .query(&[
            ("after", "Items after this id."),
            ("order", "asc or desc."),
            LIMIT,
        ]),
        get("/v1/sessions", "Sessions, newest first, a page at a time.")
            .query(&[
                AGENT,
                ("q", "Only sessions whose title or text contains this."),
                (
                    "source",
                    "Only sessions from this source (http, telegram, task…).",
                ),
                ("status", "Only sessions in this status."),
                ("updated_since", "Only sessions updated since (RFC 3339)."),
                ("cursor", "The `next_cursor` of the page before."),
                LIMIT,
            ])
            .answers::<SessionPage>(),
        get("/v1/sessions/{id}", "A session with a page of its messages.")
            .query(&[LIMIT])
            .answers::<SessionDetail>(),
        patch("/v1/sessions/{id}", "Renames a session or changes its settings.").takes::<sessions::Patch>(),
        delete("/v1/sessions/{id}", "Deletes a session.").answers::<Deleted>(),
        get("/v1/sessions/{id}/export", "The session log as JSONL.")
            .answers_with(SuccessBody::Text("application/x-ndjson")),
        post("/v1/sessions/{id}/compact", "Summarises a session's older turns.")
            .answers::<CompactionReport>(),
        post("/v1/memory", "Appends a note to an agent's daily memory log.")
            .takes::<memory_routes::NoteRequest>()
            .answers::<WriteOutcome>(),
        get("/v1/memory/files", "An agent's memory files.")
            .query(&[AGENT])
            .answers::<List<FileInfo>>(),
        get(
            "/v1/memory/files/{agent}/{*path}",
            "A memory file (text with `Accept: text/markdown`).",
        )
        .answers_with(SuccessBody::JsonOrText(schema_of::<FileContent>, "text/markdown")),
        put("/v1/memory/files/{agent}/{*path}", "Writes a memory file.")
            .takes_text()
            .answers::<WriteOutcome>(),
        delete("/v1/memory/files/{agent}/{*path}", "Deletes a memory file.").answers::<MemoryFileDeleted>(),
        get(
            "/v1/memory/search",
            "Searches an agent's memory (hybrid, BM25 or vector).",
        )
        .query(&[
            AGENT,
            ("q", "What to look for."),
            ("mode", "hybrid, bm25 or vector."),
            LIMIT,
        ])
        .answers::<SearchResults>(),
        get("/v1/agents/{agent}", "One agent with its workspace files.").answers::<AgentDetail>(),
        patch("/v1/agents/{agent}", "Changes an agent.")
            .takes::<agents::PatchAgent>()
            .answers::<AgentView>(),
        get(
            "/v1/agents/{agent}/files/{name}",
            "A workspace file (AGENTS.md, SOUL.md, …).",
        )
        .answers::<FileContent>(),
        put("/v1/agents/{agent}/files/{name}", "Writes a workspace file.")
            .takes_text()
            .answers::<WriteOutcome>(),
        get("/v1/inbox", "An agent's inbox.")
            .query(&[AGENT, ("status", "Only messages in this status."), LIMIT])
            .answers::<List<InboxMessage>>(),
        get("/v1/tasks", "Scheduled tasks.")
            .query(&[AGENT])
            .answers::<List<TaskView>>(),
        post("/v1/tasks", "Schedules a task.")
            .takes::<NewTask>()
            .creates::<TaskView>(),
        get("/v1/tasks/{id}", "One task.").answers::<TaskView>(),
        patch("/v1/tasks/{id}", "Changes a task.")
            .takes::<TaskPatch>()
            .answers::<TaskView>(),
        delete("/v1/tasks/{id}", "Deletes a task.").answers::<Deleted>(),
        post("/v1/tasks/{id}/run", "Runs a task now.").accepts::<RunView>(),
        get("/v1/tasks/{id}/runs", "A task's runs, newest first.")
            .query(&[LIMIT])
            .answers::<List<RunView>>(),
        get("/v1/runs", "Agent runs, newest first.")
            .query(&[AGENT, ("session", "Only runs of this session."), LIMIT])
            .answers::<List<AgentRun>>(),
        get("/v1/runs/{id}", "One agent run.").answers::<AgentRun>(),
        post("/v1/runs/{id}/cancel", "Cancels an agent run.").answers::<AgentRun>(),
        get(
            "/v1/runs/{id}/events",
            "A run's events as server-sent events, from the start.",
        )
        .answers_with(SuccessBody::EventStream),
        post("/mcp", "Onyx's own MCP server (streamable HTTP, JSON-RPC).").takes::<Value>(),
        get("/mcp", "Not offered: Onyx's MCP server does not push (405).")
            .answers_with(SuccessBody::Json(405, schema_of::<crate::http::error::ErrorBody>)),
        delete("/mcp", "Not offered: Onyx's MCP server keeps no session (405).")
            .answers_with(SuccessBody::Json(405, schema_of::<crate::http::error::ErrorBody>)),
    ]
}

fn anthropic_routes() -> Vec<Operation> {
    vec![
        post(
            "/v1/messages",
            "Anthropic-compatible Messages API (JSON or streamed).",
        )
        .takes::<ModelRequest>()
        .answers_with(SuccessBody::JsonOrStream(schema_of::<Value>)),
        post("/v1/messages/count_tokens", "Anthropic-compatible token count.").takes::<ModelRequest>(),
    ]
}

/// Every operation, in the router's order.
pub fn all() -> Vec<Operation> {
    [
        open_routes(),
        admin_routes(),
        owner_routes(),
        agent_routes(),
        anthropic_routes(),
    ]
    .into_iter()
    .flatten()
    .collect()
}
