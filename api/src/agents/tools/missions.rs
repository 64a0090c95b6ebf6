//! `propose_mission`, `list_missions`, `report_step`, `list_agents`: the
//! coordination protocol. An agent proposes work for itself or others (it
//! goes through the same gates and approval as every proposal), follows its
//! missions, reports a step's result, and finds who can help.

use serde_json::{Value, json};

use super::tool::{Needs, Tool};
use super::{ToolContext, ToolError, ToolKind, fail};

pub const PROPOSE: Tool = Tool {
    name: "propose_mission",
    description: "Propose a mission: work in steps, each run by an agent (you or another; see list_agents). It is checked against quotas and budgets, then approved automatically or by a human. Steps run in order unless a step gives \"after\" (indexes of earlier steps it needs; [] runs it at once). Returns the proposal's status and, once accepted, its mission id.",
    parameters: || {
        json!({"type": "object", "properties": {
            "title": {"type": "string"},
            "description": {"type": "string", "description": "Why, and what done looks like"},
            "steps": {"type": "array", "items": {"type": "object", "properties": {
                "kind": {"type": "string", "description": "The kind of work, e.g. research, analyze, write_content, review"},
                "agent": {"type": "string", "description": "Who runs it (default: you)"},
                "input": {"type": "string", "description": "What the step is to do, with the context it needs"},
                "after": {"type": "array", "items": {"type": "integer"}}
            }, "required": ["kind", "input"]}}
        }, "required": ["title", "steps"]})
    },
    kind: ToolKind::Write,
    needs: Needs::Missions,
    over_mcp: false,
    asks_first: None,
    call: |ctx, args| Box::pin(coordinate(ctx, args, Request::Propose)),
};

pub const LIST: Tool = Tool {
    name: "list_missions",
    description: "List the missions you proposed or have steps in, newest first, with each step's status and output.",
    parameters: || {
        json!({"type": "object", "properties": {
            "status": {"type": "string", "enum": ["queued", "running", "succeeded", "failed", "cancelled"]},
            "limit": {"type": "integer"}
        }})
    },
    kind: ToolKind::Read,
    needs: Needs::Missions,
    over_mcp: false,
    asks_first: None,
    call: |ctx, args| Box::pin(coordinate(ctx, args, Request::Missions)),
};

pub const REPORT: Tool = Tool {
    name: "report_step",
    description: "Report the result of a mission step you are running (its id is in the step's prompt): status \"succeeded\" with the output, or \"failed\" with why.",
    parameters: || {
        json!({"type": "object", "properties": {
            "step_id": {"type": "string"},
            "status": {"type": "string", "enum": ["succeeded", "failed"]},
            "output": {"type": "string"}
        }, "required": ["step_id", "status", "output"]})
    },
    kind: ToolKind::Write,
    needs: Needs::Missions,
    over_mcp: false,
    asks_first: None,
    call: |ctx, args| Box::pin(coordinate(ctx, args, Request::ReportStep)),
};

pub const LIST_AGENTS: Tool = Tool {
    name: "list_agents",
    description: "Who is available: every agent with its name, model, trust level and the steps it is running.",
    parameters: || json!({"type": "object", "properties": {}}),
    kind: ToolKind::Read,
    needs: Needs::Missions,
    over_mcp: false,
    asks_first: None,
    call: |ctx, args| Box::pin(coordinate(ctx, args, Request::Standing)),
};

pub const TOOLS: &[Tool] = &[PROPOSE, LIST, REPORT, LIST_AGENTS];

/// What a mission tool asks the orchestration loop.
#[derive(Debug, Clone, Copy)]
enum Request {
    Propose,
    Missions,
    ReportStep,
    Standing,
}

async fn coordinate(ctx: &ToolContext, arguments: &Value, request: Request) -> Result<String, ToolError> {
    let Some(coordination) = ctx.coordination.as_ref() else {
        return Err(fail!(
            "missions are turned off on this gateway (orchestration.enabled)"
        ));
    };
    let agent = ctx.agent.id.as_str();
    let answer = match request {
        Request::Propose => coordination.propose(agent, arguments).await,
        Request::Missions => coordination.missions(agent, arguments).await,
        Request::ReportStep => coordination.report_step(agent, arguments).await,
        Request::Standing => coordination
            .standing()
            .await
            .map(|agents| mark_caller(agents, agent)),
    }
    .map_err(ToolError::Message)?;
    Ok(serde_json::to_string_pretty(&answer).unwrap_or_default())
}

/// `standing`'s list with the caller marked.
fn mark_caller(mut agents: Value, caller: &str) -> Value {
    for agent in agents["agents"].as_array_mut().into_iter().flatten() {
        let you = agent["id"] == caller;
        agent["you"] = Value::Bool(you);
    }
    agents
}
