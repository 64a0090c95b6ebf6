//! An agent run's events as an OpenAI chat completion: a `chat.completion`
//! once it ends, or `chat.completion.chunk` server-sent events as it goes.
//! Tool activity rides in an extra `x_onyx` field that OpenAI clients
//! ignore. The same stream serves the chat request that started the run and
//! every client that re-attaches later (`GET /v1/runs/{id}/events`), which
//! gets the whole answer so far, then the rest.

use std::sync::Arc;

use futures::StreamExt;
use serde_json::{Value, json};

use super::chat_core::Chunks;
use super::error::ApiError;
use super::views::ToolActivity;
use crate::agents::{AgentError, Event, LiveRun, Outcome};

/// Names the run a streaming (or any) agent response belongs to.
pub const RUN_HEADER: &str = "x-onyx-run-id";

fn created() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The completion id of a run: the same for every client that follows it.
fn completion_id(run: &LiveRun) -> String {
    format!("chatcmpl-{}", run.id.replace('-', ""))
}

/// What `x_onyx` says about one event, if it is tool activity or a notice.
fn activity(event: &Event) -> Option<Value> {
    let activity = match event {
        Event::ToolStarted { id, name, arguments } => ToolActivity::ToolCallStarted {
            id: id.clone(),
            name: name.clone(),
            arguments: arguments.clone(),
        },
        Event::ToolFinished {
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
        Event::ApprovalRequired { id, tool, arguments } => ToolActivity::ApprovalRequired {
            approval_id: id.clone(),
            name: tool.clone(),
            arguments: arguments.clone(),
        },
        Event::Compacted {
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
pub async fn collect(run: &Arc<LiveRun>) -> Result<Value, ApiError> {
    let mut events = run.subscribe();
    let mut log = Vec::new();
    while let Some(event) = events.next().await {
        if let Some(entry) = activity(&event) {
            log.push(entry);
        }
        match event.as_ref() {
            Event::Done(outcome) => {
                let Outcome {
                    content,
                    finish_reason,
                    client_tool_calls,
                    usage,
                    iterations,
                    model,
                    ..
                } = outcome.as_ref();
                let mut message = json!({"role": "assistant", "content": content, "refusal": null});
                if let Some(calls) = client_tool_calls {
                    message["tool_calls"] = json!(calls);
                }
                return Ok(json!({
                    "id": completion_id(run), "object": "chat.completion", "created": created(), "model": model,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": null}],
                    "usage": usage,
                    "x_onyx": {"events": log, "iterations": iterations, "run_id": run.id},
                }));
            }
            Event::Failed(err) => return Err(ApiError::Agent(err.clone())),
            _ => {}
        }
    }
    Err(AgentError::NoAnswer.into())
}

/// The run as `chat.completion.chunk` objects, from its first event to its last.
pub fn chunks(run: &Arc<LiveRun>, include_usage: bool) -> Chunks {
    let (id, model) = (completion_id(run), format!("onyx:{}", run.agent));
    let chunk = move |choices: Value, extra: Option<(&str, Value)>| {
        let mut chunk = json!({"id": id, "object": "chat.completion.chunk", "created": created(), "model": model, "choices": choices});
        if let Some((key, value)) = extra {
            chunk[key] = value;
        }
        chunk
    };
    let run_id = run.id.clone();
    let mut events = run.subscribe();
    let body = async_stream::stream! {
        yield Ok::<_, ApiError>(chunk(
            json!([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]),
            Some(("x_onyx", json!({"type": "run_started", "run_id": run_id}))),
        ));
        while let Some(event) = events.next().await {
            if let Some(entry) = activity(&event) {
                yield Ok(chunk(json!([]), Some(("x_onyx", entry))));
                continue;
            }
            match event.as_ref() {
                Event::Text(text) => {
                    yield Ok(chunk(json!([{"index": 0, "delta": {"content": text}, "finish_reason": null}]), None));
                }
                Event::Done(outcome) => {
                    if let Some(calls) = &outcome.client_tool_calls {
                        let indexed: Vec<Value> = calls.iter().enumerate().map(|(i, c)| {
                            let mut c = json!(c);
                            c["index"] = json!(i);
                            c
                        }).collect();
                        yield Ok(chunk(json!([{"index": 0, "delta": {"tool_calls": indexed}, "finish_reason": null}]), None));
                    }
                    yield Ok(chunk(json!([{"index": 0, "delta": {}, "finish_reason": outcome.finish_reason}]), Some(("x_onyx", json!({"type": "run_finished", "iterations": outcome.iterations, "tools_used": outcome.tools_used})))));
                    if include_usage {
                        yield Ok(chunk(json!([]), Some(("usage", json!(outcome.usage)))));
                    }
                }
                Event::Failed(err) => {
                    yield Err(ApiError::Agent(err.clone()));
                    break;
                }
                _ => {}
            }
        }
    };
    body.boxed()
}
