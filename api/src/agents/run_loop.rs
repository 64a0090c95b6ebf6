//! The tool-calling loop of one run: compose the system prompt, call the
//! model with the agent's tools, run the tool calls it makes (in parallel,
//! with permission checks and approvals), feed the results back, and repeat
//! until it answers or the iteration limit. Events (text deltas, tool
//! activity, approval requests) go to the live run as they happen; what has
//! been done so far is kept in `RunProgress`, so a cancelled run can still
//! record it.

use futures::StreamExt;
use serde_json::Value;

use super::Agents;
use super::approvals::Decision;
use super::compaction::{self, clip_tool_result};
use super::context;
use super::error::AgentError;
use super::prompt::{self, Inputs};
use super::run_contract::{RunEvent, RunRequest, reply_of};
use super::runs::LiveRun;
use super::tools::{self, ToolContext, ToolOutput, ToolSpec};
use crate::chat::Assembler;
use crate::clock;
use crate::config::PermissionMode;
use crate::providers::types::{Message, Role, ToolCall, ToolDef};
use crate::providers::{ChatCall, ModelTarget, ProviderError, Usage};
use crate::sessions::LogMessage;

/// What a run has done so far.
#[derive(Default)]
pub struct RunProgress {
    /// The turn to record: the client's messages, then each model answer and
    /// tool result as they come.
    pub turn: Vec<LogMessage>,
    /// Text of the model answer streaming now (not yet in `turn`).
    pub partial: String,
    pub usage: Usage,
    pub tools_used: Vec<String>,
    pub iterations: u32,
    /// What the user should be told beside the answer (compactions).
    pub notices: Vec<String>,
}

/// How the loop ended.
pub struct FinalAnswer {
    pub content: String,
    /// `stop`, `tool_calls` (the client's tools) or `length` (iteration limit).
    pub finish_reason: &'static str,
    pub client_tool_calls: Option<Vec<ToolCall>>,
    /// The user's last message, for the daily log.
    pub asked: String,
}

/// Where a run asks for approvals: its session, and the chat it came from.
pub(super) struct Asking {
    pub session: Option<String>,
    pub ask_in: Option<String>,
}

impl Asking {
    pub fn of(request: &RunRequest) -> Self {
        Self {
            session: request.session.as_ref().map(|s| s.id.clone()),
            ask_in: request.ask_in.clone(),
        }
    }
}

/// One model answer, assembled.
struct Step {
    content: String,
    tool_calls: Vec<ToolCall>,
    usage: Option<Usage>,
}

impl Agents {
    pub(super) async fn drive(
        &self,
        request: &RunRequest,
        targets: &[ModelTarget],
        run: &LiveRun,
        progress: &mut RunProgress,
    ) -> Result<FinalAnswer, AgentError> {
        let agent = &request.agent;
        let model = agent.model.clone().unwrap_or_default();
        let mode = agent.permission_mode;
        self.mcp.ready_for(agent.mcp.as_deref()).await;
        let offered = tools::offered(
            agent,
            mode,
            &self.tools,
            &self.mcp,
            self.coordination.get().is_some(),
        );
        let inbox = match self.inbox.claim(&agent.id, &run.id).await {
            Ok(inbox) => inbox,
            Err(err) => {
                tracing::warn!(agent = %agent.id, error = %err, "could not read the agent's inbox");
                Vec::new()
            }
        };
        let last_user = last_user_text(&request.messages);
        let skills = if offered.iter().any(|t| t.name == tools::SKILL.name) {
            self.skills.for_agent(&agent.id).await.unwrap_or_else(|err| {
                tracing::warn!(agent = %agent.id, error = %err, "could not list the agent's skills");
                Vec::new()
            })
        } else {
            Vec::new()
        };
        let window = context::window(&model, &self.context_windows);
        let mut history = request.history.clone();
        let composed = prompt::compose(
            &self.memory,
            Inputs {
                agent: &agent.id,
                now: clock::now(),
                timezone: agent.timezone,
                session: request.session.as_ref().map(|s| s.id.as_str()),
                inbox: &inbox,
                memory_query: request.include_memory.then_some(last_user.as_str()),
                skills: &skills,
            },
        )
        .await;
        // The stable system prompt and the client's own system messages, then
        // (after the history) the client's new messages with the volatile
        // context, then this run's steps.
        let mut rest = composed.messages(&request.client_system, &request.messages);
        let prefix: Vec<Message> = rest.drain(..1 + request.client_system.len()).collect();
        let mut tool_defs: Vec<ToolDef> = offered.iter().map(ToolSpec::function).collect();
        tool_defs.extend(request.client_tools.iter().cloned());
        let is_client_tool = |call: &ToolCall| {
            request
                .client_tools
                .iter()
                .any(|t| t.function.name == call.function.name)
        };
        let context = self.tool_context(agent).await;
        // A subscription's CLI calls these tools through `/mcp` (`cli_runs`).
        let cli = self
            .open_cli_run(targets, &run.id, agent, mode, &offered, Asking::of(request))
            .await;
        let asking = Asking::of(request);
        let mut past = history.to_messages();
        while progress.iterations < self.max_iterations {
            progress.iterations += 1;
            let fit = compaction::Request {
                request,
                window,
                targets,
                prefix: &prefix,
                past: &past,
                rest: &rest,
                tool_defs: &tool_defs,
                context: &context,
            };
            if let Some(done) = self.compact_if_needed(fit, &mut history, false).await {
                past = history.to_messages();
                run.emit(
                    RunEvent::Compacted {
                        notice: done.notice(),
                        before_tokens: done.before_tokens,
                        after_tokens: done.after_tokens,
                        fallback: done.fallback,
                    },
                    false,
                );
                progress.notices.push(done.notice());
            }
            let messages: Vec<Message> = prefix
                .iter()
                .cloned()
                .chain(past.iter().cloned())
                .chain(rest.iter().cloned())
                .collect();
            let mut call = request.model_call(&messages, &tool_defs, request.stream)?;
            call.tool_token = cli.as_ref().map(|cli| cli.token().clone());
            let step = self
                .step(targets, call, request.stream, run, &mut progress.partial)
                .await?;
            if let Some(cli) = &cli {
                cli.record(progress);
            }
            if let Some(u) = &step.usage {
                progress.usage += u;
            }
            let assistant = Message::assistant(step.content.clone(), step.tool_calls.clone());
            progress.partial.clear();
            progress.turn.push(
                LogMessage::new(assistant.clone())
                    .with_model(model.clone())
                    .with_usage(step.usage),
            );
            rest.push(assistant);
            if step.tool_calls.is_empty() {
                return Ok(FinalAnswer {
                    content: step.content,
                    finish_reason: "stop",
                    client_tool_calls: None,
                    asked: last_user,
                });
            }
            let to_client: Vec<ToolCall> = step
                .tool_calls
                .iter()
                .filter(|c| is_client_tool(c))
                .cloned()
                .collect();
            if !to_client.is_empty() {
                return Ok(FinalAnswer {
                    content: step.content,
                    finish_reason: "tool_calls",
                    client_tool_calls: Some(to_client),
                    asked: last_user,
                });
            }
            let results = futures::future::join_all(
                step.tool_calls
                    .iter()
                    .map(|call| self.run_tool(&context, &offered, mode, &asking, call, run)),
            )
            .await;
            for (call, output) in step.tool_calls.iter().zip(results) {
                let name = &call.function.name;
                if !progress.tools_used.contains(name) {
                    progress.tools_used.push(name.clone());
                }
                let message = Message::tool_result(call.id.clone(), output.content.clone());
                progress.turn.push(LogMessage::new(message));
                // The log keeps the whole result; the model gets it clipped.
                rest.push(Message::tool_result(
                    call.id.clone(),
                    clip_tool_result(&output.content, window),
                ));
            }
        }
        Ok(FinalAnswer {
            content: format!(
                "(stopped after {} steps without a final answer: the iteration limit)",
                progress.iterations
            ),
            finish_reason: "length",
            client_tool_calls: None,
            asked: last_user,
        })
    }

    /// What the agent's tools work with.
    pub(super) async fn tool_context(&self, agent: &super::AgentDef) -> ToolContext {
        let agents = self.registry.list().await.unwrap_or_default();
        ToolContext {
            agent: agent.clone(),
            memory: self.memory.clone(),
            sessions: self.sessions.clone(),
            inbox: self.inbox.clone(),
            tasks: self.tasks.clone(),
            settings: self.tools.clone(),
            known_agents: agents.iter().map(|a| a.id.clone()).collect(),
            disabled_agents: agents
                .iter()
                .filter(|a| !a.enabled)
                .map(|a| a.id.clone())
                .collect(),
            wake: self.wake.clone(),
            channels: self.channels.clone(),
            last_chats: self.last_chats.clone(),
            owner_chats: self.owner_chats.clone(),
            skills: self.skills.clone(),
            mcp: self.mcp.clone(),
            coordination: self.coordination.get().cloned(),
            menos: self.menos.clone(),
            processes: self.processes.clone(),
        }
    }

    /// Asks the model once; text deltas go out (and into `partial`) as they
    /// arrive when streaming.
    async fn step(
        &self,
        targets: &[ModelTarget],
        call: ChatCall,
        stream: bool,
        run: &LiveRun,
        partial: &mut String,
    ) -> Result<Step, ProviderError> {
        if !stream {
            let (reply, _, _) = self.router.complete(targets, &call).await?;
            let completion = reply.into_completion()?;
            let (content, tool_calls) = reply_of(&completion);
            return Ok(Step {
                content,
                tool_calls,
                usage: completion.usage,
            });
        }
        let (mut stream, _) = self.router.stream(targets, &call).await?;
        let mut answer = Assembler::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk?;
            if let Some(text) = chunk
                .delta()
                .and_then(|d| d.content.as_deref())
                .filter(|t| !t.is_empty())
            {
                partial.push_str(text);
                run.emit(RunEvent::Text(text.to_string()), false);
            }
            answer.push(&chunk);
        }
        let assembled = answer.finish();
        Ok(Step {
            content: partial.clone(),
            tool_calls: assembled.message.tool_calls.unwrap_or_default(),
            usage: assembled.usage,
        })
    }

    pub(super) async fn run_tool(
        &self,
        context: &ToolContext,
        offered: &[ToolSpec],
        mode: PermissionMode,
        asking: &Asking,
        call: &ToolCall,
        run: &LiveRun,
    ) -> ToolOutput {
        let id = call.id.clone();
        let name = call.function.name.clone();
        let arguments = call.arguments();
        run.emit(
            RunEvent::ToolStarted {
                id: id.clone(),
                name: name.clone(),
                arguments: arguments.clone(),
            },
            false,
        );
        let output = match offered.iter().find(|t| t.name == name) {
            None => ToolOutput::error(format!("the tool {name:?} is not available to you")),
            Some(_) if !arguments.is_object() => {
                ToolOutput::error(format!("the arguments for {name} are not a JSON object"))
            }
            Some(spec) if tools::asks_first(context, spec, mode, &arguments).await => {
                self.with_approval(context, asking, &name, &arguments, run).await
            }
            Some(_) => tools::call(context, &name, &arguments).await,
        };
        run.emit(
            RunEvent::ToolFinished {
                id,
                name,
                summary: output.summary(),
                is_error: output.is_error,
            },
            false,
        );
        output
    }

    /// Asks for approval on the Approvals page (and with buttons in the chat
    /// the run came from, or the task's `deliver_to`) and waits for it.
    async fn with_approval(
        &self,
        context: &ToolContext,
        asking: &Asking,
        name: &str,
        arguments: &Value,
        run: &LiveRun,
    ) -> ToolOutput {
        let session = asking.session.as_deref();
        let approval = match self
            .approvals
            .request(&run.id, &context.agent.id, session, name, arguments)
            .await
        {
            Ok(approval) => approval,
            Err(err) => return ToolOutput::error(format!("could not ask for approval: {err}")),
        };
        run.emit(
            RunEvent::ApprovalRequired {
                id: approval.id.clone(),
                tool: name.into(),
                arguments: arguments.clone(),
            },
            false,
        );
        if let Some(target) = &asking.ask_in {
            let (text, buttons) = approval.announcement(self.tools.approval_timeout);
            if let Err(err) = self.channels.send_with_buttons(target, &text, buttons).await {
                tracing::warn!(approval = %approval.id, target, error = %crate::error_chain::chain(&err), "could not post an approval request to the chat");
            }
        }
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
}

pub(super) fn last_user_text(messages: &[Message]) -> String {
    messages
        .iter()
        .rev()
        .find(|m| m.role == Role::User)
        .map(Message::text_content)
        .unwrap_or_default()
}
