//! What the mission tools (`propose_mission`, `list_missions`, `report_step`,
//! `list_agents`) ask of the orchestration loop, which implements this and is
//! plugged in at startup (it runs agents, so agents cannot depend on it).

use futures::future::BoxFuture;
use serde_json::Value;

/// Each call is made for `agent` (the caller); `Err` is a message for the model.
pub trait Coordination: Send + Sync {
    /// Enters a proposal (`title`, `description`, `steps`) through the one entry point.
    fn propose<'a>(&'a self, agent: &'a str, arguments: &'a Value) -> BoxFuture<'a, Result<Value, String>>;
    /// Missions the agent proposed or has steps in.
    fn missions<'a>(&'a self, agent: &'a str, arguments: &'a Value) -> BoxFuture<'a, Result<Value, String>>;
    /// Sets the output and status of one of the agent's running steps.
    fn report_step<'a>(
        &'a self,
        agent: &'a str,
        arguments: &'a Value,
    ) -> BoxFuture<'a, Result<Value, String>>;
    /// Every agent: `{"agents": [{id, name, model, enabled, trust, running_steps}]}`.
    fn standing(&self) -> BoxFuture<'_, Result<Value, String>>;
    /// Records something the agent did that triggers may act on (an event of
    /// type `kind`, e.g. `memory.insight_promoted`).
    fn observe<'a>(&'a self, agent: &'a str, kind: &'a str, payload: Value) -> BoxFuture<'a, ()>;
}
