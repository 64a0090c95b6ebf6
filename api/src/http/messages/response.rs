//! A `chat.completion` → a Messages API `message`: reasoning text becomes a
//! `thinking` block, text a `text` block, tool calls `tool_use` blocks with
//! parsed input; the finish reason becomes the stop reason; prompt tokens read
//! from or written to the cache are reported apart from `input_tokens`, as
//! Anthropic does.

use serde_json::{Map, Value, json};

use crate::chat::{Completion, FinishReason};
use crate::providers::Usage;
use crate::providers::anthropic::stop_reason;

/// A fresh Messages API id.
pub fn message_id() -> String {
    format!("msg_{}", uuid::Uuid::now_v7().simple())
}

/// A tool-use id for an upstream call id (`call_x` → `toolu_x`); ids that
/// came from an Anthropic client's own history keep their form.
pub fn tool_use_id(call_id: &str) -> String {
    if call_id.starts_with("toolu_") {
        call_id.to_string()
    } else {
        format!("toolu_{}", call_id.strip_prefix("call_").unwrap_or(call_id))
    }
}

/// A tool call's arguments as the `input` object (`{}` for none or unreadable ones).
pub fn tool_input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(input @ Value::Object(_)) => input,
        _ => json!({}),
    }
}

/// The reasoning text some OpenAI-compatible servers send beside the
/// content: `reasoning_content` (typed in a delta, `typed`) or `reasoning`
/// among the fields Onyx does not model.
pub fn reasoning_of<'a>(typed: Option<&'a str>, extra: &'a Map<String, Value>) -> Option<&'a str> {
    typed
        .or_else(|| extra.get("reasoning_content").and_then(Value::as_str))
        .or_else(|| extra.get("reasoning").and_then(Value::as_str))
        .filter(|text| !text.is_empty())
}

/// Anthropic's `usage` for OpenAI usage: cache reads and writes apart.
pub fn usage(usage: &Usage) -> Value {
    let read = usage.cached_tokens();
    let written = usage.cache_write_tokens();
    json!({
        "input_tokens": usage.prompt_tokens.saturating_sub(read + written),
        "output_tokens": usage.completion_tokens,
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": written,
    })
}

/// The `message` for a completion, answering a request for `model`.
pub fn to_message(completion: &Completion, model: &str) -> Value {
    let choice = completion.choices.first();
    let message = choice.map(|choice| &choice.message);
    let mut content = Vec::new();
    if let Some(thinking) = message.and_then(|m| reasoning_of(None, &m.extra)) {
        content.push(json!({"type": "thinking", "thinking": thinking, "signature": ""}));
    }
    let text = message.map(|m| m.text_content()).unwrap_or_default();
    if !text.is_empty() {
        content.push(json!({"type": "text", "text": text}));
    }
    let calls = message.and_then(|m| m.tool_calls.as_deref()).unwrap_or_default();
    for call in calls {
        content.push(json!({
            "type": "tool_use",
            "id": tool_use_id(&call.id),
            "name": call.function.name,
            "input": tool_input(&call.function.arguments),
        }));
    }
    let finish = choice.and_then(|c| c.finish_reason.as_ref());
    // Some servers finish a turn of tool calls with "stop".
    let stop = if calls.is_empty() {
        stop_reason(finish.map_or("stop", FinishReason::as_str))
    } else {
        "tool_use"
    };
    let usage = completion.usage.clone().unwrap_or_default();
    json!({
        "id": message_id(),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": null,
        "usage": self::usage(&usage),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_completion_with_tool_calls_becomes_a_message() {
        let completion = json!({
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": "Checking.", "reasoning_content": "They want weather.",
                "tool_calls": [{"id": "call_abc", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}}]
            }}],
            "usage": {"prompt_tokens": 30, "completion_tokens": 7, "total_tokens": 37,
                      "prompt_tokens_details": {"cached_tokens": 20, "cache_write_tokens": 4}}
        });
        let message = to_message(&serde_json::from_value(completion).unwrap(), "openai/gpt-4o");
        assert!(message["id"].as_str().unwrap().starts_with("msg_"));
        assert_eq!(message["model"], "openai/gpt-4o");
        assert_eq!(message["stop_reason"], "tool_use");
        assert_eq!(
            message["content"],
            json!([
                {"type": "thinking", "thinking": "They want weather.", "signature": ""},
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_abc", "name": "weather", "input": {"city": "Paris"}}
            ])
        );
        assert_eq!(
            message["usage"],
            json!({"input_tokens": 6, "output_tokens": 7, "cache_read_input_tokens": 20, "cache_creation_input_tokens": 4})
        );
    }

    #[test]
    fn length_is_max_tokens() {
        let completion = json!({"choices": [{"finish_reason": "length", "message": {"role": "assistant", "content": "cut"}}]});
        let message = to_message(&serde_json::from_value(completion).unwrap(), "m");
        assert_eq!(message["stop_reason"], "max_tokens");
        assert_eq!(message["usage"]["input_tokens"], 0);
    }
}
