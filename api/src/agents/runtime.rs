//! One run of an agent: compose the system prompt, call the model with the
//! agent's tools, run the tool calls it makes (in parallel, with permission
//! checks and approvals), feed the results back, and repeat until it answers
//! or the iteration limit. Events (text deltas, tool activity, approval
//! requests) stream out as they happen; dropping the stream stops the run.
//! At the end the whole exchange goes to the session and one line to today's
//! daily log.

use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::{Map, Value, json};

use super::Agents;
use super::approvals::Decision;
use super::error::AgentError;
use super::prompt::{self, Inputs};
use super::registry::AgentDef;
use super::tools::{self, ToolContext, ToolKind, ToolOutput, ToolSpec};
use crate::clock;
use crate::config::PermissionMode;
use crate::memory::NoteTarget;
use crate::providers::types::ChatRequest;
use crate::providers::{ChatCall, ProviderError, Usage};
use crate::sessions::{LogMessage, SessionMeta};

pub struct RunRequest {
    pub agent: AgentDef,
    /// The conversation so far (session history and the client's messages),
    /// without system messages.
    pub messages: Vec<Value>,
    /// The client's own system messages, kept after the composed prompt.
    pub client_system: Vec<Value>,
    /// Tools the client defined; a call to one ends the run and goes back to it.
    pub client_tools: Vec<Value>,
    /// The messages of this turn to record (the client's new ones).
    pub turn: Vec<LogMessage>,
    pub session: Option<SessionMeta>,
    pub include_memory: bool,
    /// Whether a person can approve tool calls (not for cron or wake-ups).
    pub attended: bool,
    /// Stream from the upstream too (text deltas arrive as they are made).
    pub stream: bool,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u32>,
}

impl RunRequest {
    /// A run nobody watches live (a schedule, a chat platform, a wake-up): the
    /// session's history, then one new user message, with an optional system
    /// note about the situation. Dangerous tools are not offered in `ask` mode.
    pub fn unattended(
        agent: AgentDef,
        history: &[LogMessage],
        message: Value,
        note: Option<String>,
        session: Option<SessionMeta>,
    ) -> Self {
        Self {
            agent,
            turn: crate::sessions::recorder::client_messages(std::slice::from_ref(&message)),
            messages: history
                .iter()
                .map(LogMessage::to_openai)
                .chain([message])
                .collect(),
            client_system: note
                .map(|n| json!({"role": "system", "content": n}))
                .into_iter()
                .collect(),
            client_tools: Vec::new(),
            session,
            include_memory: false,
            attended: false,
            stream: false,
            temperature: None,
            max_tokens: None,
        }
    }
}

#[derive(Debug)]
pub enum Event {
    Text(String),
    ToolStarted {
        id: String,
        name: String,
        arguments: Value,
    },
    ToolFinished {
        id: String,
        name: String,
        summary: String,
        is_error: bool,
    },
    ApprovalRequired {
        id: String,
        tool: String,
        arguments: Value,
    },
    Done(Box<Outcome>),
    /// The run could not finish.
    Failed(AgentError),
}

#[derive(Debug, Clone)]
pub struct Outcome {
    pub content: String,
    /// `stop`, `tool_calls` (the client's tools) or `length` (iteration limit).
    pub finish_reason: &'static str,
    /// Calls to the client's own tools, when the model made any.
    pub client_tool_calls: Option<Value>,
    pub usage: Usage,
    pub model: String,
    pub iterations: u32,
    pub tools_used: Vec<String>,
}

/// One model answer, assembled.
struct Step {
    content: String,
    tool_calls: Vec<Value>,
    usage: Option<Usage>,
}

type Sender = tokio::sync::mpsc::UnboundedSender<Event>;

impl Agents {
    /// Starts a run; the events end with `Done` or `Failed`.
    pub fn run(self: &Arc<Self>, request: RunRequest) -> BoxStream<'static, Event> {
        let agents = self.clone();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let work = async move { agents.drive(request, tx).await };
        async_stream::stream! {
            let work = work;
            tokio::pin!(work);
            loop {
                tokio::select! {
                    Some(event) = rx.recv() => yield event,
                    result = &mut work => {
                        while let Ok(event) = rx.try_recv() {
                            yield event;
                        }
                        yield match result {
                            Ok(outcome) => Event::Done(Box::new(outcome)),
                            Err(err) => Event::Failed(err),
                        };
                        break;
                    }
                }
            }
        }
        .boxed()
    }

    async fn drive(&self, request: RunRequest, tx: Sender) -> Result<Outcome, AgentError> {
        let agent = request.agent.clone();
        let model = agent.model.clone().ok_or_else(|| AgentError::NoModel {
            agent: agent.id.clone(),
        })?;
        let targets = self.router.resolve(&model).map_err(|source| AgentError::Route {
            agent: agent.id.clone(),
            source,
        })?;
        let mode = match (agent.permission_mode, request.attended) {
            (PermissionMode::Ask, false) => PermissionMode::Safe,
            (mode, _) => mode,
        };
        let offered = tools::offered(&agent, mode, &self.tools);
        let inbox = self.inbox.claim(&agent.id).await.unwrap_or_default();
        let last_user = last_user_text(&request.messages);
        let composed = prompt::compose(
            &self.memory,
            Inputs {
                agent: &agent.id,
                now: clock::now(),
                timezone: agent.timezone,
                session: request.session.as_ref().map(|s| s.id.as_str()),
                inbox: &inbox,
                memory_query: request.include_memory.then_some(last_user.as_str()),
            },
        )
        .await;
        let mut messages = composed.messages(&request.client_system, &request.messages);
        let mut tool_defs: Vec<Value> = offered.iter().map(ToolSpec::function).collect();
        tool_defs.extend(request.client_tools.iter().cloned());
        let client_tool_names: Vec<String> = request
            .client_tools
            .iter()
            .filter_map(|t| t["function"]["name"].as_str().map(String::from))
            .collect();
        let context = ToolContext {
            agent: agent.clone(),
            memory: self.memory.clone(),
            sessions: self.sessions.clone(),
            inbox: self.inbox.clone(),
            tasks: self.tasks.clone(),
            settings: self.tools.clone(),
            known_agents: self
                .registry
                .list()
                .await
                .map(|l| l.into_iter().map(|a| a.id).collect())
                .unwrap_or_default(),
            wake: self.wake.clone(),
        };
        let mut turn = request.turn.clone();
        let mut usage = Usage::default();
        let mut tools_used: Vec<String> = Vec::new();
        let mut outcome = None;
        let mut iterations = 0;
        while iterations < self.max_iterations {
            iterations += 1;
            let step = match self.step(&targets, &request, &messages, &tool_defs, &tx).await {
                Ok(step) => step,
                Err(err) => {
                    let _ = self
                        .inbox
                        .release(&inbox.iter().map(|m| m.id.clone()).collect::<Vec<_>>())
                        .await;
                    return Err(err.into());
                }
            };
            if let Some(u) = &step.usage {
                usage += *u;
            }
            let mut assistant = json!({"role": "assistant", "content": step.content});
            if !step.tool_calls.is_empty() {
                assistant["tool_calls"] = Value::Array(step.tool_calls.clone());
            }
            turn.extend(
                LogMessage::from_openai(&assistant, Some(&model))
                    .map(|m| m.with_usage(step.usage.map(|u| json!(u)))),
            );
            messages.push(assistant);
            if step.tool_calls.is_empty() {
                outcome = Some((step.content, "stop", None));
                break;
            }
            let to_client: Vec<Value> = step
                .tool_calls
                .iter()
                .filter(|c| {
                    client_tool_names
                        .iter()
                        .any(|n| c["function"]["name"] == n.as_str())
                })
                .cloned()
                .collect();
            if !to_client.is_empty() {
                outcome = Some((step.content, "tool_calls", Some(Value::Array(to_client))));
                break;
            }
            let results =
                futures::future::join_all(step.tool_calls.iter().map(|call| {
                    self.run_tool(&context, &offered, mode, request.session.as_ref(), call, &tx)
                }))
                .await;
            for (call, output) in step.tool_calls.iter().zip(results) {
                let name = call["function"]["name"].as_str().unwrap_or_default().to_string();
                if !tools_used.contains(&name) {
                    tools_used.push(name);
                }
                let message = json!({"role": "tool", "tool_call_id": call["id"], "content": output.content});
                turn.extend(LogMessage::from_openai(&message, None));
                messages.push(message);
            }
        }
        let (content, finish_reason, client_tool_calls) = outcome.unwrap_or_else(|| {
            (
                format!("(stopped after {iterations} steps without a final answer: the iteration limit)"),
                "length",
                None,
            )
        });
        self.finish(
            &agent,
            request.session.as_ref(),
            turn,
            &last_user,
            &content,
            &tools_used,
        )
        .await;
        Ok(Outcome {
            content,
            finish_reason,
            client_tool_calls,
            usage,
            model: format!("onyx:{}", agent.id),
            iterations,
            tools_used,
        })
    }

    /// Asks the model once; text deltas go out as they arrive when streaming.
    async fn step(
        &self,
        targets: &[crate::providers::ModelTarget],
        request: &RunRequest,
        messages: &[Value],
        tool_defs: &[Value],
        tx: &Sender,
    ) -> Result<Step, ProviderError> {
        let mut body = Map::new();
        body.insert("model".into(), json!(request.agent.model));
        body.insert("messages".into(), Value::Array(messages.to_vec()));
        if !tool_defs.is_empty() {
            body.insert("tools".into(), Value::Array(tool_defs.to_vec()));
        }
        if let Some(t) = request.temperature.or(request.agent.temperature) {
            body.insert("temperature".into(), json!(t));
        }
        if let Some(m) = request.max_tokens.or(request.agent.max_tokens) {
            body.insert("max_tokens".into(), json!(m));
        }
        body.insert(
            "prompt_cache_key".into(),
            json!(prompt::cache_key(
                &request.agent.id,
                request.session.as_ref().map(|s| s.id.as_str())
            )),
        );
        if request.stream {
            body.insert("stream".into(), json!(true));
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
        let parsed: ChatRequest = serde_json::from_value(Value::Object(body.clone()))
            .map_err(|e| ProviderError::InvalidRequest(format!("agent request: {e}")))?;
        let call = ChatCall {
            body,
            request: parsed,
        };
        if !request.stream {
            let (completion, _) = self.router.chat(targets, &call).await?;
            let message = &completion["choices"][0]["message"];
            return Ok(Step {
                content: message["content"].as_str().unwrap_or_default().to_string(),
                tool_calls: message["tool_calls"].as_array().cloned().unwrap_or_default(),
                usage: Usage::from_response(&completion),
            });
        }
        let (mut stream, _) = self.router.chat_stream(targets, &call).await?;
        let mut content = String::new();
        let mut calls: Vec<Value> = Vec::new();
        let mut usage = None;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk?;
            if let Some(u) = Usage::from_response(&chunk) {
                usage = Some(u);
            }
            let delta = &chunk["choices"][0]["delta"];
            if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
                content.push_str(text);
                let _ = tx.send(Event::Text(text.to_string()));
            }
            for part in delta["tool_calls"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default()
            {
                merge_tool_delta(&mut calls, part);
            }
        }
        Ok(Step {
            content,
            tool_calls: calls,
            usage,
        })
    }

    async fn run_tool(
        &self,
        context: &ToolContext,
        offered: &[ToolSpec],
        mode: PermissionMode,
        session: Option<&SessionMeta>,
        call: &Value,
        tx: &Sender,
    ) -> ToolOutput {
        let id = call["id"].as_str().unwrap_or_default().to_string();
        let name = call["function"]["name"].as_str().unwrap_or_default().to_string();
        let raw = call["function"]["arguments"].as_str().unwrap_or("{}");
        let arguments: Value =
            serde_json::from_str(if raw.trim().is_empty() { "{}" } else { raw }).unwrap_or(Value::Null);
        let _ = tx.send(Event::ToolStarted {
            id: id.clone(),
            name: name.clone(),
            arguments: arguments.clone(),
        });
        let output = match offered.iter().find(|t| t.name == name) {
            None => ToolOutput::error(format!("the tool {name:?} is not available to you")),
            Some(_) if !arguments.is_object() => {
                ToolOutput::error(format!("the arguments for {name} are not a JSON object"))
            }
            Some(spec) if spec.kind == ToolKind::Dangerous && mode == PermissionMode::Ask => {
                self.with_approval(context, session, &name, &arguments, tx).await
            }
            Some(_) => tools::call(context, &name, &arguments).await,
        };
        let _ = tx.send(Event::ToolFinished {
            id,
            name,
            summary: output.summary(),
            is_error: output.is_error,
        });
        output
    }

    async fn with_approval(
        &self,
        context: &ToolContext,
        session: Option<&SessionMeta>,
        name: &str,
        arguments: &Value,
        tx: &Sender,
    ) -> ToolOutput {
        let approval = match self
            .approvals
            .request(&context.agent.id, session.map(|s| s.id.as_str()), name, arguments)
            .await
        {
            Ok(approval) => approval,
            Err(err) => return ToolOutput::error(format!("could not ask for approval: {err}")),
        };
        let _ = tx.send(Event::ApprovalRequired {
            id: approval.id.clone(),
            tool: name.into(),
            arguments: arguments.clone(),
        });
        match self
            .approvals
            .wait(&approval.id, self.tools.approval_timeout)
            .await
        {
            Decision::Approved => tools::call(context, name, arguments).await,
            Decision::Denied => ToolOutput::error(format!("the user denied this {name} call")),
            Decision::TimedOut => ToolOutput::error(format!(
                "nobody approved this {name} call within {} s, so it was not run",
                self.tools.approval_timeout.as_secs()
            )),
        }
    }

    /// Records the exchange in the session, then one line in today's log (in the background).
    async fn finish(
        &self,
        agent: &AgentDef,
        session: Option<&SessionMeta>,
        turn: Vec<LogMessage>,
        asked: &str,
        answer: &str,
        tools: &[String],
    ) {
        if let Some(session) = session
            && let Err(err) = self.sessions.append(session, turn).await
        {
            tracing::error!(session = %session.id, error = %err, "could not record the agent's turn");
        }
        let short = |text: &str| crate::text::one_line(text, 80);
        let tools = if tools.is_empty() {
            String::new()
        } else {
            format!(" (tools: {})", tools.join(", "))
        };
        let session = session.map_or_else(String::new, |s| format!("session {}: ", s.id));
        let line = format!(
            "{session}asked “{}” → answered “{}”{tools}",
            short(asked),
            short(answer)
        );
        // Off the turn's critical path: re-indexing the day's log is the
        // costly part of a turn's bookkeeping, and nobody waits for it.
        let (memory, agent_id, daily) = (
            self.memory.clone(),
            agent.id.clone(),
            NoteTarget::Daily(agent.timezone),
        );
        tokio::spawn(async move {
            if let Err(err) = memory.append_note(&agent_id, daily, &line).await {
                tracing::warn!(agent = %agent_id, error = %err, "could not write the daily log line");
            }
        });
    }
}

/// Folds one streamed tool-call delta into the calls assembled so far.
fn merge_tool_delta(calls: &mut Vec<Value>, part: &Value) {
    let index = part["index"].as_u64().unwrap_or(calls.len() as u64) as usize;
    while calls.len() <= index {
        calls.push(json!({"id": "", "type": "function", "function": {"name": "", "arguments": ""}}));
    }
    let call = &mut calls[index];
    if let Some(id) = part["id"].as_str() {
        call["id"] = json!(id);
    }
    if let Some(name) = part["function"]["name"].as_str() {
        let joined = format!("{}{name}", call["function"]["name"].as_str().unwrap_or_default());
        call["function"]["name"] = json!(joined);
    }
    if let Some(args) = part["function"]["arguments"].as_str() {
        let joined = format!(
            "{}{args}",
            call["function"]["arguments"].as_str().unwrap_or_default()
        );
        call["function"]["arguments"] = json!(joined);
    }
}

fn last_user_text(messages: &[Value]) -> String {
    messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join(" "),
            _ => String::new(),
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_tool_calls_are_assembled() {
        let mut calls = Vec::new();
        for part in [
            json!({"index": 0, "id": "a", "function": {"name": "fs_", "arguments": ""}}),
            json!({"index": 1, "id": "b", "function": {"name": "exec", "arguments": "{\"com"}}),
            json!({"index": 0, "function": {"name": "read", "arguments": "{}"}}),
            json!({"index": 1, "function": {"arguments": "mand\":\"ls\"}"}}),
        ] {
            merge_tool_delta(&mut calls, &part);
        }
        assert_eq!(calls[0]["function"]["name"], "fs_read");
        assert_eq!(calls[1]["function"]["arguments"], "{\"command\":\"ls\"}");
        assert_eq!(calls[1]["id"], "b");
    }
}
