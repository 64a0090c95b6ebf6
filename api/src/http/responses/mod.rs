//! OpenAI's Responses API: `POST /v1/responses` (JSON or SSE events),
//! `GET` and `DELETE /v1/responses/{id}`, `GET /v1/responses/{id}/input_items`.
//!
//! A provider with `responses: true` gets the request as sent
//! (`passthrough`); any other model, and agents (`onyx:{agent}`), answer
//! through `inbound_chat`: the request is translated to chat completions
//! (`request`) and the answer back into a `response` object (`output`) or
//! its stream events (`stream`). Responses are stored (unless `store: false`)
//! with their whole conversation, so `previous_response_id` works on every
//! replica.

mod ids;
mod keep;
mod output;
mod passthrough;
mod request;
mod stream;

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use self::keep::Keeper;
use super::agent_chat::chat_agent;
use super::agent_scope::AgentReach;
use super::answer::{self, with_session};
use super::body::{JsonObject, into_map, query_number, typed};
use super::chat_session::{OnyxFields, keeps_a_session};
use super::error::ApiError;
use super::inbound_chat::{self, Answer, Asker};
use super::middleware::Caller;
use super::owned::ResponseId;
use super::query::Params;
use crate::app::App;
use crate::providers::types::ChatRequest;
use crate::responses::{ResponseError, ResponseStore};

fn field<'a>(body: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    body.get(name).filter(|v| !v.is_null())
}

fn bad_type(name: &str, expected: &str) -> ApiError {
    ApiError::BadRequest {
        message: format!("{name}: must be {expected}"),
        param: Some(name.into()),
        code: Some("invalid_type"),
    }
}

fn flag(body: &Map<String, Value>, name: &str, default: bool) -> Result<bool, ApiError> {
    match field(body, name) {
        None => Ok(default),
        Some(Value::Bool(value)) => Ok(*value),
        Some(_) => Err(bad_type(name, "a boolean")),
    }
}

fn text<'a>(body: &'a Map<String, Value>, name: &str) -> Result<Option<&'a str>, ApiError> {
    match field(body, name) {
        None => Ok(None),
        Some(Value::String(value)) => Ok(Some(value)),
        Some(_) => Err(bad_type(name, "a string")),
    }
}

pub async fn create(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    reach: AgentReach,
    Caller(who): Caller,
    JsonObject(body): JsonObject,
) -> Result<Response, ApiError> {
    let mut body = into_map(body);
    let fields = OnyxFields::take(&headers, &mut body)?;
    let model = text(&body, "model")?
        .ok_or_else(|| ApiError::bad_request("model: is required", Some("model".into())))?
        .to_string();
    let agent = chat_agent(&reach, &fields, &model)?;
    let stream = flag(&body, "stream", false)?;
    let keep = flag(&body, "store", true)?;
    let previous_id = text(&body, "previous_response_id")?.map(String::from);
    let items = request::input_items(body.get("input"))?;
    let store = ResponseStore::new(app.db.clone());
    let previous = match &previous_id {
        Some(id) => store.get(id).await?,
        None => None,
    };
    if let Some(previous) = &previous {
        previous_in_reach(&reach, previous)?;
    }
    if agent.is_none()
        && !keeps_a_session(app.record_sessions, &fields)
        && let Ok(targets) = app.router.resolve(&model)
        && !targets.is_empty()
        && targets.iter().all(|t| t.provider.speaks_responses())
    {
        // An id Onyx does not know may be the upstream's own: it decides.
        let request = passthrough::Passthrough {
            body,
            items,
            previous,
            stream,
            keep,
        };
        return passthrough::create(&app, store, &targets, request, &who).await;
    }
    if let (Some(id), None) = (&previous_id, &previous) {
        return Err(ResponseError::PreviousNotFound(id.clone()).into());
    }
    request::check_translatable(&body, &items)?;
    let mut conversation = previous.map(|p| p.conversation()).unwrap_or_default();
    conversation.extend(items);
    let (chat, left_out) = request::chat_body(&body, &conversation, stream)?;
    let chat = Value::Object(chat);
    let chat_request: ChatRequest = typed(&chat)?;
    let asker = Asker { reach: &reach, agent };
    let answered = inbound_chat::answer(
        &app,
        &headers,
        asker,
        into_map(chat).into(),
        chat_request,
        fields,
        who,
    )
    .await?;
    let skeleton = with_session(
        output::skeleton(&ids::response(), &body, &model),
        answered.session.as_deref(),
    );
    let keeper = Keeper {
        store,
        input: conversation,
        keep,
        provider: None,
    };
    let mut response = match answered.answer {
        Answer::Complete(reply) => {
            let response = output::from_completion(skeleton, &answer::completion(*reply, None)?);
            keeper.save(&response).await;
            Json(response).into_response()
        }
        Answer::Chunks(chunks) => stream::sse(
            chunks,
            stream::Translator::new(skeleton),
            Box::new(move |response| Box::pin(async move { keeper.save(&response).await })),
        ),
    };
    response.headers_mut().extend(answered.headers);
    if !left_out.is_empty()
        && let Ok(value) = HeaderValue::from_str(&left_out.join(", "))
    {
        // Built-in tools only OpenAI runs: this model answers without them.
        response.headers_mut().insert(LEFT_OUT_TOOLS_HEADER, value);
    }
    Ok(response)
}

/// A scoped key continues only its agents' stored responses (their `model`
/// is `onyx:{agent}`).
fn previous_in_reach(reach: &AgentReach, previous: &crate::responses::Stored) -> Result<(), ApiError> {
    if !reach.is_scoped() {
        return Ok(());
    }
    match previous.response["model"]
        .as_str()
        .and_then(|m| m.strip_prefix("onyx:"))
    {
        Some(agent) => reach.check(agent).map(drop),
        None => Err(reach.refuse("previous_response_id names a response of no agent of it")),
    }
}

/// Names the built-in tools a translated request went without.
const LEFT_OUT_TOOLS_HEADER: &str = "x-onyx-tools-left-out";

pub async fn get(State(app): State<Arc<App>>, ResponseId(id): ResponseId) -> Result<Json<Value>, ApiError> {
    let stored = ResponseStore::new(app.db.clone()).require(&id).await?;
    Ok(Json(stored.response))
}

pub async fn delete(
    State(app): State<Arc<App>>,
    ResponseId(id): ResponseId,
) -> Result<Json<Value>, ApiError> {
    if !ResponseStore::new(app.db.clone()).delete(&id).await? {
        return Err(ResponseError::NotFound(id).into());
    }
    Ok(Json(json!({"id": id, "object": "response", "deleted": true})))
}

/// A page of the response's input items (`limit` 1–100, `order` `desc` by
/// default, `after` an item id).
pub async fn input_items(
    State(app): State<Arc<App>>,
    ResponseId(id): ResponseId,
    Params(params): Params,
) -> Result<Json<Value>, ApiError> {
    let limit = query_number(&params, "limit", 20, 100)?.max(1);
    let ascending = match params.get("order").map(String::as_str) {
        None | Some("desc") => false,
        Some("asc") => true,
        Some(_) => {
            return Err(ApiError::bad_request(
                "order: must be 'asc' or 'desc'",
                Some("order".into()),
            ));
        }
    };
    let stored = ResponseStore::new(app.db.clone()).require(&id).await?;
    let mut items = stored.input;
    if !ascending {
        items.reverse();
    }
    let start = match params.get("after") {
        None => 0,
        Some(after) => match items.iter().position(|i| i["id"].as_str() == Some(after)) {
            Some(index) => index + 1,
            None => {
                return Err(ApiError::bad_request(
                    format!("after: no input item {after:?} in this response"),
                    Some("after".into()),
                ));
            }
        },
    };
    let rest = &items[start.min(items.len())..];
    let page = &rest[..limit.min(rest.len())];
    Ok(Json(json!({
        "object": "list",
        "data": page,
        "first_id": page.first().map(|i| i["id"].clone()),
        "last_id": page.last().map(|i| i["id"].clone()),
        "has_more": rest.len() > page.len(),
    })))
}
