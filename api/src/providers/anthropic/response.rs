//! Anthropic Messages responses and errors → OpenAI shapes.

use serde::Deserialize;
use serde_json::Value;

use crate::chat::{self, Completion, FinishReason, ToolCall, Usage};

#[derive(Debug, Deserialize)]
pub struct Message {
    pub id: String,
    pub model: String,
    #[serde(default)]
    pub content: Vec<Block>,
    pub stop_reason: Option<String>,
    #[serde(default)]
    pub usage: AnthropicUsage,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    Text {
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub struct AnthropicUsage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default)]
    pub cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    pub cache_read_input_tokens: Option<u64>,
}

impl AnthropicUsage {
    /// Cached prompt tokens are still prompt tokens to an OpenAI client.
    pub fn prompt_tokens(&self) -> u64 {
        self.input_tokens
            + self.cache_creation_input_tokens.unwrap_or(0)
            + self.cache_read_input_tokens.unwrap_or(0)
    }

    /// In OpenAI's shape: cache reads are `prompt_tokens_details.cached_tokens`,
    /// cache writes `prompt_tokens_details.cache_write_tokens`.
    pub fn to_usage(self) -> Usage {
        let usage = Usage::new(self.prompt_tokens(), self.output_tokens);
        match (self.cache_read_input_tokens, self.cache_creation_input_tokens) {
            (None, None) => usage,
            (read, written) => usage.with_cache(read.unwrap_or(0), written.unwrap_or(0)),
        }
    }
}

pub fn finish_reason(stop_reason: Option<&str>) -> &'static str {
    match stop_reason {
        Some("max_tokens") => "length",
        Some("tool_use") => "tool_calls",
        Some("refusal") => "content_filter",
        _ => "stop",
    }
}

/// The inverse, for answers translated into the Messages API.
pub fn stop_reason(finish_reason: &str) -> &'static str {
    match finish_reason {
        "length" => "max_tokens",
        "tool_calls" | "function_call" => "tool_use",
        "content_filter" => "refusal",
        _ => "end_turn",
    }
}

pub fn to_completion(message: Message) -> Completion {
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for block in message.content {
        match block {
            Block::Text { text: t } => text.push_str(&t),
            Block::ToolUse { id, name, input } => {
                tool_calls.push(ToolCall::function(id, name, input.to_string()))
            }
            Block::Other => {}
        }
    }
    let usage = message.usage.to_usage();
    let content = (!text.is_empty() || tool_calls.is_empty()).then_some(text);
    Completion::single(
        message.id,
        message.model,
        chat::Message::answer(content, tool_calls),
        FinishReason::parse(finish_reason(message.stop_reason.as_deref())),
        usage,
    )
}

/// `{"type":"error","error":{"type":…,"message":…}}`
#[derive(Debug, Deserialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Deserialize)]
pub struct ErrorDetail {
    #[serde(rename = "type")]
    pub kind: String,
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tool_use_becomes_tool_calls() {
        let message: Message = serde_json::from_value(json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
            "content": [
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}}
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 12, "output_tokens": 7, "cache_read_input_tokens": 3, "cache_creation_input_tokens": 5}
        }))
        .unwrap();
        let out = serde_json::to_value(to_completion(message)).unwrap();
        assert_eq!(out["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(out["choices"][0]["message"]["content"], "Let me check.");
        let call = &out["choices"][0]["message"]["tool_calls"][0];
        assert_eq!(call["id"], "toolu_1");
        assert_eq!(call["function"]["arguments"], "{\"city\":\"Paris\"}");
        assert_eq!(
            out["usage"],
            json!({"prompt_tokens": 20, "completion_tokens": 7, "total_tokens": 27,
                   "prompt_tokens_details": {"cached_tokens": 3, "cache_write_tokens": 5}}),
            "cache reads and writes are prompt tokens, and reported as such"
        );
    }

    #[test]
    fn stop_reasons_map_to_finish_reasons() {
        assert_eq!(finish_reason(Some("end_turn")), "stop");
        assert_eq!(finish_reason(Some("stop_sequence")), "stop");
        assert_eq!(finish_reason(Some("max_tokens")), "length");
        assert_eq!(finish_reason(Some("refusal")), "content_filter");
        for reason in ["end_turn", "max_tokens", "tool_use", "refusal"] {
            assert_eq!(stop_reason(finish_reason(Some(reason))), reason);
        }
    }
}
