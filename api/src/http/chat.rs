//! `POST /v1/chat/completions`: JSON or server-sent events. Chunks are written
//! as they arrive from the upstream; when the client goes away the stream is
//! dropped, which closes the upstream request.

use std::sync::Arc;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::json;

use super::body::{JsonObject, into_map, typed};
use super::error::ApiError;
use crate::app::App;
use crate::observability::Metrics;
use crate::providers::types::ChatRequest;
use crate::providers::{ChatCall, ChunkStream, ModelRef, Usage};

pub async fn chat_completions(
    State(app): State<Arc<App>>,
    JsonObject(body): JsonObject,
) -> Result<Response, ApiError> {
    let request: ChatRequest = typed(&body)?;
    if request.messages.is_empty() {
        return Err(ApiError::bad_request(
            "messages: at least one message is required",
            Some("messages".into()),
        ));
    }
    let call = ChatCall {
        body: into_map(body),
        request,
    };
    let targets = app.router.resolve(&call.request.model)?;
    if call.request.stream {
        let (stream, served_by) = app.router.chat_stream(&targets, &call).await?;
        return Ok(sse_response(stream, served_by, app.metrics.clone()));
    }
    let (completion, served_by) = app.router.chat(&targets, &call).await?;
    if let Some(usage) = Usage::from_response(&completion) {
        app.metrics
            .record_usage(&served_by.provider, &served_by.model, &usage);
    }
    Ok(Json(completion).into_response())
}

fn sse_event(data: &[u8]) -> Bytes {
    let mut event = Vec::with_capacity(data.len() + 8);
    event.extend_from_slice(b"data: ");
    event.extend_from_slice(data);
    event.extend_from_slice(b"\n\n");
    Bytes::from(event)
}

fn sse_response(stream: ChunkStream, served_by: ModelRef, metrics: Arc<Metrics>) -> Response {
    let events = async_stream::stream! {
        let mut stream = stream;
        while let Some(item) = stream.next().await {
            match item {
                Ok(chunk) => {
                    if let Some(usage) = Usage::from_response(&chunk) {
                        metrics.record_usage(&served_by.provider, &served_by.model, &usage);
                    }
                    match serde_json::to_vec(&chunk) {
                        Ok(data) => yield Ok::<_, std::convert::Infallible>(sse_event(&data)),
                        Err(err) => tracing::warn!(error = %err, "unserializable chunk dropped"),
                    }
                }
                Err(err) => {
                    // Headers are gone already: the error travels in the stream,
                    // in the shape OpenAI uses for mid-stream errors.
                    tracing::warn!(error = %err, "upstream stream failed");
                    let body = json!({"error": {"message": err.to_string(), "type": "server_error", "param": null, "code": "upstream_stream_error"}});
                    yield Ok(sse_event(body.to_string().as_bytes()));
                    break;
                }
            }
        }
        yield Ok(Bytes::from_static(b"data: [DONE]\n\n"));
    };
    let mut response = Response::new(Body::from_stream(events));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}
