//! Agent runs on subscription models (`claude-subscription/…`, `codex/…`,
//! `copilot/…`): the vendor CLI cannot take OpenAI tool definitions, so it
//! gets the run's tools as an MCP server instead, Onyx's own `/mcp`, with a
//! run token (`auth::RunTokens`) made for this run alone. Each call the CLI
//! makes there is made here, by the run: the same toolset and permission
//! mode as the run loop, approvals that wait for the owner in `ask` mode,
//! tool events on the live run, and the calls recorded in the session's
//! turn before the answer they led to.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::Agents;
use super::run_loop::{Asking, RunProgress};
use super::tools::{ToolContext, ToolOutput, ToolSpec};
use crate::auth::{RUN_TOKEN_TTL, RunGrant, RunToken};
use crate::config::PermissionMode;
use crate::providers::ModelTarget;
use crate::providers::types::{Message, ToolCall};
use crate::sessions::LogMessage;

/// The runs of this replica whose CLI holds a run token, by run id.
pub(super) type CliRuns = Arc<Mutex<HashMap<String, Arc<CliRun>>>>;

/// What a run's CLI may call, and what it has called so far.
pub(super) struct CliRun {
    agent: String,
    context: ToolContext,
    offered: Vec<ToolSpec>,
    mode: PermissionMode,
    asking: Asking,
    /// Calls made since the last model answer was recorded.
    calls: Mutex<Vec<(ToolCall, ToolOutput)>>,
}

/// A run's token and its entry in [`CliRuns`]: dropped when the run ends
/// (answered, failed or cancelled), which revokes the token.
pub(super) struct CliRunGuard {
    token: RunToken,
    run: Arc<CliRun>,
    runs: CliRuns,
    id: String,
}

impl CliRunGuard {
    pub fn token(&self) -> &secrecy::SecretString {
        self.token.secret()
    }

    /// Records the calls the CLI made since the last time, as one assistant
    /// message calling them and their results, the way the run loop records
    /// its own.
    pub fn record(&self, progress: &mut RunProgress) {
        let calls = self
            .run
            .calls
            .lock()
            .map(|mut c| std::mem::take(&mut *c))
            .unwrap_or_default();
        if calls.is_empty() {
            return;
        }
        let requested: Vec<ToolCall> = calls.iter().map(|(call, _)| call.clone()).collect();
        let assistant = Message::assistant(String::new(), requested);
        progress.turn.push(LogMessage::new(assistant));
        for (call, output) in calls {
            let name = &call.function.name;
            if !progress.tools_used.contains(name) {
                progress.tools_used.push(name.clone());
            }
            let result = Message::tool_result(call.id.clone(), output.content);
            progress.turn.push(LogMessage::new(result));
        }
    }
}

impl Drop for CliRunGuard {
    fn drop(&mut self) {
        if let Ok(mut runs) = self.runs.lock() {
            runs.remove(&self.id);
        }
    }
}

impl Agents {
    /// For a run whose model (or a fallback) is a subscription's CLI: a run
    /// token for `offered` under `mode`, and the run registered for its
    /// calls. `None` for other models.
    pub(super) async fn open_cli_run(
        &self,
        targets: &[ModelTarget],
        run_id: &str,
        agent: &super::AgentDef,
        mode: PermissionMode,
        offered: &[ToolSpec],
        asking: Asking,
    ) -> Option<CliRunGuard> {
        let on_cli = targets
            .iter()
            .any(|t| crate::providers::subscription::cli_for(t.provider.kind().as_str()).is_some());
        if !on_cli {
            return None;
        }
        let run = Arc::new(CliRun {
            agent: agent.id.clone(),
            context: self.tool_context(agent).await,
            offered: offered.to_vec(),
            mode,
            asking,
            calls: Mutex::new(Vec::new()),
        });
        let grant = RunGrant {
            agent: agent.id.clone(),
            mode,
            run: run_id.to_string(),
        };
        let token = self.run_tokens.mint(grant, RUN_TOKEN_TTL);
        if let Ok(mut runs) = self.cli_runs.lock() {
            runs.insert(run_id.to_string(), run.clone());
        }
        Some(CliRunGuard {
            token,
            run,
            runs: self.cli_runs.clone(),
            id: run_id.to_string(),
        })
    }

    fn cli_run(&self, grant: &RunGrant) -> Option<Arc<CliRun>> {
        let run = self.cli_runs.lock().ok()?.get(&grant.run).cloned()?;
        (run.agent == grant.agent && run.mode == grant.mode).then_some(run)
    }

    /// The tools a run's CLI is offered (none once the run is over).
    pub fn run_tools(&self, grant: &RunGrant) -> Vec<ToolSpec> {
        self.cli_run(grant)
            .map(|run| run.offered.clone())
            .unwrap_or_default()
    }

    /// A call of a run's CLI, made as the run loop makes its own: only the
    /// run's tools, approvals in `ask` mode, events on the live run.
    pub async fn call_for_run(&self, grant: &RunGrant, name: &str, arguments: &Value) -> ToolOutput {
        let (Some(run), Some(live)) = (self.cli_run(grant), self.runs.live(&grant.run)) else {
            return ToolOutput::error("this run has ended");
        };
        let id = format!("call_{}", uuid::Uuid::now_v7().simple());
        let call = ToolCall::function(id, name, arguments.to_string());
        let output = self
            .run_tool(&run.context, &run.offered, run.mode, &run.asking, &call, &live)
            .await;
        if let Ok(mut calls) = run.calls.lock() {
            calls.push((call, output.clone()));
        }
        output
    }
}
