//! Anthropic's streaming events → OpenAI `chat.completion.chunk`s.
//!
//! `message_start` opens the assistant turn, text and `input_json_delta`s become
//! content and tool-call argument deltas (each `tool_use` block gets the next
//! OpenAI tool-call index), `message_delta` carries the stop reason and output
//! tokens, and `message_stop` ends it, with the usage chunk when asked for.

use std::collections::HashMap;

use serde::Deserialize;

use super::response::{AnthropicUsage, finish_reason};
use crate::chat::{ChatChunk, ChunkFactory, Delta, FinishReason, ToolCallDelta, Usage};
use crate::providers::ProviderError;

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event {
    MessageStart {
        message: StartMessage,
    },
    ContentBlockStart {
        index: u32,
        content_block: BlockStart,
    },
    ContentBlockDelta {
        index: u32,
        delta: BlockDelta,
    },
    ContentBlockStop {},
    MessageDelta {
        delta: MessageDeltaBody,
        #[serde(default)]
        usage: Option<AnthropicUsage>,
    },
    MessageStop {},
    Ping {},
    Error {
        error: super::response::ErrorDetail,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Deserialize)]
struct StartMessage {
    id: String,
    model: String,
    #[serde(default)]
    usage: AnthropicUsage,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockStart {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
struct MessageDeltaBody {
    stop_reason: Option<String>,
}

/// Translation state of one stream.
pub struct StreamTranslator {
    provider: String,
    factory: ChunkFactory,
    include_usage: bool,
    /// `message_start`'s usage, with `message_delta`'s output count.
    usage: AnthropicUsage,
    tool_indexes: HashMap<u32, u32>,
    pub done: bool,
}

impl StreamTranslator {
    pub fn new(provider: &str, model: &str, include_usage: bool) -> Self {
        Self {
            provider: provider.into(),
            factory: ChunkFactory::new(crate::providers::completion_id(), model.into()),
            include_usage,
            usage: AnthropicUsage::default(),
            tool_indexes: HashMap::new(),
            done: false,
        }
    }

    /// The chunks one server-sent event becomes (often none).
    pub fn on_event(&mut self, data: &str) -> Result<Vec<ChatChunk>, ProviderError> {
        let event: Event = serde_json::from_str(data).map_err(|err| ProviderError::BadResponse {
            provider: self.provider.clone(),
            detail: format!("unreadable stream event: {err}"),
        })?;
        Ok(match event {
            Event::MessageStart { message } => {
                self.factory.id = message.id;
                self.factory.model = message.model;
                self.usage = message.usage;
                vec![self.factory.delta(Delta::start(), None)]
            }
            Event::ContentBlockStart { index, content_block } => match content_block {
                BlockStart::Text { text } if !text.is_empty() => {
                    vec![self.factory.delta(Delta::text(text), None)]
                }
                BlockStart::ToolUse { id, name } => {
                    let tool_index = self.tool_indexes.len() as u32;
                    self.tool_indexes.insert(index, tool_index);
                    let call = ToolCallDelta::start(tool_index, id, name, String::new());
                    vec![self.factory.delta(Delta::tool_call(call), None)]
                }
                _ => Vec::new(),
            },
            Event::ContentBlockDelta { index, delta } => match delta {
                BlockDelta::TextDelta { text } => vec![self.factory.delta(Delta::text(text), None)],
                BlockDelta::InputJsonDelta { partial_json } => match self.tool_indexes.get(&index) {
                    Some(&tool_index) => {
                        let call = ToolCallDelta::arguments(tool_index, partial_json);
                        vec![self.factory.delta(Delta::tool_call(call), None)]
                    }
                    None => Vec::new(),
                },
                BlockDelta::Other => Vec::new(),
            },
            Event::MessageDelta { delta, usage } => {
                if let Some(usage) = usage {
                    self.usage.output_tokens = usage.output_tokens;
                }
                let reason = FinishReason::parse(finish_reason(delta.stop_reason.as_deref()));
                vec![self.factory.delta(Delta::default(), Some(reason))]
            }
            Event::MessageStop {} => {
                self.done = true;
                if self.include_usage {
                    vec![self.factory.usage(self.usage())]
                } else {
                    Vec::new()
                }
            }
            Event::Error { error } => {
                return Err(ProviderError::Upstream {
                    provider: self.provider.clone(),
                    status: super::status_for_error_type(&error.kind),
                    message: error.message,
                    kind: Some(error.kind),
                    code: None,
                    param: None,
                });
            }
            Event::ContentBlockStop {} | Event::Ping {} | Event::Unknown => Vec::new(),
        })
    }

    pub fn usage(&self) -> Usage {
        self.usage.to_usage()
    }
}

impl crate::providers::sse::EventTranslator for StreamTranslator {
    fn on_event(&mut self, data: &str) -> Result<Vec<ChatChunk>, ProviderError> {
        StreamTranslator::on_event(self, data)
    }

    fn done(&self) -> bool {
        self.done
    }

    /// `message_stop` never came: the answer is cut short, said as an error.
    fn finish(&mut self) -> Result<Vec<ChatChunk>, ProviderError> {
        if self.done {
            return Ok(Vec::new());
        }
        Err(ProviderError::Connect {
            provider: self.provider.clone(),
            detail: "the stream ended before message_stop".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn feed(t: &mut StreamTranslator, event: Value) -> Vec<Value> {
        let chunks = t.on_event(&event.to_string()).unwrap();
        chunks.iter().map(|c| serde_json::to_value(c).unwrap()).collect()
    }

    #[test]
    fn translates_a_tool_use_stream() {
        let mut t = StreamTranslator::new("anthropic", "claude", true);
        let start = feed(
            &mut t,
            json!({"type": "message_start", "message": {"id": "msg_1", "model": "claude-x", "usage": {"input_tokens": 9, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 0, "output_tokens": 1}}}),
        );
        assert_eq!(start[0]["choices"][0]["delta"]["role"], "assistant");
        assert_eq!(start[0]["id"], "msg_1");
        let text = feed(
            &mut t,
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}}),
        );
        assert_eq!(text[0]["choices"][0]["delta"]["content"], "Hi");
        let tool = feed(
            &mut t,
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}}}),
        );
        assert_eq!(
            tool[0]["choices"][0]["delta"]["tool_calls"][0],
            json!({"index": 0, "id": "toolu_1", "type": "function", "function": {"name": "weather", "arguments": ""}})
        );
        let args = feed(
            &mut t,
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"city\":"}}),
        );
        assert_eq!(
            args[0]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"],
            "{\"city\":"
        );
        let end = feed(
            &mut t,
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 20}}),
        );
        assert_eq!(end[0]["choices"][0]["finish_reason"], "tool_calls");
        let stop = feed(&mut t, json!({"type": "message_stop"}));
        assert_eq!(
            stop[0]["usage"],
            json!({"prompt_tokens": 109, "completion_tokens": 20, "total_tokens": 129, "prompt_tokens_details": {"cached_tokens": 100}})
        );
        assert_eq!(stop[0]["choices"], json!([]));
        assert!(t.done);
    }

    #[test]
    fn error_events_become_errors() {
        let mut t = StreamTranslator::new("anthropic", "claude", false);
        let err = t
            .on_event(
                &json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
                    .to_string(),
            )
            .unwrap_err();
        assert!(
            matches!(err, ProviderError::Upstream { status: 529, .. }),
            "{err:?}"
        );
    }
}
