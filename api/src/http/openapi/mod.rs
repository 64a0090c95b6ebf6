//! `GET /openapi.json`: the OpenAPI 3.1 document of the whole HTTP API.
//!
//! The operations (`operations`) name each route's request and answer types;
//! their JSON Schemas (2020-12, OpenAPI 3.1's own dialect) are derived from
//! those Rust types with `schemars`, so the document changes when they do.
//! Who may call a route comes from the router's own tables
//! ([`super::routes`]), and a test fails when the document and the router
//! disagree on a path (`tests`); the `it` suite checks the methods and
//! validates live answers against the document.

mod operations;
#[cfg(test)]
mod tests;

use std::sync::{Arc, LazyLock};

use axum::Json;
use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::{Map, Value, json};

use super::Access;
use super::error::ErrorBody;
use super::messages::errors::AnthropicError;
use operations::{Body, Operation, SuccessBody, Verb};

/// The document, built once (it depends only on the code).
static DOCUMENT: LazyLock<Arc<Value>> = LazyLock::new(|| Arc::new(document()));

/// `GET /openapi.json` (open, like `/health`: it says what exists, not what is stored).
pub async fn serve() -> Json<Arc<Value>> {
    Json(DOCUMENT.clone())
}

/// A route's schema function: the `$ref` (or inline schema) of a Rust type.
type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

fn schema_of<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<T>()
}

/// The OpenAPI 3.1 document.
pub fn document() -> Value {
    let mut generator = SchemaSettings::draft2020_12()
        .with(|settings| settings.definitions_path = "/components/schemas".into())
        .into_generator();
    let access = access_by_path();
    let openai_error = schema_of::<ErrorBody>(&mut generator);
    let anthropic_error = schema_of::<AnthropicError>(&mut generator);
    let mut paths = Map::new();
    for operation in operations::all() {
        let error = if operation.path.starts_with("/v1/messages") {
            &anthropic_error
        } else {
            &openai_error
        };
        let tier = access.get(operation.path).copied();
        let entry = paths
            .entry(openapi_path(operation.path))
            .or_insert_with(|| json!({}));
        entry[operation.verb.name()] = describe(&operation, tier, error, &mut generator);
    }
    let schemas: Map<String, Value> = generator.take_definitions(true).into_iter().collect();
    json!({
        "openapi": "3.1.1",
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "info": {
            "title": "Onyx",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Onyx's HTTP API: OpenAI- and Anthropic-compatible model routes, \
                agents, sessions, memory, tasks, missions and administration. Errors are \
                OpenAI's `{\"error\": {…}}` everywhere except on `/v1/messages*`, which \
                answer in Anthropic's shape.",
        },
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "An Onyx API key (`onyx_sk_…`); the control UI signs in with a cookie instead.",
                },
                "anthropicKey": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "x-api-key",
                    "description": "The same key, as the Anthropic SDKs send it (`/v1/messages*` only).",
                },
            },
        },
    })
}

/// Each router path with who it admits (the router's tables decide it).
fn access_by_path() -> std::collections::HashMap<&'static str, Access> {
    super::routes().into_iter().collect()
}

/// Axum's `{*rest}` wildcard is OpenAPI's `{rest}`.
pub(crate) fn openapi_path(path: &str) -> String {
    path.replace("{*", "{")
}

/// The names of a path's parameters, in order.
fn path_parameters(path: &str) -> Vec<&str> {
    path.split('/')
        .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
        .map(|name| name.trim_start_matches('*'))
        .collect()
}

/// Who may call a route, as a sentence and as `x-onyx-access`.
fn access_note(access: Access) -> (&'static str, &'static str) {
    match access {
        Access::Open => ("open", "Open: no key needed."),
        Access::Admin => ("admin", "Needs an admin key (or the owner's UI session)."),
        Access::Owner => (
            "owner",
            "Needs a key not scoped to agents (or the owner's UI session).",
        ),
        Access::Agent => (
            "agent",
            "Needs any key; a key scoped to agents reaches only its agents.",
        ),
    }
}

/// One operation object.
fn describe(
    operation: &Operation,
    access: Option<Access>,
    error: &Schema,
    generator: &mut SchemaGenerator,
) -> Value {
    let mut parameters: Vec<Value> = path_parameters(operation.path)
        .into_iter()
        .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
        .collect();
    parameters.extend(operation.query.iter().map(|(name, description)| {
        json!({"name": name, "in": "query", "required": false, "description": description,
               "schema": {"type": "string"}})
    }));
    let mut object = json!({
        "operationId": operation_id(operation),
        "summary": operation.summary,
        "parameters": parameters,
        "responses": responses(&operation.answer, error, generator),
    });
    if let Some(access) = access {
        let (tier, note) = access_note(access);
        object["description"] = json!(note);
        object["x-onyx-access"] = json!(tier);
        if access == Access::Open {
            object["security"] = json!([]);
        } else if operation.path.starts_with("/v1/messages") {
            object["security"] = json!([{"bearer": []}, {"anthropicKey": []}]);
        }
    }
    if let Some(body) = request_body(&operation.body, generator) {
        object["requestBody"] = body;
    }
    object
}

/// `get_/v1/agents/{agent}` → `get_v1_agents_agent`: unique, as OpenAPI requires.
fn operation_id(operation: &Operation) -> String {
    let path: String = operation
        .path
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let path: Vec<&str> = path.split('_').filter(|part| !part.is_empty()).collect();
    format!("{}_{}", operation.verb.name(), path.join("_"))
}

fn request_body(body: &Body, generator: &mut SchemaGenerator) -> Option<Value> {
    let (required, content) = match body {
        Body::None => return None,
        Body::Json(schema) => (true, json!({"application/json": {"schema": schema(generator)}})),
        Body::OptionalJson(schema) => (false, json!({"application/json": {"schema": schema(generator)}})),
        Body::Text => (
            true,
            json!({"text/plain": {"schema": {"type": "string"}}, "text/markdown": {"schema": {"type": "string"}}}),
        ),
    };
    Some(json!({"required": required, "content": content}))
}

fn responses(answer: &SuccessBody, error: &Schema, generator: &mut SchemaGenerator) -> Value {
    let failure = json!({
        "description": "An error, in this route family's shape.",
        "content": {"application/json": {"schema": error}},
    });
    let mut responses = json!({"default": failure});
    let (status, success) = match answer {
        SuccessBody::Json(status, schema) => (
            *status,
            json!({"description": "Success.", "content": {"application/json": {"schema": schema(generator)}}}),
        ),
        SuccessBody::JsonOrStream(schema) => (
            200,
            json!({"description": "The answer; with `\"stream\": true`, server-sent events instead.",
            "content": {
                "application/json": {"schema": schema(generator)},
                "text/event-stream": {"schema": {"type": "string"}},
            }}),
        ),
        SuccessBody::EventStream => (
            200,
            json!({"description": "Server-sent events.",
                   "content": {"text/event-stream": {"schema": {"type": "string"}}}}),
        ),
        SuccessBody::Text(kind) => {
            let kind = *kind;
            (
                200,
                json!({"description": "The document.", "content": {kind: {"schema": {"type": "string"}}}}),
            )
        }
        SuccessBody::JsonOrText(schema, kind) => {
            let kind = *kind;
            (
                200,
                json!({"description": "The file as JSON, or as text when `Accept` asks for it.",
                "content": {
                    "application/json": {"schema": schema(generator)},
                    kind: {"schema": {"type": "string"}},
                }}),
            )
        }
        SuccessBody::Empty(status) => (*status, json!({"description": "Done; no body."})),
    };
    responses[status.to_string()] = success;
    responses
}

impl Verb {
    fn name(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::Post => "post",
            Self::Put => "put",
            Self::Patch => "patch",
            Self::Delete => "delete",
        }
    }
}
