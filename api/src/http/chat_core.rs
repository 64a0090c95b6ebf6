//! TEMPORARY stand-in for the lead's shared chat core (same API), so the
//! Messages API can be built and tested before it lands; replaced at merge.

use std::sync::Arc;

use axum::http::HeaderMap;
use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::{Map, Value};

use super::error::ApiError;
use crate::app::App;
use crate::providers::ChatCall;
use crate::providers::types::ChatRequest;

pub enum Answer {
    Complete(Value),
    Chunks(BoxStream<'static, Result<Value, ApiError>>),
}

pub struct Answered {
    pub answer: Answer,
    pub headers: HeaderMap,
}

pub async fn answer(
    app: &Arc<App>,
    _headers: &HeaderMap,
    body: Map<String, Value>,
    request: ChatRequest,
    _session_ref: Option<String>,
) -> Result<Answered, ApiError> {
    let targets = app.router.resolve(&request.model)?;
    let call = ChatCall { body, request };
    let answer = if call.request.stream {
        let (stream, _) = app.router.chat_stream(&targets, &call).await?;
        Answer::Chunks(stream.map(|c| c.map_err(ApiError::from)).boxed())
    } else {
        Answer::Complete(app.router.chat(&targets, &call).await?.0)
    };
    Ok(Answered {
        answer,
        headers: HeaderMap::new(),
    })
}
