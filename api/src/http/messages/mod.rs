//! The Anthropic Messages API: `POST /v1/messages` and
//! `POST /v1/messages/count_tokens`, for Claude Code and the Anthropic SDKs.
//!
//! Models of Anthropic providers get the request as it is (`Router::messages`:
//! prompt caching, thinking and betas intact; their events streamed on as
//! they come). Every other model, and `onyx:{agent}`, goes through the shared
//! chat core: the request is translated to chat completions (`request`), and
//! the answer back (`response`, `stream`). Errors on these routes, whoever
//! raises them, are in Anthropic's shape (`errors`). Auth takes `x-api-key`
//! as well as a bearer key.

pub mod errors;
mod request;
mod response;
mod stream;

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use futures::StreamExt;
use serde_json::{Map, Value, json};

use super::agent_scope::{AgentReach, CheckedAgent};
use super::answer::{self, with_session};
use super::body::{JsonObject, into_map, typed};
use super::chat_session::OnyxFields;
use super::error::ApiError;
use super::inbound_chat::{self, Answer, Asker};
use super::middleware::Caller;
use super::{health, middleware, sse};
use crate::agents::context::count_request;
use crate::app::App;
use crate::config::ProviderKind;
use crate::providers::types::ChatRequest;
use crate::providers::{Attribution, MessagesAnswer, MessagesCall, ModelTarget};

/// The routes (a key scoped to agents may use them with its agents).
pub(in crate::http) fn table() -> super::Table {
    super::Table::new(super::Access::Agent)
        .route("/v1/messages", post(create))
        .route("/v1/messages/count_tokens", post(count_tokens))
}

/// The routes with their auth and the Anthropic error shape.
pub(in crate::http) fn with_layers(routes: Router<Arc<App>>, app: Arc<App>) -> Router<Arc<App>> {
    routes
        .method_not_allowed_fallback(health::method_not_allowed)
        .route_layer(middleware::require_api_key(app))
        .layer(axum::middleware::map_response(errors::to_anthropic))
}

/// Where a request goes: passed through to Anthropic upstreams, or translated.
enum Route {
    Passthrough(Vec<ModelTarget>),
    Translate,
}

/// The model, the agent it runs (checked against the caller's reach), and where it goes.
fn route(
    app: &App,
    fields: &OnyxFields,
    reach: &AgentReach,
    body: &Map<String, Value>,
) -> Result<(String, Option<CheckedAgent>, Route), ApiError> {
    let model = match body.get("model") {
        Some(Value::String(model)) if !model.is_empty() => model.clone(),
        Some(_) => return Err(errors::invalid("model", "Input should be a valid string")),
        None => return Err(errors::invalid("model", "Field required")),
    };
    let agent = super::agent_chat::chat_agent(reach, fields, &model)?;
    if agent.is_some() || super::chat_session::keeps_a_session(app.record_sessions, fields) {
        return Ok((model, agent, Route::Translate));
    }
    let targets = app.router.resolve(&model)?;
    let anthropic = targets
        .iter()
        .all(|t| t.provider.kind() == ProviderKind::Anthropic);
    Ok((
        model,
        agent,
        if anthropic {
            Route::Passthrough(targets)
        } else {
            Route::Translate
        },
    ))
}

fn messages_call(headers: &HeaderMap, body: Map<String, Value>, who: Attribution) -> MessagesCall {
    let beta: Vec<&str> = headers
        .get_all("anthropic-beta")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    MessagesCall {
        body,
        beta: (!beta.is_empty()).then(|| beta.join(",")),
        who,
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
    let (model, agent, route) = route(&app, &fields, &reach, &body)?;
    match route {
        Route::Passthrough(targets) => passthrough(&app, &targets, messages_call(&headers, body, who)).await,
        Route::Translate => {
            let asker = Asker { reach: &reach, agent };
            translated(&app, &headers, asker, (&body, fields), &model, who).await
        }
    }
}

async fn passthrough(app: &App, targets: &[ModelTarget], call: MessagesCall) -> Result<Response, ApiError> {
    let (answer, _, cost) = app.router.messages(targets, &call).await?;
    Ok(match answer {
        MessagesAnswer::Message(message) => super::usage::with_cost(Json(message).into_response(), cost),
        MessagesAnswer::Events(events) => {
            let events = events.map(|event| {
                let data = match event {
                    Ok(event) => event,
                    Err(err) => errors::stream_event(ApiError::from(err)),
                };
                Ok::<_, std::convert::Infallible>(stream::named(&data))
            });
            sse::response(Body::from_stream(events))
        }
    })
}

async fn translated(
    app: &Arc<App>,
    headers: &HeaderMap,
    asker: Asker<'_>,
    (body, fields): (&Map<String, Value>, OnyxFields),
    model: &str,
    who: Attribution,
) -> Result<Response, ApiError> {
    let chat = request::to_chat(body)?;
    let chat = Value::Object(chat);
    let chat_request: ChatRequest = typed(&chat)?;
    // Only a stream's `message_start` needs it (before the upstream's count arrives).
    let estimated_input = if chat_request.stream {
        count_request(
            &chat_request.messages,
            chat_request.tools.as_deref().unwrap_or_default(),
        )
    } else {
        0
    };
    let answered = inbound_chat::answer(
        app,
        headers,
        asker,
        into_map(chat).into(),
        chat_request,
        fields,
        who,
    )
    .await?;
    let session = answered.session;
    let mut response = match answered.answer {
        Answer::Complete(reply) => Json(with_session(
            response::to_message(&answer::completion(*reply, None)?, model),
            session.as_deref(),
        ))
        .into_response(),
        Answer::Chunks(chunks) => {
            let mut translator = stream::Translator::new(model, estimated_input as u64);
            let events = async_stream::stream! {
                let mut chunks = chunks;
                while let Some(chunk) = chunks.next().await {
                    match chunk {
                        Ok(chunk) => for event in translator.on_chunk(&chunk) {
                            let event = started_in(event, session.as_deref());
                            yield Ok::<_, std::convert::Infallible>(stream::named(&event));
                        },
                        Err(err) => {
                            yield Ok(stream::named(&errors::stream_event(err)));
                            return;
                        }
                    }
                }
                for event in translator.finish() {
                    let event = started_in(event, session.as_deref());
                    yield Ok(stream::named(&event));
                }
            };
            sse::response(Body::from_stream(events))
        }
    };
    response.headers_mut().extend(answered.headers);
    Ok(response)
}

/// A stream's `message_start` with the session's id on its message, as a
/// whole answer carries it (`x_onyx.session_id`); other events as they are.
fn started_in(mut event: Value, session: Option<&str>) -> Value {
    if session.is_some() && event["type"] == "message_start" {
        event["message"] = with_session(event["message"].take(), session);
    }
    event
}

/// `{"input_tokens": N}`: the Anthropic upstream's count, or Onyx's own
/// (the tokenizer that sizes agents' context) for every other model.
pub async fn count_tokens(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    reach: AgentReach,
    Caller(who): Caller,
    JsonObject(body): JsonObject,
) -> Result<Response, ApiError> {
    let mut body = into_map(body);
    let fields = OnyxFields::take(&headers, &mut body)?;
    let (_, _, route) = route(&app, &fields, &reach, &body)?;
    if let Route::Passthrough(targets) = route {
        let count = app
            .router
            .count_tokens(&targets, &messages_call(&headers, body, who))
            .await?;
        return Ok(Json(count).into_response());
    }
    // count_tokens takes no max_tokens; the translation wants one.
    body.entry("max_tokens").or_insert(json!(1));
    let chat = Value::Object(request::to_chat(&body)?);
    let chat: ChatRequest = typed(&chat)?;
    let tokens = count_request(&chat.messages, chat.tools.as_deref().unwrap_or_default());
    Ok(Json(json!({"input_tokens": tokens})).into_response())
}
