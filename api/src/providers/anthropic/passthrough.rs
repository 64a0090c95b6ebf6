//! Messages API requests from Anthropic clients, sent upstream as they are:
//! only `model` is rewritten, so prompt-caching marks, thinking blocks and
//! beta fields arrive intact, and the client's `anthropic-beta` goes along.
//! Streams are handed on event by event. [`EventUsage`] reads the tokens an
//! answer reports, for the router's usage counting.

use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::Value;

use super::Anthropic;
use super::response::AnthropicUsage;
use crate::chat::Usage;
use crate::providers::{MessagesAnswer, MessagesCall, ProviderError, WithModel};

impl Anthropic {
    fn messages_request(&self, path: &str, model: &str, call: &MessagesCall) -> reqwest::RequestBuilder {
        let mut builder = self.request(reqwest::Method::POST, path).json(&WithModel {
            model,
            body: (&call.body).into(),
            without: &[],
            stream_usage: false,
        });
        if let Some(beta) = &call.beta {
            builder = builder.header("anthropic-beta", beta);
        }
        builder
    }

    pub(super) async fn passthrough(
        &self,
        model: &str,
        call: &MessagesCall,
    ) -> Result<MessagesAnswer, ProviderError> {
        let response = self.send(self.messages_request("/messages", model, call)).await?;
        if !call.stream() {
            let bytes = crate::providers::within(&self.name, self.timeout, response.bytes(), |err| {
                ProviderError::from_reqwest(&self.name, err, self.timeout)
            })
            .await?;
            let message = serde_json::from_slice(&bytes).map_err(|err| self.bad_response(err))?;
            return Ok(MessagesAnswer::Message(message));
        }
        let name = self.name.clone();
        let mut events = response.bytes_stream().eventsource();
        let events = async_stream::stream! {
            let mut stopped = false;
            while let Some(event) = events.next().await {
                let data = match event {
                    Ok(event) => event.data,
                    Err(err) => {
                        yield Err(ProviderError::BadResponse { provider: name.clone(), detail: err.to_string() });
                        return;
                    }
                };
                match serde_json::from_str::<Value>(&data) {
                    Ok(value) => {
                        stopped = matches!(value["type"].as_str(), Some("message_stop" | "error"));
                        yield Ok(value);
                    }
                    Err(err) => {
                        yield Err(ProviderError::BadResponse { provider: name.clone(), detail: format!("unreadable stream event: {err}") });
                        return;
                    }
                }
                if stopped {
                    return;
                }
            }
            if !stopped {
                yield Err(ProviderError::Connect { provider: name.clone(), detail: "the stream ended before message_stop".into() });
            }
        };
        Ok(MessagesAnswer::Events(events.boxed()))
    }

    pub(super) async fn count_tokens_upstream(
        &self,
        model: &str,
        call: &MessagesCall,
    ) -> Result<Value, ProviderError> {
        let response = self
            .send(self.messages_request("/messages/count_tokens", model, call))
            .await?;
        let bytes = crate::providers::within(&self.name, self.timeout, response.bytes(), |err| {
            ProviderError::from_reqwest(&self.name, err, self.timeout)
        })
        .await?;
        serde_json::from_slice(&bytes).map_err(|err| self.bad_response(err))
    }
}

/// The usage of a passed-through answer: a `message`'s `usage`, or what a
/// stream's `message_start` and `message_delta` events report between them.
#[derive(Default)]
pub struct EventUsage {
    usage: AnthropicUsage,
}

impl EventUsage {
    /// The usage of a whole `message` object.
    pub fn of_message(message: &Value) -> Option<Usage> {
        let usage = serde_json::from_value::<AnthropicUsage>(message.get("usage")?.clone()).ok()?;
        Some(usage.to_usage())
    }

    /// Reads one stream event; the final usage comes with `message_delta`.
    pub fn observe(&mut self, event: &Value) -> Option<Usage> {
        match event["type"].as_str()? {
            "message_start" => {
                let usage = event["message"].get("usage")?.clone();
                self.usage = serde_json::from_value(usage).ok()?;
                None
            }
            "message_delta" => {
                let delta: AnthropicUsage = serde_json::from_value(event.get("usage")?.clone()).ok()?;
                self.usage.output_tokens = delta.output_tokens;
                // Newer streams repeat the input counts here; they are final.
                if delta.input_tokens > 0 {
                    self.usage.input_tokens = delta.input_tokens;
                }
                self.usage.cache_read_input_tokens = delta
                    .cache_read_input_tokens
                    .or(self.usage.cache_read_input_tokens);
                self.usage.cache_creation_input_tokens = delta
                    .cache_creation_input_tokens
                    .or(self.usage.cache_creation_input_tokens);
                Some(self.usage.to_usage())
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stream_usage_adds_the_cache_to_the_prompt() {
        let mut usage = EventUsage::default();
        let start = json!({"type": "message_start", "message": {"usage": {"input_tokens": 5, "cache_read_input_tokens": 10, "cache_creation_input_tokens": 2, "output_tokens": 1}}});
        assert_eq!(usage.observe(&start), None);
        let delta = json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 9}});
        let got = usage.observe(&delta).unwrap();
        assert_eq!(
            (got.prompt_tokens, got.completion_tokens, got.cached_tokens()),
            (17, 9, 10)
        );
        let whole =
            EventUsage::of_message(&json!({"usage": {"input_tokens": 3, "output_tokens": 4}})).unwrap();
        assert_eq!((whole.prompt_tokens, whole.completion_tokens), (3, 4));
    }
}
