//! ADAPTERS: deleted by WS-C (issue 40, workstream C). The `Value` faces of
//! the typed provider API, so that `agents/` and `http/` compile unchanged
//! until they read [`ChatChunk`]s and [`CompletionReply`]s themselves:
//! [`Router::chat`], [`Router::chat_to_forward`] and [`Router::chat_stream`]
//! over [`Router::complete`] and [`Router::stream`], the old
//! [`Completion`] (parsed or forwarded) and [`ChunkStream`] of JSON chunks,
//! and [`RawObject::scan_with`] over [`RawObject::parse`].

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::Value;

use super::{ChatCall, CompletionReply, ModelRef, ModelTarget, ProviderError, RawObject, Router, Usage};
use crate::chat::ChatChunk;

/// Streamed `chat.completion.chunk` objects as JSON.
pub type ChunkStream = BoxStream<'static, Result<Value, ProviderError>>;

/// A `chat.completion` on its way back to the client: parsed, or the
/// upstream's own bytes.
pub enum Completion {
    Parsed(Value),
    /// A JSON object, checked, with the usage it reports (boxed: the
    /// variant stays small beside `Parsed`).
    Forwarded {
        json: Bytes,
        usage: Option<Box<Usage>>,
    },
}

impl Completion {
    pub fn usage(&self) -> Option<Usage> {
        match self {
            Self::Parsed(value) => Usage::from_response(value),
            Self::Forwarded { usage, .. } => usage.as_deref().cloned(),
        }
    }

    /// The completion as a JSON tree, for callers that read or translate it.
    pub fn into_value(self) -> Value {
        match self {
            Self::Parsed(value) => value,
            // Checked when it arrived (`CompletionReply::verbatim`), so it parses.
            Self::Forwarded { json, .. } => serde_json::from_slice(&json).unwrap_or(Value::Null),
        }
    }
}

impl From<CompletionReply> for Completion {
    fn from(reply: CompletionReply) -> Self {
        match reply {
            CompletionReply::Typed(completion) => {
                Self::Parsed(serde_json::to_value(completion).unwrap_or(Value::Null))
            }
            CompletionReply::Verbatim { bytes, usage } => Self::Forwarded {
                json: bytes,
                usage: usage.map(Box::new),
            },
        }
    }
}

fn chunk_value(chunk: ChatChunk) -> Value {
    serde_json::to_value(chunk).unwrap_or(Value::Null)
}

impl Router {
    /// A parsed completion, for callers that read it (agents, compaction).
    pub async fn chat(
        &self,
        targets: &[ModelTarget],
        call: &ChatCall,
    ) -> Result<(Value, ModelRef), ProviderError> {
        let (reply, served_by, _) = self.complete(targets, call).await?;
        Ok((Completion::from(reply).into_value(), served_by))
    }

    /// The completion for a caller that passes it on (it may be the
    /// upstream's bytes, unparsed), with the call's cost in USD when its price is known.
    pub async fn chat_to_forward(
        &self,
        targets: &[ModelTarget],
        call: &ChatCall,
    ) -> Result<(Completion, ModelRef, Option<f64>), ProviderError> {
        let (reply, served_by, cost) = self.complete(targets, call).await?;
        Ok((reply.into(), served_by, cost))
    }

    /// [`Router::stream`] with each chunk as JSON.
    pub async fn chat_stream(
        &self,
        targets: &[ModelTarget],
        call: &ChatCall,
    ) -> Result<(ChunkStream, ModelRef), ProviderError> {
        let (stream, served_by) = self.stream(targets, call).await?;
        Ok((stream.map(|chunk| chunk.map(chunk_value)).boxed(), served_by))
    }
}

impl RawObject {
    /// [`RawObject::parse`] as an option, reading the typed view with `read`:
    /// `None` leaves the body to the caller's own parse (which words the error).
    pub fn scan_with<T>(json: Bytes, read: impl FnOnce(&str) -> Option<T>) -> Option<(Self, T)> {
        Self::parse_with(json, |text| {
            read(text).ok_or_else(|| serde::de::Error::custom("not read"))
        })
        .ok()
    }
}
