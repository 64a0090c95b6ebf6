//! `streamGenerateContent?alt=sse` → OpenAI `chat.completion.chunk`s.
//!
//! Each event is a partial `GenerateContentResponse`: its text parts become
//! content deltas, each `functionCall` part (Gemini sends a call whole) a
//! tool-call delta with the next index, `finishReason` the finish chunk.
//! Usage comes with the events (the last one counts) and follows at the end;
//! the stream has no end marker of its own, so it ends when the body does,
//! and a body that ends before a `finishReason` is an error.

use serde_json::Value;

use super::response::{Response, finish_reason, tool_call};
use crate::chat::{ChatChunk, ChunkFactory, Delta, FinishReason, ToolCallDelta, Usage};
use crate::providers::ProviderError;

pub struct StreamTranslator {
    provider: String,
    chunks: ChunkFactory,
    started: bool,
    next_tool_index: u32,
    finished: bool,
    usage: Option<Usage>,
}

impl StreamTranslator {
    pub fn new(provider: &str, model: &str) -> Self {
        Self {
            provider: provider.to_string(),
            chunks: ChunkFactory::new(crate::providers::completion_id(), model.to_string()),
            started: false,
            next_tool_index: 0,
            finished: false,
            usage: None,
        }
    }

    fn bad(&self, detail: impl ToString) -> ProviderError {
        ProviderError::BadResponse {
            provider: self.provider.clone(),
            detail: detail.to_string(),
        }
    }

    /// The chunks one event's data makes.
    pub fn on_event(&mut self, data: &str) -> Result<Vec<ChatChunk>, ProviderError> {
        let value: Value = serde_json::from_str(data).map_err(|err| self.bad(err))?;
        if let Some(error) = value.get("error") {
            return Err(ProviderError::Upstream {
                provider: self.provider.clone(),
                status: error["code"]
                    .as_u64()
                    .and_then(|c| u16::try_from(c).ok())
                    .unwrap_or(500),
                message: error["message"]
                    .as_str()
                    .unwrap_or("the stream failed")
                    .to_string(),
                kind: None,
                code: error["status"].as_str().map(str::to_ascii_lowercase),
                param: None,
            });
        }
        let response: Response = serde_json::from_value(value).map_err(|err| self.bad(err))?;
        let mut out = Vec::new();
        if !self.started {
            self.started = true;
            out.push(self.chunks.delta(Delta::start(), None));
        }
        if let Some(usage) = response.usage_metadata {
            self.usage = Some(usage.to_usage());
        }
        let Some(candidate) = response.candidates.into_iter().next() else {
            if response.prompt_feedback.is_some() {
                self.finished = true;
                out.push(
                    self.chunks
                        .delta(Delta::default(), Some(FinishReason::ContentFilter)),
                );
            }
            return Ok(out);
        };
        for part in candidate.content.iter().flat_map(|c| &c.parts) {
            if let Some(call) = tool_call(part) {
                let index = self.next_tool_index;
                self.next_tool_index += 1;
                let delta = ToolCallDelta::start(index, call.id, call.function.name, call.function.arguments);
                out.push(self.chunks.delta(Delta::tool_call(delta), None));
            } else if let Some(text) = &part.text
                && !part.thought
                && !text.is_empty()
            {
                out.push(self.chunks.delta(Delta::text(text.clone()), None));
            }
        }
        if let Some(reason) = candidate.finish_reason.as_deref()
            && !self.finished
        {
            self.finished = true;
            let finish = finish_reason(Some(reason), self.next_tool_index > 0);
            out.push(self.chunks.delta(Delta::default(), Some(finish)));
        }
        Ok(out)
    }

    /// After the body ended: the usage chunk, or the error of a cut-off stream.
    pub fn finish(&mut self) -> Result<Vec<ChatChunk>, ProviderError> {
        crate::providers::sse::ending(
            &self.chunks,
            &self.provider,
            self.finished,
            self.usage.take(),
            "a finishReason",
        )
    }
}

impl crate::providers::sse::EventTranslator for StreamTranslator {
    fn on_event(&mut self, data: &str) -> Result<Vec<ChatChunk>, ProviderError> {
        StreamTranslator::on_event(self, data)
    }

    fn finish(&mut self) -> Result<Vec<ChatChunk>, ProviderError> {
        StreamTranslator::finish(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_and_whole_function_calls_become_deltas_then_usage() {
        let mut t = StreamTranslator::new("g", "gemini-x");
        let events = [
            json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "Hel"}]}}]}),
            json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "lo"},
                {"functionCall": {"name": "lookup", "args": {"q": "x"}}}]}, "finishReason": "STOP"}],
                "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 4}}),
        ];
        let mut chunks = Vec::new();
        for event in events {
            chunks.extend(t.on_event(&event.to_string()).unwrap());
        }
        chunks.extend(t.finish().unwrap());
        let chunks: Vec<Value> = chunks.iter().map(|c| serde_json::to_value(c).unwrap()).collect();
        assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
        let text: String = chunks
            .iter()
            .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
            .collect();
        assert_eq!(text, "Hello");
        let call = &chunks[3]["choices"][0]["delta"]["tool_calls"][0];
        assert_eq!(
            (call["index"].clone(), call["function"]["name"].clone()),
            (json!(0), json!("lookup"))
        );
        assert_eq!(call["function"]["arguments"], "{\"q\":\"x\"}");
        assert_eq!(chunks[4]["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(chunks[5]["usage"]["total_tokens"], 7);
    }

    #[test]
    fn errors_and_cut_off_streams_are_errors() {
        let mut t = StreamTranslator::new("g", "m");
        let err = t
            .on_event(r#"{"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}"#)
            .unwrap_err();
        assert!(
            matches!(err, ProviderError::Upstream { status: 503, .. }),
            "{err:?}"
        );
        let mut t = StreamTranslator::new("g", "m");
        t.on_event(r#"{"candidates": [{"content": {"parts": [{"text": "a"}]}}]}"#)
            .unwrap();
        assert!(matches!(t.finish(), Err(ProviderError::Connect { .. })));
    }
}
