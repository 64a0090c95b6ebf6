//! The mission tools' side of the loop ([`Coordination`]): an agent's
//! proposals enter through the same entry point as everyone's, and it may
//! only report on its own running steps.

use std::sync::{Arc, Weak};

use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::model::{ProposedStep, WorkStatus};
use super::{Orchestrator, ProposalInput};
use crate::agents::coordination::Coordination;

/// Held by the agents (weakly: the loop holds the agents).
pub struct Coordinator(pub Weak<Orchestrator>);

impl Coordinator {
    fn loop_(&self) -> Result<Arc<Orchestrator>, String> {
        self.0
            .upgrade()
            .ok_or_else(|| "the gateway is shutting down".to_string())
    }
}

fn text(arguments: &Value, name: &str) -> Result<String, String> {
    arguments[name]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("argument {name:?} is required and must be a string"))
}

impl Coordination for Coordinator {
    fn propose<'a>(&'a self, agent: &'a str, arguments: &'a Value) -> BoxFuture<'a, Result<Value, String>> {
        Box::pin(async move {
            let orch = self.loop_()?;
            let steps: Vec<ProposedStep> =
                serde_json::from_value(arguments["steps"].clone()).map_err(|err| format!("steps: {err}"))?;
            let proposal = orch
                .propose(ProposalInput {
                    agent: agent.into(),
                    title: text(arguments, "title")?,
                    description: arguments["description"].as_str().unwrap_or_default().into(),
                    source: "agent".into(),
                    steps,
                })
                .await
                .map_err(|err| err.to_string())?;
            Ok(json!({
                "proposal_id": proposal.key, "status": proposal.status, "reason": proposal.reason,
                "mission_id": proposal.mission,
            }))
        })
    }

    fn missions<'a>(&'a self, agent: &'a str, arguments: &'a Value) -> BoxFuture<'a, Result<Value, String>> {
        Box::pin(async move {
            let orch = self.loop_()?;
            let limit = arguments["limit"].as_u64().unwrap_or(10).min(50) as usize;
            let status = arguments["status"].as_str();
            let mut out = Vec::new();
            for mission in orch
                .store
                .missions(status, None, 200)
                .await
                .map_err(|e| e.to_string())?
            {
                let steps = orch
                    .store
                    .steps_of(&mission.key)
                    .await
                    .map_err(|e| e.to_string())?;
                if mission.agent != agent && !steps.iter().any(|s| s.agent == agent) {
                    continue;
                }
                out.push(json!({
                    "mission_id": mission.key, "title": mission.title, "status": mission.status,
                    "proposed_by": mission.agent,
                    "steps": steps.iter().map(|s| json!({
                        "step_id": s.key, "kind": s.kind, "agent": s.agent, "status": s.status,
                        "output": s.output.as_deref().map(|o| crate::text::ellipsize(o, 500)),
                        "error": s.last_error,
                    })).collect::<Vec<_>>(),
                }));
                if out.len() == limit {
                    break;
                }
            }
            Ok(json!({"missions": out}))
        })
    }

    fn report_step<'a>(
        &'a self,
        agent: &'a str,
        arguments: &'a Value,
    ) -> BoxFuture<'a, Result<Value, String>> {
        Box::pin(async move {
            let orch = self.loop_()?;
            let key = text(arguments, "step_id")?;
            let status = text(arguments, "status")?;
            let output = text(arguments, "output")?;
            let reported = match status.as_str() {
                "succeeded" => WorkStatus::Succeeded,
                "failed" => WorkStatus::Failed,
                _ => return Err("status must be \"succeeded\" or \"failed\"".into()),
            };
            orch.report(agent, &key, reported, &output)
                .await
                .map_err(|err| err.to_string())?;
            Ok(json!({"step_id": key, "status": status}))
        })
    }

    fn standing(&self) -> BoxFuture<'_, Result<Value, String>> {
        Box::pin(async move {
            let orch = self.loop_()?;
            orch.standing().await.map_err(|err| err.to_string())
        })
    }

    fn observe<'a>(&'a self, agent: &'a str, kind: &'a str, payload: Value) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if let Ok(orch) = self.loop_() {
                orch.emit(agent, kind, &["memory"], payload).await;
            }
        })
    }
}
