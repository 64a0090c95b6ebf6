//! Chat-completion chunks as Responses stream events, in OpenAI's order:
//! `response.created`, `response.in_progress`, then per output item
//! `output_item.added` … `output_item.done` (a message's content part and
//! text deltas, a function call's argument deltas), and
//! `response.completed` (or `response.incomplete`) with the whole response.
//! A failure mid-stream ends it with `response.failed`. Every event carries
//! its `sequence_number`; the wire has an `event:` line per event and no
//! `[DONE]`.

use axum::body::{Body, Bytes};
use axum::response::Response;
use futures::StreamExt;
use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::{ids, output};
use crate::chat::{ChatChunk, FinishReason, ToolCallDelta, Usage};
use crate::http::answer::Chunks;
use crate::http::error::ApiError;
use crate::http::sse;

/// One SSE event named after its `type`.
pub fn encode(value: &Value) -> Bytes {
    let kind = value["type"].as_str().unwrap_or("message");
    Bytes::from(format!("event: {kind}\ndata: {value}\n\n"))
}

enum Open {
    Message {
        id: String,
        text: String,
    },
    Call {
        index: u32,
        id: String,
        call_id: String,
        name: String,
        arguments: String,
    },
}

/// The state of one translated stream.
pub struct Translator {
    response: Value,
    sequence: u64,
    open: Option<Open>,
    reasoning: String,
    finish_reason: Option<FinishReason>,
    usage: Option<Usage>,
}

impl Translator {
    pub fn new(skeleton: Value) -> Self {
        Self {
            response: skeleton,
            sequence: 0,
            open: None,
            reasoning: String::new(),
            finish_reason: None,
            usage: None,
        }
    }

    fn push(&mut self, events: &mut Vec<Value>, mut event: Value) {
        event["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        events.push(event);
    }

    fn output_index(&self) -> usize {
        self.response["output"].as_array().map_or(0, Vec::len)
    }

    /// `response.created` and `response.in_progress`.
    pub fn start(&mut self) -> Vec<Value> {
        let mut events = Vec::new();
        for kind in ["response.created", "response.in_progress"] {
            let event = json!({"type": kind, "response": self.response});
            self.push(&mut events, event);
        }
        events
    }

    pub fn chunk(&mut self, chunk: &ChatChunk) -> Vec<Value> {
        let mut events = Vec::new();
        if let Some(usage) = &chunk.usage {
            self.usage = Some(usage.clone());
        }
        let Some(choice) = chunk.choices.first() else {
            return events;
        };
        let delta = &choice.delta;
        if let Some(reasoning) = &delta.reasoning_content {
            self.reasoning.push_str(reasoning);
        }
        if let Some(text) = delta.content.as_deref().filter(|t| !t.is_empty()) {
            self.text(&mut events, text);
        }
        for call in delta.tool_calls.iter().flatten() {
            self.call(&mut events, call);
        }
        if let Some(reason) = &choice.finish_reason {
            self.finish_reason = Some(reason.clone());
        }
        events
    }

    fn text(&mut self, events: &mut Vec<Value>, text: &str) {
        if !matches!(self.open, Some(Open::Message { .. })) {
            self.close(events);
            let id = ids::message();
            let index = self.output_index();
            let item = output::message_item(&id, None, "in_progress");
            self.push(
                events,
                json!({"type": "response.output_item.added", "output_index": index, "item": item}),
            );
            self.push(
                events,
                json!({"type": "response.content_part.added", "item_id": id,
                "output_index": index, "content_index": 0, "part": output::output_text("")}),
            );
            self.open = Some(Open::Message {
                id,
                text: String::new(),
            });
        }
        let index = self.output_index();
        if let Some(Open::Message { id, text: so_far }) = &mut self.open {
            so_far.push_str(text);
            let event = json!({"type": "response.output_text.delta", "item_id": id, "output_index": index,
                "content_index": 0, "delta": text, "logprobs": []});
            self.push(events, event);
        }
    }

    fn call(&mut self, events: &mut Vec<Value>, call: &ToolCallDelta) {
        let index = call.index.unwrap_or(0);
        let same = matches!(&self.open, Some(Open::Call { index: open, .. }) if *open == index);
        if !same {
            self.close(events);
            let (id, call_id) = (ids::function_call(), call.id.clone().unwrap_or_default());
            let name = call.function.name.clone().unwrap_or_default();
            let item = output::function_call_item(&id, &call_id, &name, "", "in_progress");
            let output_index = self.output_index();
            self.push(
                events,
                json!({"type": "response.output_item.added", "output_index": output_index, "item": item}),
            );
            self.open = Some(Open::Call {
                index,
                id,
                call_id,
                name,
                arguments: String::new(),
            });
        }
        let output_index = self.output_index();
        if let (Some(piece), Some(Open::Call { id, arguments, .. })) = (
            call.function.arguments.as_deref().filter(|a| !a.is_empty()),
            &mut self.open,
        ) {
            arguments.push_str(piece);
            let event = json!({"type": "response.function_call_arguments.delta", "item_id": id,
                "output_index": output_index, "delta": piece});
            self.push(events, event);
        }
    }

    /// Emits reasoning gathered so far as one finished item.
    fn flush_reasoning(&mut self, events: &mut Vec<Value>) {
        if self.reasoning.is_empty() {
            return;
        }
        let item = output::reasoning_item(&std::mem::take(&mut self.reasoning));
        let index = self.output_index();
        self.push(
            events,
            json!({"type": "response.output_item.added", "output_index": index, "item": item}),
        );
        self.push(
            events,
            json!({"type": "response.output_item.done", "output_index": index, "item": item}),
        );
        self.add_output(item);
    }

    fn add_output(&mut self, item: Value) {
        if let Some(output) = self.response["output"].as_array_mut() {
            output.push(item);
        }
    }

    /// Finishes the open item (a message or a function call).
    fn close(&mut self, events: &mut Vec<Value>) {
        self.flush_reasoning(events);
        let index = self.output_index();
        let item = match self.open.take() {
            None => return,
            Some(Open::Message { id, text }) => {
                let part = output::output_text(&text);
                self.push(
                    events,
                    json!({"type": "response.output_text.done", "item_id": id, "output_index": index,
                    "content_index": 0, "text": text, "logprobs": []}),
                );
                self.push(
                    events,
                    json!({"type": "response.content_part.done", "item_id": id, "output_index": index,
                    "content_index": 0, "part": part}),
                );
                output::message_item(&id, Some(&text), "completed")
            }
            Some(Open::Call {
                id,
                call_id,
                name,
                arguments,
                ..
            }) => {
                self.push(
                    events,
                    json!({"type": "response.function_call_arguments.done", "item_id": id,
                    "output_index": index, "name": name, "arguments": arguments}),
                );
                output::function_call_item(&id, &call_id, &name, &arguments, "completed")
            }
        };
        self.push(
            events,
            json!({"type": "response.output_item.done", "output_index": index, "item": item}),
        );
        self.add_output(item);
    }

    /// Closes what is open and finishes the response; returns the events and the response.
    pub fn finish(&mut self) -> (Vec<Value>, Value) {
        let mut events = Vec::new();
        self.close(&mut events);
        output::finish(
            &mut self.response,
            self.finish_reason.as_ref(),
            self.usage.as_ref(),
        );
        let kind = if self.response["status"] == "incomplete" {
            "response.incomplete"
        } else {
            "response.completed"
        };
        let event = json!({"type": kind, "response": self.response});
        self.push(&mut events, event);
        (events, self.response.clone())
    }

    /// A failure after the stream started: `response.failed`.
    pub fn fail(&mut self, err: ApiError) -> Vec<Value> {
        let body = err.into_stream_event();
        let code = body["error"]["code"].clone();
        self.response["status"] = json!("failed");
        self.response["error"] = json!({
            "code": if code.is_null() { json!("server_error") } else { code },
            "message": body["error"]["message"],
        });
        let mut events = Vec::new();
        let event = json!({"type": "response.failed", "response": self.response});
        self.push(&mut events, event);
        events
    }
}

/// What to do with the finished response before `response.completed` is sent
/// (storing it, so a client that saw that event can continue from it).
pub type OnFinish = Box<dyn FnOnce(Value) -> BoxFuture<'static, ()> + Send>;

/// The SSE response for `chunks`, translated.
pub fn sse(chunks: Chunks, mut translator: Translator, on_finish: OnFinish) -> Response {
    let events = async_stream::stream! {
        let mut chunks = chunks;
        for event in translator.start() {
            yield Ok::<_, std::convert::Infallible>(encode(&event));
        }
        while let Some(item) = chunks.next().await {
            match item {
                Ok(chunk) => {
                    for event in translator.chunk(&chunk) {
                        yield Ok(encode(&event));
                    }
                }
                Err(err) => {
                    for event in translator.fail(err) {
                        yield Ok(encode(&event));
                    }
                    return;
                }
            }
        }
        let (events, response) = translator.finish();
        on_finish(response).await;
        for event in events {
            yield Ok(encode(&event));
        }
    };
    sse::response(Body::from_stream(events))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(delta: Value, finish: Option<&str>) -> ChatChunk {
        typed(json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}))
    }

    fn typed(chunk: Value) -> ChatChunk {
        serde_json::from_value(chunk).unwrap()
    }

    #[test]
    fn text_then_a_call_in_openai_order() {
        let mut t = Translator::new(json!({"id": "resp_1", "output": [], "status": "in_progress"}));
        let mut events = t.start();
        for c in [
            chunk(json!({"role": "assistant", "content": ""}), None),
            chunk(json!({"content": "he"}), None),
            chunk(json!({"content": "llo"}), None),
            chunk(
                json!({"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "f", "arguments": ""}}]}),
                None,
            ),
            chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}),
                Some("tool_calls"),
            ),
            typed(json!({"choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": 3}})),
        ] {
            events.extend(t.chunk(&c));
        }
        let (end, response) = t.finish();
        events.extend(end);
        let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
                "response.output_item.done",
                "response.completed",
            ]
        );
        let numbers: Vec<u64> = events
            .iter()
            .map(|e| e["sequence_number"].as_u64().unwrap())
            .collect();
        assert_eq!(numbers, (0..events.len() as u64).collect::<Vec<_>>());
        assert_eq!(response["output"][0]["content"][0]["text"], "hello");
        assert_eq!(response["output"][1]["arguments"], "{}");
        assert_eq!(events[10]["output_index"], 1);
        assert_eq!(response["usage"]["total_tokens"], 5);
        assert!(encode(&events[0]).starts_with(b"event: response.created\ndata: {"));
    }

    #[test]
    fn a_failure_mid_stream_is_response_failed() {
        let mut t =
            Translator::new(json!({"id": "resp_1", "output": [], "status": "in_progress", "error": null}));
        let mut events = t.start();
        events.extend(t.chunk(&chunk(json!({"content": "par"}), None)));
        let err = ApiError::from(crate::providers::ProviderError::Timeout {
            provider: "openai".into(),
            after: std::time::Duration::from_secs(1),
        });
        let failed = t.fail(err);
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0]["type"], "response.failed");
        assert_eq!(failed[0]["sequence_number"], events.len() as u64);
        assert_eq!(failed[0]["response"]["status"], "failed");
        assert_eq!(failed[0]["response"]["error"]["code"], "upstream_timeout");
        assert!(failed[0]["response"]["error"]["message"].is_string());
    }
}
