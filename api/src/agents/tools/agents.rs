//! `send_to_agent`: leave a message in another agent's inbox, and optionally
//! start a run of it now. A woken run works under the stricter of the two
//! agents' permission modes: an `ask` agent cannot make an `allow-all` one
//! do unasked what it would itself have to ask for. (Asking for approval of
//! the wake itself would ask before anything risky was even proposed, and
//! the woken agent's own approvals would still be skipped.)

use serde_json::{Value, json};

use super::tool::{Needs, Tool};
use super::{ToolContext, ToolError, ToolKind, Wake, fail, text};

pub const SEND_TO_AGENT: Tool = Tool {
    name: "send_to_agent",
    description: "Send a message to another agent. It sees it in its next conversation; with wake: true it starts working on it now.",
    parameters: || {
        json!({"type": "object", "properties": {
            "agent": {"type": "string", "description": "The other agent's id"},
            "message": {"type": "string"},
            "wake": {"type": "boolean"}
        }, "required": ["agent", "message"]})
    },
    kind: ToolKind::Write,
    needs: Needs::Nothing,
    over_mcp: true,
    asks_first: None,
    call: |ctx, args| Box::pin(call(ctx, args)),
};

pub const TOOLS: &[Tool] = &[SEND_TO_AGENT];

async fn call(ctx: &ToolContext, args: &Value) -> Result<String, ToolError> {
    let to = text(args, "agent")?;
    let message = text(args, "message")?;
    if !ctx.known_agents.iter().any(|a| a == to) {
        return Err(fail!(
            "there is no agent {to:?} (known: {})",
            ctx.known_agents.join(", ")
        ));
    }
    if to == ctx.agent.id {
        return Err("that is you; write to memory instead".into());
    }
    let sent = ctx.inbox.send(&ctx.agent.id, to, message).await?;
    let woke = args["wake"].as_bool() == Some(true)
        && ctx
            .wake
            .send(Wake {
                agent: to.to_string(),
                from: ctx.agent.id.clone(),
                mode: ctx.agent.permission_mode,
                into: None,
            })
            .is_ok();
    Ok(format!(
        "message {} delivered to {to}'s inbox{}",
        sent.id,
        if woke { "; it is starting on it now" } else { "" }
    ))
}
