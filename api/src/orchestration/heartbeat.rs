//! One turn of the control loop on demand (`POST /v1/orchestration/heartbeat`),
//! for an outside cron, as seed 004's heartbeat: steps whose replica stopped
//! renewing them are recovered (their missions finalized), queued reactions
//! become proposals, and, on a replica that keeps its worker off
//! (`orchestration.worker: false`), runnable steps are claimed and started
//! here (they run on after the answer, under their lease). A replica whose
//! worker is on leaves its steps to the worker.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde::Serialize;

use super::reactive::ReactionOutcome;
use super::{OrchestrationError, Orchestrator};

/// What one heartbeat did.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct HeartbeatReport {
    /// Steps found stale and queued again or failed.
    pub recovered_steps: Vec<String>,
    /// Reactions turned into proposals.
    pub reactions: Vec<ReactionOutcome>,
    /// Whether this replica's own worker runs steps (then the heartbeat starts none).
    pub worker: bool,
    /// Steps that heartbeats on this replica are running now (started by this
    /// one or by earlier ones and not yet ended).
    pub steps_running: usize,
}

impl Orchestrator {
    pub async fn heartbeat(self: &Arc<Self>) -> Result<HeartbeatReport, OrchestrationError> {
        let mut recovered_steps = self.recover_stale().await?;
        let reactions = self.process_reactions().await?;
        if !self.settings.worker {
            // The worker's own turn (claims, leases, the parallel limit), driven from
            // outside; a lease that ran out meanwhile is recovered there, and reported.
            recovered_steps.extend(self.tick(&self.heartbeat_running).await?);
        }
        Ok(HeartbeatReport {
            recovered_steps,
            reactions,
            worker: self.settings.worker,
            steps_running: self.heartbeat_running.load(Ordering::SeqCst),
        })
    }
}
