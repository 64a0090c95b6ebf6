//! The loop's control plane: `/v1/events` (filtered, and a live SSE feed),
//! `/v1/policy` (configuration as data), `/v1/triggers`, agents' trust
//! levels and performance reviews.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Value, json};

use super::body::{JsonBytes, JsonObject, typed};
use super::error::ApiError;
use super::missions::orchestrator;
use super::query::Params;
use super::ui_bodies::{Deleted, List};
use crate::app::App;
use crate::orchestration::trust::ReviewInput;
use crate::orchestration::{OpsEvent, ReactionTrigger, Review};

const FEED_POLL: Duration = Duration::from_secs(1);

pub async fn events(
    State(app): State<Arc<App>>,
    Params(query): Params,
) -> Result<Json<List<OpsEvent>>, ApiError> {
    let orch = orchestrator(&app)?;
    let limit = query
        .get("limit")
        .and_then(|l| l.parse().ok())
        .unwrap_or(100)
        .min(1000);
    let rows = orch
        .store
        .events(
            query.get("type").map(String::as_str),
            query.get("agent").map(String::as_str),
            query.get("after").map(String::as_str),
            limit,
        )
        .await?;
    Ok(Json(List::new(rows)))
}

/// `GET /v1/events/stream`: every new event (of any replica) as it is
/// recorded, oldest first; `?type=` and `?agent=` filter.
pub async fn stream(State(app): State<Arc<App>>, Params(query): Params) -> Result<Response, ApiError> {
    let orch = orchestrator(&app)?.clone();
    let kind = query.get("type").cloned();
    let agent = query.get("agent").cloned();
    let mut last = orch
        .store
        .events(None, None, None, 1)
        .await?
        .first()
        .map(|e| e.key.clone())
        .or_else(|| query.get("after").cloned());
    let mut local = orch.subscribe();
    let mut shutdown = app.shutting_down.subscribe();
    let body = async_stream::stream! {
        yield Ok::<_, std::convert::Infallible>(crate::http::sse::json(&json!({"type": "ready"})));
        let mut last_sent = tokio::time::Instant::now();
        loop {
            match orch.store.events(kind.as_deref(), agent.as_deref(), last.as_deref(), 200).await {
                Ok(mut fresh) => {
                    fresh.reverse();
                    for event in fresh {
                        last = Some(event.key.clone());
                        last_sent = tokio::time::Instant::now();
                        yield Ok(crate::http::sse::json(&event));
                    }
                }
                Err(err) => tracing::warn!(error = %err, "the event feed could not read events"),
            }
            // A quiet feed still speaks now and then, so proxies keep it open.
            if last_sent.elapsed() >= crate::http::sse::KEEP_ALIVE {
                last_sent = tokio::time::Instant::now();
                yield Ok(crate::http::sse::keep_alive());
            }
            // This replica's events wake the feed at once; others' within a
            // second; shutdown ends it, so it never holds the server's grace.
            tokio::select! {
                _ = local.recv() => {}
                () = tokio::time::sleep(FEED_POLL) => {}
                _ = shutdown.wait_for(|stopping| *stopping) => break,
            }
        }
    };
    Ok(crate::http::sse::response(Body::from_stream(body)))
}

pub async fn policies(State(app): State<Arc<App>>) -> Result<Json<Value>, ApiError> {
    let orch = orchestrator(&app)?;
    let rows = orch.store.policies().await?;
    Ok(Json(
        json!({"object": "list", "data": rows, "keys": crate::orchestration::POLICY_KEYS}),
    ))
}

pub async fn policy(State(app): State<Arc<App>>, Path(key): Path<String>) -> Result<Json<Value>, ApiError> {
    let orch = orchestrator(&app)?;
    match orch.store.policy(&key).await? {
        Some(value) => Ok(Json(json!({"key": key, "value": value}))),
        None => Err(ApiError::NotFound {
            message: format!("policy {key:?} is not set"),
            code: "policy_not_set",
        }),
    }
}

/// `PUT /v1/policy/{key}` with the value as the body (checked per key).
pub async fn set_policy(
    State(app): State<Arc<App>>,
    Path(key): Path<String>,
    JsonBytes(body): JsonBytes,
) -> Result<Json<Value>, ApiError> {
    let value: Value = serde_json::from_slice(&body).map_err(|err| ApiError::BadRequest {
        message: format!("the request body is not valid JSON: {err}"),
        param: None,
        code: Some("invalid_json"),
    })?;
    let orch = orchestrator(&app)?;
    crate::orchestration::check_policy(&key, &value)
        .map_err(|m| ApiError::bad_request(m, Some(key.clone())))?;
    orch.store
        .set_policy(&key, &value, &crate::clock::now_stamp())
        .await?;
    orch.emit("_system", "policy.changed", &["policy"], json!({"key": key}))
        .await;
    Ok(Json(json!({"key": key, "value": value})))
}

pub async fn delete_policy(
    State(app): State<Arc<App>>,
    Path(key): Path<String>,
) -> Result<Json<Deleted>, ApiError> {
    let orch = orchestrator(&app)?;
    orch.store.delete_policy(&key).await?;
    Ok(Json(Deleted::new(key, "policy")))
}

pub async fn triggers(State(app): State<Arc<App>>) -> Result<Json<List<ReactionTrigger>>, ApiError> {
    let orch = orchestrator(&app)?;
    Ok(Json(List::new(orch.store.triggers().await?)))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct TriggerInput {
    name: String,
    condition: Value,
    proposal: Value,
    #[serde(default = "default_cooldown")]
    cooldown_seconds: u64,
    #[serde(default = "yes")]
    enabled: bool,
}

fn default_cooldown() -> u64 {
    3600
}

fn yes() -> bool {
    true
}

fn trigger_from(input: TriggerInput, key: String, builtin: bool) -> Result<ReactionTrigger, ApiError> {
    if input.name.trim().is_empty() {
        return Err(ApiError::bad_request(
            "name: a trigger needs a name",
            Some("name".into()),
        ));
    }
    if !input.condition.is_object() {
        return Err(ApiError::bad_request(
            "condition: must be an object ({\"type\": …})",
            Some("condition".into()),
        ));
    }
    if input.proposal["steps"].as_array().is_none_or(|s| s.is_empty()) || !input.proposal["title"].is_string()
    {
        return Err(ApiError::bad_request(
            "proposal: needs a title and at least one step ({kind, input})",
            Some("proposal".into()),
        ));
    }
    Ok(ReactionTrigger {
        key,
        name: input.name.trim().into(),
        condition: input.condition,
        proposal: input.proposal,
        cooldown_seconds: input.cooldown_seconds,
        enabled: input.enabled,
        last_fired: None,
        builtin,
    })
}

pub async fn create_trigger(
    State(app): State<Arc<App>>,
    JsonObject(body): JsonObject,
) -> Result<(StatusCode, Json<ReactionTrigger>), ApiError> {
    let orch = orchestrator(&app)?;
    let trigger = trigger_from(typed(&body)?, uuid::Uuid::now_v7().simple().to_string(), false)?;
    orch.store.save_trigger(&trigger).await?;
    Ok((StatusCode::CREATED, Json(trigger)))
}

pub async fn update_trigger(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    JsonObject(body): JsonObject,
) -> Result<Json<ReactionTrigger>, ApiError> {
    let orch = orchestrator(&app)?;
    let old = orch.store.trigger(&id).await?.ok_or_else(|| ApiError::NotFound {
        message: format!("no trigger {id:?}"),
        code: "trigger_not_found",
    })?;
    let mut trigger = trigger_from(typed(&body)?, id, old.builtin)?;
    trigger.last_fired = old.last_fired;
    orch.store.save_trigger(&trigger).await?;
    Ok(Json(trigger))
}

pub async fn delete_trigger(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
) -> Result<Json<Deleted>, ApiError> {
    let orch = orchestrator(&app)?;
    if !orch.store.delete_trigger(&id).await? {
        return Err(ApiError::NotFound {
            message: format!("no trigger {id:?}"),
            code: "trigger_not_found",
        });
    }
    Ok(Json(Deleted::new(id, "trigger")))
}

/// `GET /v1/agents/standing`: every agent's trust level and running steps.
pub async fn standing(State(app): State<Arc<App>>) -> Result<Json<Value>, ApiError> {
    let orch = orchestrator(&app)?;
    Ok(Json(orch.standing().await?))
}

/// `PUT /v1/agents/{id}/trust` `{"level": 1-4}`.
pub async fn set_trust(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    JsonObject(body): JsonObject,
) -> Result<Json<Value>, ApiError> {
    let orch = orchestrator(&app)?;
    let level = body["level"]
        .as_u64()
        .and_then(|l| u8::try_from(l).ok())
        .ok_or_else(|| {
            ApiError::bad_request("level: 1 (observer) to 4 (autonomous)", Some("level".into()))
        })?;
    orch.set_trust(&id, level).await?;
    Ok(Json(
        json!({"agent": id, "level": level, "name": crate::orchestration::trust::name(level)}),
    ))
}

pub async fn reviews(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
) -> Result<Json<List<Review>>, ApiError> {
    let orch = orchestrator(&app)?;
    Ok(Json(List::new(orch.store.reviews(&id).await?)))
}

pub async fn review(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    JsonObject(body): JsonObject,
) -> Result<(StatusCode, Json<Review>), ApiError> {
    let orch = orchestrator(&app)?;
    let input: ReviewInput = typed(&body)?;
    Ok((StatusCode::CREATED, Json(orch.review(&id, input).await?)))
}
