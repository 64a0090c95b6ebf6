//! Streams in the Messages API's event sequence: `message_start`, per
//! content block `content_block_start` / `content_block_delta` /
//! `content_block_stop` (with one `ping` after the first start), then
//! `message_delta` (stop reason, usage) and `message_stop`. [`Translator`]
//! builds it from `chat.completion.chunk`s: reasoning text opens a `thinking`
//! block, content a `text` block, each tool call a `tool_use` block whose
//! arguments arrive as `input_json_delta`s. Passed-through upstream events
//! are only re-encoded ([`named`]).

use axum::body::Bytes;
use serde_json::{Value, json};

use super::response::{message_id, reasoning_of, tool_use_id, usage as anthropic_usage};
use crate::chat::{ChatChunk, FinishReason};
use crate::providers::Usage;
use crate::providers::anthropic::stop_reason;

/// One `event: <type>` with its JSON data (the event is named by the data's `type`).
pub fn named(data: &Value) -> Bytes {
    let name = data["type"].as_str().unwrap_or("message");
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

#[derive(Clone, Copy, PartialEq)]
enum Block {
    Thinking,
    Text,
    /// A tool call, by its chunk index.
    Tool(u32),
}

/// Translation state of one stream.
pub struct Translator {
    model: String,
    started: bool,
    pinged: bool,
    /// The open block and its index.
    open: Option<(Block, usize)>,
    next_index: usize,
    finish: Option<FinishReason>,
    saw_tool_call: bool,
    usage: Usage,
    /// Onyx's own count of the prompt, for `message_start` (the upstream's
    /// count arrives only with the last chunk, in `message_delta`).
    estimated_input_tokens: u64,
}

impl Translator {
    pub fn new(model: &str, estimated_input_tokens: u64) -> Self {
        Self {
            estimated_input_tokens,
            model: model.into(),
            started: false,
            pinged: false,
            open: None,
            next_index: 0,
            finish: None,
            saw_tool_call: false,
            usage: Usage::default(),
        }
    }

    /// `message_start`, once.
    fn start(&mut self, out: &mut Vec<Value>) {
        if !self.started {
            self.started = true;
            out.push(json!({"type": "message_start", "message": {
                "id": message_id(), "type": "message", "role": "assistant", "model": self.model,
                "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": anthropic_usage(&Usage {
                    prompt_tokens: self.estimated_input_tokens,
                    ..Usage::default()
                }),
            }}));
        }
    }

    fn close(&mut self, out: &mut Vec<Value>) {
        if let Some((_, index)) = self.open.take() {
            out.push(json!({"type": "content_block_stop", "index": index}));
        }
    }

    /// Makes `block` the open one (closing another), returning its index.
    fn open(&mut self, block: Block, start: Value, out: &mut Vec<Value>) -> usize {
        if let Some((open, index)) = self.open
            && open == block
        {
            return index;
        }
        self.close(out);
        let index = self.next_index;
        self.next_index += 1;
        self.open = Some((block, index));
        out.push(json!({"type": "content_block_start", "index": index, "content_block": start}));
        if !self.pinged {
            self.pinged = true;
            out.push(json!({"type": "ping"}));
        }
        index
    }

    /// The events one chunk becomes (often none). Fields Onyx adds to agent
    /// chunks (`x_onyx`) and chunks without choices are only read for usage.
    pub fn on_chunk(&mut self, chunk: &ChatChunk) -> Vec<Value> {
        let mut out = Vec::new();
        self.start(&mut out);
        if let Some(usage) = &chunk.usage {
            self.usage = usage.clone();
        }
        let Some(choice) = chunk.choices.first() else {
            return out;
        };
        let delta = &choice.delta;
        if let Some(thinking) = reasoning_of(delta.reasoning_content.as_deref(), &delta.extra) {
            let start = json!({"type": "thinking", "thinking": "", "signature": ""});
            let index = self.open(Block::Thinking, start, &mut out);
            out.push(json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "thinking_delta", "thinking": thinking}}));
        }
        if let Some(text) = delta.content.as_deref().filter(|t| !t.is_empty()) {
            let index = self.open(Block::Text, json!({"type": "text", "text": ""}), &mut out);
            out.push(json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "text_delta", "text": text}}));
        }
        for call in delta.tool_calls.iter().flatten() {
            self.saw_tool_call = true;
            let function = &call.function;
            let start = json!({"type": "tool_use",
                "id": tool_use_id(call.id.as_deref().unwrap_or_default()),
                "name": function.name.as_deref().unwrap_or_default(), "input": {}});
            let index = self.open(Block::Tool(call.index.unwrap_or(0)), start, &mut out);
            if let Some(arguments) = function.arguments.as_deref().filter(|a| !a.is_empty()) {
                out.push(json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": arguments}}));
            }
        }
        if let Some(finish) = &choice.finish_reason {
            self.finish = Some(finish.clone());
        }
        out
    }

    /// The closing events, after the last chunk.
    pub fn finish(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        self.start(&mut out);
        self.close(&mut out);
        let stop = match &self.finish {
            _ if self.saw_tool_call => "tool_use",
            Some(finish) => stop_reason(finish.as_str()),
            None => "end_turn",
        };
        out.push(json!({"type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": anthropic_usage(&self.usage)}));
        out.push(json!({"type": "message_stop"}));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(delta: Value, finish: Option<&str>) -> ChatChunk {
        typed(
            json!({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
        )
    }

    fn typed(chunk: Value) -> ChatChunk {
        serde_json::from_value(chunk).unwrap()
    }

    #[test]
    fn text_then_tool_calls_become_blocks_in_order() {
        let mut t = Translator::new("openai/gpt-4o", 12);
        let mut events = Vec::new();
        for c in [
            chunk(json!({"role": "assistant", "content": ""}), None),
            chunk(json!({"reasoning_content": "Hm."}), None),
            chunk(json!({"content": "Let me"}), None),
            chunk(json!({"content": " look."}), None),
            chunk(
                json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "look", "arguments": ""}}]}),
                None,
            ),
            chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"q\":"}}]}),
                None,
            ),
            chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"x\"}"}}]}),
                None,
            ),
            chunk(
                json!({"tool_calls": [{"index": 1, "id": "call_2", "type": "function", "function": {"name": "other", "arguments": "{}"}}]}),
                None,
            ),
            chunk(json!({}), Some("tool_calls")),
            typed(
                json!({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}),
            ),
        ] {
            events.extend(t.on_chunk(&c));
        }
        events.extend(t.finish());
        let names: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "message_start",
                "content_block_start",
                "ping",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        assert_eq!(
            events[0]["message"]["usage"]["input_tokens"], 12,
            "Onyx's count until the upstream's"
        );
        assert_eq!(events[1]["content_block"]["type"], "thinking");
        assert_eq!(events[5]["content_block"]["type"], "text");
        assert_eq!(events[9]["index"], 2);
        assert_eq!(
            events[9]["content_block"],
            json!({"type": "tool_use", "id": "toolu_1", "name": "look", "input": {}})
        );
        assert_eq!(events[11]["delta"]["partial_json"], "\"x\"}");
        assert_eq!(events[13]["content_block"]["name"], "other");
        assert_eq!(events[16]["delta"]["stop_reason"], "tool_use");
        assert_eq!(events[16]["usage"]["output_tokens"], 5);
        assert_eq!(events[16]["usage"]["input_tokens"], 10);
        assert_eq!(
            &named(&json!({"type": "ping"}))[..],
            b"event: ping\ndata: {\"type\":\"ping\"}\n\n"
        );
    }

    #[test]
    fn an_empty_stream_still_has_the_frame() {
        let mut t = Translator::new("m", 0);
        let names: Vec<String> = t
            .finish()
            .iter()
            .map(|e| e["type"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(names, ["message_start", "message_delta", "message_stop"]);
    }
}
