//! Upstream streams of server-sent events (Anthropic's Messages API,
//! Gemini's `streamGenerateContent?alt=sse`) turned into chat-completion
//! chunks by a provider's own translator; this owns the loop they share:
//! each event's data in order, a broken stream as one error, then the end.

use eventsource_stream::Eventsource;
use futures::StreamExt;

use super::{ChatChunkStream, ProviderError};
use crate::chat::{ChatChunk, ChunkFactory, Usage};

/// A provider's translation of its stream, event by event.
pub trait EventTranslator: Send + 'static {
    /// The chunks one event's `data` makes.
    fn on_event(&mut self, data: &str) -> Result<Vec<ChatChunk>, ProviderError>;
    /// Whether the upstream said its answer is complete: later events are not read.
    fn done(&self) -> bool {
        false
    }
    /// The chunks (or the error) once the events end.
    fn finish(&mut self) -> Result<Vec<ChatChunk>, ProviderError>;
}

/// The chunks `translator` makes of `response`'s events, from `provider`.
pub fn chunks(
    provider: &str,
    response: reqwest::Response,
    mut translator: impl EventTranslator,
) -> ChatChunkStream {
    let provider = provider.to_string();
    let mut events = response.bytes_stream().eventsource();
    let chunks = async_stream::stream! {
        while let Some(event) = events.next().await {
            let event = match event {
                Ok(event) => event,
                Err(err) => {
                    yield Err(ProviderError::bad_response(&provider, err));
                    return;
                }
            };
            match translator.on_event(&event.data) {
                Ok(chunks) => for chunk in chunks { yield Ok(chunk) },
                Err(err) => { yield Err(err); return; }
            }
            if translator.done() {
                break;
            }
        }
        match translator.finish() {
            Ok(chunks) => for chunk in chunks { yield Ok(chunk) },
            Err(err) => yield Err(err),
        }
    };
    chunks.boxed()
}

/// After a translated stream's last event: its usage chunk, or the error of
/// a stream cut off before its finish (`marker` names what was missing).
pub fn ending(
    chunks: &ChunkFactory,
    provider: &str,
    finished: bool,
    usage: Option<Usage>,
    marker: &str,
) -> Result<Vec<ChatChunk>, ProviderError> {
    if !finished {
        return Err(ProviderError::Connect {
            provider: provider.to_string(),
            detail: format!("the stream ended before {marker}"),
        });
    }
    Ok(usage.map(|u| chunks.usage(u)).into_iter().collect())
}
