//! Starting and ending an agent run. `start` records the run, makes it live
//! and spawns it in its own task (`run_loop` does the model and tool work),
//! so no client connection decides how long it lives; it ends when the loop
//! answers, fails, or someone cancels it. At the end the run's record gets
//! its status and tokens, the inbox claims are committed (or handed back),
//! the session gets the whole turn (a cancelled one marked aborted), and a
//! finished answer gets one line in today's daily log.

use std::sync::Arc;

use futures::StreamExt;

use super::Agents;
use super::error::AgentError;
use super::registry::AgentDef;
use super::run_contract::{Outcome, RunEvent, RunRequest};
use super::run_loop::{FinalAnswer, RunProgress};
use super::runs::{AgentRun, Ending, LiveRun, RunStatus};
use crate::memory::NoteTarget;
use crate::providers::ModelTarget;
use crate::providers::types::{Message, Role};
use crate::sessions::{LogMessage, SessionMeta};

impl Agents {
    /// Starts a run in its own task and returns it live: subscribe to its
    /// events, wait for its outcome, or cancel it. Fails at once (before any
    /// work) when the agent's model cannot be routed or the run cannot be
    /// recorded.
    pub async fn start_run(self: &Arc<Self>, mut request: RunRequest) -> Result<Arc<LiveRun>, AgentError> {
        let agent = &request.agent;
        let (model, targets) = self.resolve_model(agent)?;
        let record = AgentRun::starting(
            &agent.id,
            request.session.as_ref().map(|s| s.id.as_str()),
            &request.source,
            model,
        );
        let run = self.runs.begin(&record, &request.turn).await?;
        request.who.run = Some(run.id.clone());
        let agents = self.clone();
        let live = run.clone();
        tokio::spawn(async move {
            let mut progress = RunProgress {
                turn: request.turn.clone(),
                ..RunProgress::default()
            };
            let result = tokio::select! {
                result = agents.drive(&request, &targets, &live, &mut progress) => result,
                () = live.cancelled() => Err(AgentError::Cancelled),
            };
            agents.end(&request, &live, progress, result).await;
        });
        Ok(run)
    }

    /// The agent's model and where it routes; a model-less or unroutable
    /// agent is an error before any work.
    pub(super) fn resolve_model(&self, agent: &AgentDef) -> Result<(String, Vec<ModelTarget>), AgentError> {
        let model = agent.model.clone().ok_or_else(|| AgentError::NoModel {
            agent: agent.id.clone(),
        })?;
        let targets = self.router.resolve(&model).map_err(|source| AgentError::Route {
            agent: agent.id.clone(),
            source,
        })?;
        Ok((model, targets))
    }

    /// Starts a run and waits for its outcome (runs nobody watches live:
    /// schedules, wake-ups).
    pub async fn run_to_end(self: &Arc<Self>, request: RunRequest) -> Result<Outcome, Arc<AgentError>> {
        let run = self.start_run(request).await.map_err(Arc::new)?;
        outcome(&run).await
    }

    /// Records how the run ended, then sends its last event.
    async fn end(
        &self,
        request: &RunRequest,
        run: &Arc<LiveRun>,
        mut progress: RunProgress,
        result: Result<FinalAnswer, AgentError>,
    ) {
        let agent = &request.agent;
        let status = match &result {
            Ok(_) => RunStatus::Succeeded,
            Err(AgentError::Cancelled) => RunStatus::Cancelled,
            Err(_) => RunStatus::Failed,
        };
        if status == RunStatus::Cancelled {
            close_cancelled_turn(&mut progress);
        }
        let turn = std::mem::take(&mut progress.turn);
        // The inbox claims (and approvals) and the session's turn are independent writes;
        // the client waits for both, so they go together.
        let settle_inbox = async {
            let claims = if status == RunStatus::Succeeded {
                self.inbox.commit(&run.id).await
            } else {
                self.inbox.release(&run.id).await
            };
            if let Err(err) = claims {
                tracing::error!(run = %run.id, error = %err, "could not settle the run's inbox messages");
            }
            if status != RunStatus::Succeeded
                && let Err(err) = self.approvals.withdraw(&run.id).await
            {
                tracing::warn!(run = %run.id, error = %err, "could not withdraw the run's approval requests");
            }
        };
        let record_turn = async {
            if status != RunStatus::Failed
                && let Some(session) = &request.session
                && let Err(err) = self.sessions.append(session, turn).await
            {
                tracing::error!(session = %session.id, error = %err, "could not record the agent's turn");
            }
        };
        tokio::join!(settle_inbox, record_turn);
        if let Ok(answer) = &result {
            self.daily_log_line(agent, request.session.as_ref(), answer, &progress.tools_used);
        }
        let ending = Ending {
            status,
            prompt_tokens: progress.usage.prompt_tokens,
            completion_tokens: progress.usage.completion_tokens,
            tools_used: &progress.tools_used,
            iterations: progress.iterations,
            error: result.as_ref().err().map(AgentError::public_message),
        };
        self.runs.end(run, &ending).await;
        let last = match result {
            Ok(answer) => RunEvent::Done(Box::new(Outcome {
                content: answer.content,
                finish_reason: answer.finish_reason,
                client_tool_calls: answer.client_tool_calls,
                usage: progress.usage,
                model: format!("onyx:{}", agent.id),
                iterations: progress.iterations,
                tools_used: progress.tools_used,
                notices: progress.notices,
            })),
            Err(err) => {
                if !matches!(err, AgentError::Cancelled) {
                    tracing::warn!(run = %run.id, agent = %agent.id, error = %crate::error_chain::chain(&err), "agent run failed");
                }
                RunEvent::Failed(Arc::new(err))
            }
        };
        run.emit(last, true);
    }

    /// One line in today's log (in the background: re-indexing the day's log
    /// is the costly part of a turn's bookkeeping, and nobody waits for it).
    fn daily_log_line(
        &self,
        agent: &AgentDef,
        session: Option<&SessionMeta>,
        answer: &FinalAnswer,
        tools: &[String],
    ) {
        let short = |text: &str| crate::text::one_line(text, 80);
        let tools = if tools.is_empty() {
            String::new()
        } else {
            format!(" (tools: {})", tools.join(", "))
        };
        let session = session.map_or_else(String::new, |s| format!("session {}: ", s.id));
        let line = format!(
            "{session}asked “{}” → answered “{}”{tools}",
            short(&answer.asked),
            short(&answer.content)
        );
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

/// Waits for a run's last event: its outcome, or why it did not finish.
pub async fn outcome(run: &Arc<LiveRun>) -> Result<Outcome, Arc<AgentError>> {
    let mut events = run.subscribe();
    while let Some(event) = events.next().await {
        match event.as_ref() {
            RunEvent::Done(outcome) => return Ok(outcome.as_ref().clone()),
            RunEvent::Failed(err) => return Err(err.clone()),
            _ => {}
        }
    }
    Err(Arc::new(AgentError::NoAnswer))
}

/// A cancelled turn stays replayable: tool calls that got no result get one
/// saying so (a model rejects a history with unanswered calls), and the
/// answer cut short is kept, marked aborted.
fn close_cancelled_turn(progress: &mut RunProgress) {
    let answered: Vec<&str> = progress
        .turn
        .iter()
        .filter_map(|m| m.message.tool_call_id.as_deref())
        .collect();
    let unanswered: Vec<String> = progress
        .turn
        .iter()
        .flat_map(LogMessage::tool_call_ids)
        .filter(|id| !answered.contains(id))
        .map(String::from)
        .collect();
    for id in unanswered {
        let result = Message::tool_result(id, "(cancelled before this tool finished)");
        progress.turn.push(LogMessage::new(result));
    }
    let partial = std::mem::take(&mut progress.partial);
    let answer = LogMessage::plain(
        Role::Assistant,
        if partial.is_empty() {
            "(cancelled)".to_string()
        } else {
            partial
        },
    );
    progress.turn.push(answer.aborted());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::types::ToolCall;

    #[test]
    fn a_cancelled_turn_answers_its_open_tool_calls_and_keeps_the_partial_answer() {
        let call = Message::assistant(
            "",
            vec![
                ToolCall::function("a", "exec", "{}"),
                ToolCall::function("b", "exec", "{}"),
            ],
        );
        let done = Message::tool_result("a", "ok");
        let mut progress = RunProgress {
            turn: vec![LogMessage::new(call), LogMessage::new(done)],
            partial: "half an ans".into(),
            ..RunProgress::default()
        };
        close_cancelled_turn(&mut progress);
        let roles: Vec<Role> = progress.turn.iter().map(LogMessage::role).collect();
        assert_eq!(roles, [Role::Assistant, Role::Tool, Role::Tool, Role::Assistant]);
        assert_eq!(progress.turn[2].message.tool_call_id.as_deref(), Some("b"));
        assert_eq!(progress.turn[3].text(), "half an ans");
        assert!(progress.turn[3].aborted);
    }
}
