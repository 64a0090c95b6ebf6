//! ConverseStream events → OpenAI `chat.completion.chunk`s.
//!
//! `messageStart` opens the assistant's message; text deltas become content
//! deltas; a `toolUse` block start becomes a tool-call delta with the call's
//! id and name (and the next OpenAI index), and its `toolUse` input deltas
//! argument pieces at that index; `messageStop` gives the finish chunk, and
//! the `metadata` event after it the usage chunk. A stream that ends before
//! `messageStop` is an error.

use std::collections::HashMap;

use aws_sdk_bedrockruntime::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_bedrockruntime::types::error::ConverseStreamOutputError as StreamError;
use aws_sdk_bedrockruntime::types::{ContentBlockDelta, ContentBlockStart, ConverseStreamOutput as Event};

use super::response::{exception, finish_reason, sdk_error, usage};
use crate::chat::{ChatChunk, ChunkFactory, Delta, ToolCallDelta, Usage};
use crate::providers::ProviderError;

/// A failure the event stream reported (an exception event) or met.
pub fn stream_error(
    provider: &str,
    err: SdkError<StreamError, aws_smithy_types::event_stream::RawMessage>,
    timeout: std::time::Duration,
) -> ProviderError {
    let Some(service) = err.as_service_error() else {
        return sdk_error(provider, err, timeout, None);
    };
    // The exception's name, from its metadata or else from its variant.
    let code = service.code().unwrap_or(match service {
        StreamError::ThrottlingException(_) => "ThrottlingException",
        StreamError::ValidationException(_) => "ValidationException",
        StreamError::ModelStreamErrorException(_) => "ModelStreamErrorException",
        StreamError::ServiceUnavailableException(_) => "ServiceUnavailableException",
        StreamError::InternalServerException(_) => "InternalServerException",
        _ => "UnknownError",
    });
    exception(provider, code, service.message(), None)
}

pub struct StreamTranslator {
    provider: String,
    chunks: ChunkFactory,
    started: bool,
    /// Bedrock content block index → OpenAI tool call index.
    tool_indexes: HashMap<i32, u32>,
    finished: bool,
    usage: Option<Usage>,
}

impl StreamTranslator {
    pub fn new(provider: &str, model: &str) -> Self {
        Self {
            provider: provider.to_string(),
            chunks: ChunkFactory::new(crate::providers::completion_id(), model.to_string()),
            started: false,
            tool_indexes: HashMap::new(),
            finished: false,
            usage: None,
        }
    }

    fn start(&mut self, out: &mut Vec<ChatChunk>) {
        if !self.started {
            self.started = true;
            out.push(self.chunks.delta(Delta::start(), None));
        }
    }

    fn tool_delta(&self, delta: ToolCallDelta) -> ChatChunk {
        self.chunks.delta(Delta::tool_call(delta), None)
    }

    /// The chunks one event makes.
    pub fn on_event(&mut self, event: &Event) -> Vec<ChatChunk> {
        let mut out = Vec::new();
        self.start(&mut out);
        match event {
            Event::ContentBlockStart(start) => {
                if let Some(ContentBlockStart::ToolUse(call)) = start.start() {
                    let index = u32::try_from(self.tool_indexes.len()).unwrap_or(u32::MAX);
                    self.tool_indexes.insert(start.content_block_index(), index);
                    out.push(self.tool_delta(ToolCallDelta::start(
                        index,
                        call.tool_use_id().to_string(),
                        call.name().to_string(),
                        String::new(),
                    )));
                }
            }
            Event::ContentBlockDelta(delta) => match delta.delta() {
                Some(ContentBlockDelta::Text(text)) if !text.is_empty() => {
                    out.push(self.chunks.delta(Delta::text(text.clone()), None))
                }
                Some(ContentBlockDelta::ToolUse(piece)) => {
                    if let Some(&index) = self.tool_indexes.get(&delta.content_block_index()) {
                        out.push(self.tool_delta(ToolCallDelta::arguments(index, piece.input().to_string())));
                    }
                }
                _ => {}
            },
            Event::MessageStop(stop) if !self.finished => {
                self.finished = true;
                out.push(
                    self.chunks
                        .delta(Delta::default(), Some(finish_reason(stop.stop_reason()))),
                );
            }
            Event::Metadata(metadata) => {
                if let Some(u) = metadata.usage() {
                    self.usage = Some(usage(u));
                }
            }
            _ => {}
        }
        out
    }

    /// After the last event: the usage chunk, or the error of a cut-off stream.
    pub fn finish(&mut self) -> Result<Vec<ChatChunk>, ProviderError> {
        crate::providers::sse::ending(
            &self.chunks,
            &self.provider,
            self.finished,
            self.usage.take(),
            "messageStop",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_bedrockruntime::types::{
        ContentBlockDeltaEvent, ContentBlockStartEvent, ConversationRole, ConverseStreamMetadataEvent,
        MessageStartEvent, MessageStopEvent, StopReason, TokenUsage, ToolUseBlockDelta, ToolUseBlockStart,
    };
    use serde_json::{Value, json};

    fn text(index: i32, text: &str) -> Event {
        Event::ContentBlockDelta(
            ContentBlockDeltaEvent::builder()
                .content_block_index(index)
                .delta(ContentBlockDelta::Text(text.into()))
                .build()
                .unwrap(),
        )
    }

    fn tool_start(index: i32, id: &str) -> Event {
        Event::ContentBlockStart(
            ContentBlockStartEvent::builder()
                .content_block_index(index)
                .start(ContentBlockStart::ToolUse(
                    ToolUseBlockStart::builder()
                        .tool_use_id(id)
                        .name("lookup")
                        .build()
                        .unwrap(),
                ))
                .build()
                .unwrap(),
        )
    }

    fn tool_input(index: i32, input: &str) -> Event {
        Event::ContentBlockDelta(
            ContentBlockDeltaEvent::builder()
                .content_block_index(index)
                .delta(ContentBlockDelta::ToolUse(
                    ToolUseBlockDelta::builder().input(input).build().unwrap(),
                ))
                .build()
                .unwrap(),
        )
    }

    #[test]
    fn text_tool_calls_finish_and_usage() {
        let mut translator = StreamTranslator::new("bedrock", "m");
        let events = [
            Event::MessageStart(
                MessageStartEvent::builder()
                    .role(ConversationRole::Assistant)
                    .build()
                    .unwrap(),
            ),
            text(0, "Checking"),
            tool_start(1, "tooluse_a"),
            tool_input(1, "{\"query\":"),
            tool_input(1, "\"lima\"}"),
            tool_start(2, "tooluse_b"),
            tool_input(2, "{}"),
            Event::MessageStop(
                MessageStopEvent::builder()
                    .stop_reason(StopReason::ToolUse)
                    .build()
                    .unwrap(),
            ),
            Event::Metadata(
                ConverseStreamMetadataEvent::builder()
                    .usage(
                        TokenUsage::builder()
                            .input_tokens(7)
                            .output_tokens(3)
                            .total_tokens(10)
                            .build()
                            .unwrap(),
                    )
                    .build(),
            ),
        ];
        let mut chunks: Vec<ChatChunk> = events.iter().flat_map(|e| translator.on_event(e)).collect();
        chunks.extend(translator.finish().unwrap());
        let chunks: Vec<Value> = chunks.iter().map(|c| serde_json::to_value(c).unwrap()).collect();
        assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
        assert_eq!(chunks[1]["choices"][0]["delta"]["content"], "Checking");
        let calls: Vec<&Value> = chunks
            .iter()
            .filter_map(|c| c["choices"][0]["delta"]["tool_calls"].get(0))
            .collect();
        assert_eq!(calls[0]["id"], "tooluse_a");
        assert_eq!(calls[0]["index"], 0);
        assert_eq!(calls[0]["function"]["name"], "lookup");
        let arguments: String = calls
            .iter()
            .filter(|c| c["index"] == 0)
            .filter_map(|c| c["function"]["arguments"].as_str())
            .collect();
        assert_eq!(arguments, "{\"query\":\"lima\"}");
        assert_eq!(calls[3]["index"], 1);
        assert_eq!(calls[3]["id"], "tooluse_b");
        let finish = chunks
            .iter()
            .find(|c| !c["choices"][0]["finish_reason"].is_null())
            .unwrap();
        assert_eq!(finish["choices"][0]["finish_reason"], "tool_calls");
        let last = chunks.last().unwrap();
        assert_eq!(last["choices"], json!([]));
        assert_eq!(last["usage"]["prompt_tokens"], 7);
        assert_eq!(last["usage"]["completion_tokens"], 3);
    }

    #[test]
    fn a_stream_cut_before_message_stop_is_an_error() {
        let mut translator = StreamTranslator::new("bedrock", "m");
        assert_eq!(translator.on_event(&text(0, "half")).len(), 2);
        assert!(matches!(translator.finish(), Err(ProviderError::Connect { .. })));
    }
}
