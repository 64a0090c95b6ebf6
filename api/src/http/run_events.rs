//! An agent run's events as an OpenAI chat completion: a `chat.completion`
//! once it ends, or `chat.completion.chunk` server-sent events as it goes.
//! Tool activity rides in an extra `x_onyx` field that OpenAI clients
//! ignore. The same stream serves the chat request that started the run and
//! every client that re-attaches later (`GET /v1/runs/{id}/events`), which
//! gets the whole answer so far, then the rest.

use std::sync::Arc;

use futures::StreamExt;
use serde_json::{Value, json};

use super::answer::{BODY_FIELD, Chunks};
use super::error::ApiError;
use super::ui_bodies::ToolActivity;
use crate::agents::{AgentError, LiveRun, Outcome, RunEvent};
use crate::chat::{ChatChunk, ChunkFactory, Completion, Delta, FinishReason, Message, ToolCallDelta};

/// Names the run a streaming (or any) agent response belongs to.
pub const RUN_HEADER: &str = "x-onyx-run-id";

/// The completion id of a run: the same for every client that follows it.
fn completion_id(run: &LiveRun) -> String {
    format!("chatcmpl-{}", run.id.replace('-', ""))
}

/// What `x_onyx` says about one event, if it is tool activity or a notice.
fn activity(event: &RunEvent) -> Option<Value> {
    let activity = match event {
        RunEvent::ToolStarted { id, name, arguments } => ToolActivity::ToolCallStarted {
            id: id.clone(),
            name: name.clone(),
            arguments: arguments.clone(),
        },
        RunEvent::ToolFinished {
            id,
            name,
            summary,
            is_error,
        } => ToolActivity::ToolCallFinished {
            id: id.clone(),
            name: name.clone(),
            result_summary: summary.clone(),
            is_error: *is_error,
        },
        RunEvent::ApprovalRequired { id, tool, arguments } => ToolActivity::ApprovalRequired {
            approval_id: id.clone(),
            name: tool.clone(),
            arguments: arguments.clone(),
        },
        RunEvent::Compacted {
            notice,
            before_tokens,
            after_tokens,
            fallback,
        } => ToolActivity::Compacted {
            notice: notice.clone(),
            before_tokens: *before_tokens,
            after_tokens: *after_tokens,
            fallback: *fallback,
        },
        _ => return None,
    };
    serde_json::to_value(activity).ok()
}

/// Waits for the run to end; its answer as one `chat.completion`.
pub async fn collect(run: &Arc<LiveRun>) -> Result<Completion, ApiError> {
    let mut events = run.subscribe();
    let mut log = Vec::new();
    while let Some(event) = events.next().await {
        if let Some(entry) = activity(&event) {
            log.push(entry);
        }
        match event.as_ref() {
            RunEvent::Done(outcome) => {
                let Outcome {
                    content,
                    finish_reason,
                    client_tool_calls,
                    usage,
                    iterations,
                    model,
                    ..
                } = outcome.as_ref();
                let message = Message::answer(
                    Some(content.clone()),
                    client_tool_calls.clone().unwrap_or_default(),
                );
                let mut completion = Completion::single(
                    completion_id(run),
                    model.clone(),
                    message,
                    FinishReason::parse(finish_reason),
                    usage.clone(),
                );
                completion.extra.insert(
                    BODY_FIELD.into(),
                    json!({"events": log, "iterations": iterations, "run_id": run.id}),
                );
                return Ok(completion);
            }
            RunEvent::Failed(err) => return Err(ApiError::Agent(err.clone())),
            _ => {}
        }
    }
    Err(AgentError::NoAnswer.into())
}

/// `chunk` with Onyx's `x_onyx` field.
fn with_onyx(mut chunk: ChatChunk, onyx: Value) -> ChatChunk {
    chunk.extra.insert(BODY_FIELD.into(), onyx);
    chunk
}

/// The run as `chat.completion.chunk` objects, from its first event to its last.
pub fn chunks(run: &Arc<LiveRun>, include_usage: bool) -> Chunks {
    let chunks = ChunkFactory::new(completion_id(run), format!("onyx:{}", run.agent));
    let run_id = run.id.clone();
    let mut events = run.subscribe();
    let body = async_stream::stream! {
        let started = json!({"type": "run_started", "run_id": run_id});
        yield Ok::<_, ApiError>(with_onyx(chunks.delta(Delta::start(), None), started));
        while let Some(event) = events.next().await {
            if let Some(entry) = activity(&event) {
                yield Ok(with_onyx(chunks.bare(), entry));
                continue;
            }
            match event.as_ref() {
                RunEvent::Text(text) => yield Ok(chunks.delta(Delta::text(text.as_str()), None)),
                RunEvent::Done(outcome) => {
                    if let Some(calls) = &outcome.client_tool_calls {
                        let delta = Delta {
                            tool_calls: Some(calls.iter().zip(0..).map(|(call, i)| ToolCallDelta::whole(i, call)).collect()),
                            ..Delta::default()
                        };
                        yield Ok(chunks.delta(delta, None));
                    }
                    let finish = FinishReason::parse(outcome.finish_reason);
                    let finished = json!({"type": "run_finished", "iterations": outcome.iterations, "tools_used": outcome.tools_used});
                    yield Ok(with_onyx(chunks.delta(Delta::default(), Some(finish)), finished));
                    if include_usage {
                        yield Ok(chunks.usage(outcome.usage.clone()));
                    }
                }
                RunEvent::Failed(err) => {
                    yield Err(ApiError::Agent(err.clone()));
                    break;
                }
                _ => {}
            }
        }
    };
    body.boxed()
}
