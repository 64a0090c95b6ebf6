//! The one place streamed deltas are merged into the message they make:
//! text and reasoning appended, tool calls put together by index (id and
//! type set, name and arguments appended), the last usage and finish reason
//! kept. Fields Onyx does not model are merged too: strings appended (as
//! OpenAI streams `refusal`), arrays extended, other values replaced.

use serde_json::{Map, Value};

use super::{ChatChunk, Content, FinishReason, Message, Role, ToolCall, ToolCallDelta, Usage};

/// Merges the chunks of one streamed answer (its first choice).
#[derive(Debug, Default)]
pub struct Assembler {
    content: String,
    reasoning: String,
    tool_calls: Vec<ToolCall>,
    extra: Map<String, Value>,
    usage: Option<Usage>,
    finish: Option<FinishReason>,
}

/// What a stream made.
#[derive(Debug, Clone, PartialEq)]
pub struct Assembled {
    /// The assistant message: its text (`None` when it only called tools),
    /// its tool calls, and its reasoning as `reasoning_content`.
    pub message: Message,
    pub usage: Option<Usage>,
    pub finish: Option<FinishReason>,
}

impl Assembler {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, chunk: &ChatChunk) {
        if let Some(usage) = &chunk.usage {
            self.usage = Some(usage.clone());
        }
        let Some(choice) = chunk.choices.first() else {
            return;
        };
        if let Some(reason) = &choice.finish_reason {
            self.finish = Some(reason.clone());
        }
        let delta = &choice.delta;
        if let Some(text) = &delta.content {
            self.content.push_str(text);
        }
        if let Some(reasoning) = &delta.reasoning_content {
            self.reasoning.push_str(reasoning);
        }
        for part in delta.tool_calls.iter().flatten() {
            self.merge_call(part);
        }
        for (key, value) in &delta.extra {
            merge_value(&mut self.extra, key, value);
        }
    }

    fn merge_call(&mut self, part: &ToolCallDelta) {
        let index = part.index.map_or(self.tool_calls.len(), |i| i as usize);
        while self.tool_calls.len() <= index {
            self.tool_calls.push(ToolCall::function("", "", ""));
        }
        let call = &mut self.tool_calls[index];
        if let Some(id) = &part.id {
            call.id.clone_from(id);
        }
        if let Some(kind) = &part.kind {
            call.kind.clone_from(kind);
        }
        if let Some(name) = &part.function.name {
            call.function.name.push_str(name);
        }
        if let Some(arguments) = &part.function.arguments {
            call.function.arguments.push_str(arguments);
        }
        for (key, value) in &part.function.extra {
            merge_value(&mut call.function.extra, key, value);
        }
        for (key, value) in &part.extra {
            merge_value(&mut call.extra, key, value);
        }
    }

    /// The text so far.
    pub fn content(&self) -> &str {
        &self.content
    }

    pub fn finish(self) -> Assembled {
        let tool_calls = self.tool_calls;
        let mut extra = self.extra;
        if !self.reasoning.is_empty() {
            extra.insert("reasoning_content".into(), Value::String(self.reasoning));
        }
        let content =
            (!self.content.is_empty() || tool_calls.is_empty()).then(|| Content::Text(self.content));
        Assembled {
            message: Message {
                role: Role::Assistant,
                content,
                name: None,
                tool_calls: (!tool_calls.is_empty()).then_some(tool_calls),
                tool_call_id: None,
                extra,
            },
            usage: self.usage,
            finish: self.finish,
        }
    }
}

/// A streamed field merged into what came before: strings appended, arrays
/// extended, `null` adding nothing, anything else replacing.
fn merge_value(into: &mut Map<String, Value>, key: &str, value: &Value) {
    match (into.get_mut(key), value) {
        (_, Value::Null) => {
            into.entry(key.to_string()).or_insert(Value::Null);
        }
        (Some(Value::String(so_far)), Value::String(more)) => so_far.push_str(more),
        (Some(Value::Array(so_far)), Value::Array(more)) => so_far.extend(more.iter().cloned()),
        _ => {
            into.insert(key.to_string(), value.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chunk(value: Value) -> ChatChunk {
        serde_json::from_value(value).unwrap()
    }

    fn delta(delta: Value) -> ChatChunk {
        chunk(json!({"choices": [{"index": 0, "delta": delta, "finish_reason": null}]}))
    }

    #[test]
    fn text_reasoning_and_parallel_tool_calls_come_together() {
        let mut assembler = Assembler::new();
        for piece in [
            delta(json!({"role": "assistant", "content": "", "refusal": null})),
            delta(json!({"reasoning_content": "Think"})),
            delta(json!({"reasoning_content": "ing."})),
            delta(json!({"content": "Let me "})),
            delta(json!({"content": "check."})),
            delta(json!({"tool_calls": [
                {"index": 0, "id": "a", "type": "function", "function": {"name": "weather", "arguments": ""}},
                {"index": 1, "id": "b", "type": "function", "function": {"name": "time", "arguments": "{}"},
                 "extra_content": {"google": {"thought_signature": "s"}}}
            ]})),
            delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\":"}}]})),
            delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"Paris\"}"}}]})),
            chunk(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})),
            chunk(
                json!({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8, "cost": 0.01}}),
            ),
        ] {
            assembler.push(&piece);
        }
        assert_eq!(assembler.content(), "Let me check.");
        let assembled = assembler.finish();
        assert_eq!(assembled.finish, Some(FinishReason::ToolCalls));
        assert_eq!(assembled.usage.as_ref().map(|u| u.total_tokens), Some(8));
        assert_eq!(
            assembled.usage.as_ref().map(|u| u.extra["cost"].clone()),
            Some(json!(0.01))
        );
        assert_eq!(
            serde_json::to_value(&assembled.message).unwrap(),
            json!({"role": "assistant", "content": "Let me check.", "refusal": null,
            "reasoning_content": "Thinking.",
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}},
                {"id": "b", "type": "function", "function": {"name": "time", "arguments": "{}"},
                 "extra_content": {"google": {"thought_signature": "s"}}}
            ]})
        );
    }

    #[test]
    fn calls_without_an_index_are_each_a_call_and_tool_only_answers_have_no_text() {
        let mut assembler = Assembler::new();
        assembler.push(&delta(json!({"tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}}
        ]})));
        let message = assembler.finish().message;
        assert_eq!(message.content, None);
        let names: Vec<_> = message
            .tool_calls
            .iter()
            .flatten()
            .map(|c| c.function.name.as_str())
            .collect();
        assert_eq!(names, ["f", "g"]);
    }

    #[test]
    fn an_empty_stream_is_an_empty_answer() {
        let assembled = Assembler::new().finish();
        assert_eq!(assembled.message.content, Some(Content::Text(String::new())));
        assert_eq!((assembled.usage, assembled.finish), (None, None));
    }
}
