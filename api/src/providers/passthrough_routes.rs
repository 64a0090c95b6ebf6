//! Requests in an upstream's own protocol, passed through by the [`Router`]:
//! the Responses API to OpenAI-compatible upstreams that speak it, the
//! Messages API (and its token counter) to Anthropic. Each is admitted
//! against the caller's budgets, retried and walked through fallbacks like a
//! chat call, and its usage is read from the protocol's own answer or events
//! and recorded the same way.

use futures::StreamExt;
use serde_json::{Map, Value};

use super::anthropic::EventUsage;
use super::meter::Attribution;
use super::router::{ModelTarget, Router};
use super::{MessagesAnswer, MessagesCall, ModelRef, ProviderError, ResponsesAnswer, Usage};

impl Router {
    /// A Responses API call passed through to upstreams that speak it.
    pub async fn responses(
        &self,
        targets: &[ModelTarget],
        body: &Map<String, Value>,
        stream: bool,
        who: &Attribution,
    ) -> Result<(ResponsesAnswer, ModelRef, Option<f64>), ProviderError> {
        let (answer, served_by, mut settle) = self
            .run_metered(targets, who, body.into(), |t| {
                t.provider.responses(&t.model, body, stream)
            })
            .await?;
        Ok(match answer {
            ResponsesAnswer::Response(response) => {
                settle.observe(self.metrics(), Usage::from_responses_usage(&response));
                (ResponsesAnswer::Response(response), served_by, settle.finish())
            }
            ResponsesAnswer::Events(events) => {
                let metrics = self.metrics().clone();
                let events = events.inspect(move |event| {
                    let finished = event.as_ref().ok().filter(|e| {
                        matches!(
                            e["type"].as_str(),
                            Some("response.completed" | "response.incomplete" | "response.failed")
                        )
                    });
                    if let Some(usage) = finished.and_then(|e| Usage::from_responses_usage(&e["response"])) {
                        // The closure owns the guard: it settles when the stream is dropped.
                        let guard = &mut settle;
                        guard.observe(&metrics, Some(usage));
                    }
                });
                (ResponsesAnswer::Events(events.boxed()), served_by, None)
            }
        })
    }

    /// A Messages API request passed through to Anthropic upstreams.
    pub async fn messages(
        &self,
        targets: &[ModelTarget],
        call: &MessagesCall,
    ) -> Result<(MessagesAnswer, ModelRef, Option<f64>), ProviderError> {
        let (answer, served_by, mut settle) = self
            .run_metered(targets, &call.who, (&call.body).into(), |t| {
                t.provider.messages(&t.model, call)
            })
            .await?;
        Ok(match answer {
            MessagesAnswer::Message(message) => {
                settle.observe(self.metrics(), EventUsage::of_message(&message));
                (MessagesAnswer::Message(message), served_by, settle.finish())
            }
            MessagesAnswer::Events(events) => {
                let metrics = self.metrics().clone();
                let mut usage = EventUsage::default();
                let events = events.inspect(move |event| {
                    if let Some(usage) = event.as_ref().ok().and_then(|e| usage.observe(e)) {
                        let guard = &mut settle;
                        guard.observe(&metrics, Some(usage));
                    }
                });
                (MessagesAnswer::Events(events.boxed()), served_by, None)
            }
        })
    }

    /// The upstream's token count for a Messages API request (free: not metered).
    pub async fn count_tokens(
        &self,
        targets: &[ModelTarget],
        call: &MessagesCall,
    ) -> Result<Value, ProviderError> {
        let (count, _) = self
            .run(targets, |t| t.provider.count_tokens(&t.model, call))
            .await?;
        Ok(count)
    }
}
