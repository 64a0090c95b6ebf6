//! `/v1/responses` for providers that speak the Responses API themselves
//! (`responses: true`): the body goes upstream as sent, only `model`
//! rewritten, and the answer (JSON, or the upstream's events as they come)
//! comes back untouched. A `previous_response_id` that this provider made
//! stays as it is; one Onyx answered otherwise is expanded from the store
//! (the field dropped, the stored conversation put before the input).

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{Map, Value, json};

use super::keep::Keeper;
use super::stream::encode;
use crate::app::App;
use crate::http::error::ApiError;
use crate::http::sse;
use crate::providers::{Attribution, ModelTarget, ResponsesAnswer};
use crate::responses::{ResponseStore, Stored};

pub struct Passthrough {
    pub body: Map<String, Value>,
    /// This request's input items, in stored form.
    pub items: Vec<Value>,
    pub previous: Option<Stored>,
    pub stream: bool,
    pub keep: bool,
}

pub async fn create(
    app: &Arc<App>,
    store: ResponseStore,
    targets: &[ModelTarget],
    request: Passthrough,
    who: &Attribution,
) -> Result<Response, ApiError> {
    let Passthrough {
        mut body,
        items,
        previous,
        stream,
        keep,
    } = request;
    let provider = targets.first().map(|t| t.provider.name().to_string());
    let mut conversation = Vec::new();
    if let Some(previous) = previous {
        conversation = previous.conversation();
        if previous.provider != provider {
            body.remove("previous_response_id");
            let input = conversation
                .iter()
                .chain(&items)
                .filter_map(for_upstream)
                .collect();
            body.insert("input".into(), Value::Array(input));
        }
    }
    conversation.extend(items);
    let (answer, served_by, cost) = app.router.responses(targets, &body, stream, who).await?;
    let keeper = Keeper {
        store,
        input: conversation,
        keep,
        provider: Some(served_by.provider),
    };
    Ok(match answer {
        ResponsesAnswer::Response(response) => {
            keeper.save(&response).await;
            crate::http::usage::with_cost(Json(response).into_response(), cost)
        }
        ResponsesAnswer::Events(events) => {
            let events = async_stream::stream! {
                let mut events = events;
                let mut sequence = 0;
                while let Some(item) = events.next().await {
                    match item {
                        Ok(event) => {
                            sequence = event["sequence_number"].as_u64().map_or(sequence, |n| n + 1);
                            if matches!(event["type"].as_str(), Some("response.completed" | "response.incomplete")) {
                                keeper.save(&event["response"]).await;
                            }
                            yield Ok::<_, std::convert::Infallible>(encode(&event));
                        }
                        Err(err) => {
                            let body = ApiError::from(err).into_stream_event();
                            let error = &body["error"];
                            let event = json!({"type": "error", "code": error["code"], "message": error["message"],
                                "param": error["param"], "sequence_number": sequence});
                            yield Ok(encode(&event));
                            break;
                        }
                    }
                }
            };
            sse::response(Body::from_stream(events))
        }
    })
}

/// A stored item as another upstream may take it: Onyx's own ids are unknown
/// there, and reasoning from elsewhere cannot be replayed.
fn for_upstream(item: &Value) -> Option<Value> {
    if item["type"] == "reasoning" {
        return None;
    }
    let mut item = item.clone();
    if let Some(fields) = item.as_object_mut() {
        fields.remove("id");
    }
    Some(item)
}
