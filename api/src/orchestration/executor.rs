//! The worker: claims runnable steps (queued, with everything they wait for
//! succeeded) with a lease, exactly once across replicas, runs each as an
//! unattended agent run with the mission's context, renews the lease while it
//! runs, records the outcome and finalizes the mission when its steps end.
//! Steps whose replica died are found by their expired lease and retried (up
//! to `maxAttempts`) or failed.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use chrono::Utc;
use serde_json::json;

use super::model::{Mission, Step, WorkStatus};
use super::{OrchestrationError, Orchestrator};
use crate::agents::{Thread, Turn};
use crate::clock::stamp;
use crate::providers::Attribution;
use crate::providers::types::Message;

/// With nothing to wake it, the worker looks again this often (steps made
/// on other replicas, expired leases).
const POLL: Duration = Duration::from_secs(1);
const MAX_OUTPUT_CHARS: usize = 8_000;
const MAX_CONTEXT_CHARS: usize = 4_000;

impl Orchestrator {
    pub(super) async fn work(self: Arc<Self>) {
        let running = Arc::new(AtomicUsize::new(0));
        loop {
            if let Err(err) = self.tick(&running).await {
                tracing::warn!(error = %err, "the mission worker could not look for steps");
            }
            tokio::select! {
                () = self.wake.notified() => {}
                () = tokio::time::sleep(POLL) => {}
            }
        }
    }

    /// One turn of the worker: recovers stale steps (returned, so a heartbeat
    /// reports what its own turn recovered) and starts what there is room for.
    pub(super) async fn tick(
        self: &Arc<Self>,
        running: &Arc<AtomicUsize>,
    ) -> Result<Vec<String>, OrchestrationError> {
        let recovered = self.recover_stale().await?;
        let room = self
            .settings
            .max_parallel_steps
            .saturating_sub(running.load(Ordering::SeqCst));
        if room == 0 {
            return Ok(recovered);
        }
        let queued = self.store.queued_steps(100).await?;
        let mut missions: HashMap<String, Vec<Step>> = HashMap::new();
        let mut started = 0;
        for step in queued {
            if started == room {
                break;
            }
            if !missions.contains_key(&step.mission) {
                let steps = self.store.steps_of(&step.mission).await?;
                missions.insert(step.mission.clone(), steps);
            }
            let siblings = &missions[&step.mission];
            let status_of = |key: &String| siblings.iter().find(|s| &s.key == key).map(|s| &s.status);
            if step
                .after
                .iter()
                .any(|k| status_of(k).is_some_and(WorkStatus::is_dead))
            {
                self.finalize(&step.mission).await?;
                continue;
            }
            if !step
                .after
                .iter()
                .all(|k| status_of(k) == Some(&WorkStatus::Succeeded))
            {
                continue;
            }
            let now = stamp(self.store.leases().now());
            let Some(claimed) = self.store.claim(&step, &self.replica, &now).await? else {
                continue;
            };
            started += 1;
            running.fetch_add(1, Ordering::SeqCst);
            let this = self.clone();
            let running = running.clone();
            let context: Vec<Step> = siblings
                .iter()
                .filter(|s| claimed.after.contains(&s.key))
                .cloned()
                .collect();
            tokio::spawn(async move {
                this.execute(claimed, context).await;
                running.fetch_sub(1, Ordering::SeqCst);
                this.wake.notify_one();
            });
        }
        Ok(recovered)
    }

    async fn execute(self: &Arc<Self>, step: Step, context: Vec<Step>) {
        self.emit(
            &step.agent,
            "step.started",
            &["step"],
            json!({
                "step": step.key, "mission": step.mission, "kind": step.kind, "attempt": step.attempts,
            }),
        )
        .await;
        let held = step.lease();
        let holding = held
            .clone()
            .map(|held| self.store.renewals().hold(&step.key, held));
        let lost = holding.as_ref().map(crate::lease::Holding::lost);
        let outcome = tokio::select! {
            outcome = self.perform(&step, &context) => outcome,
            () = async { match lost { Some(lost) => lost.await, None => std::future::pending().await } } => {
                // Reported by the agent (report_step), or recovered elsewhere.
                Err("the step's lease was lost".to_string())
            }
            () = tokio::time::sleep(self.settings.step_timeout) => {
                Err(format!("timed out after {} s", self.settings.step_timeout.as_secs()))
            }
        };
        let now = stamp(self.store.leases().now());
        let recorded = match (&outcome, &held) {
            // Claimed rows always carry their lease; without one, nothing is held.
            (_, None) => Ok(false),
            (Ok(output), Some(held)) => {
                let output = crate::text::ellipsize(output, MAX_OUTPUT_CHARS);
                self.store
                    .finish(
                        &step.key,
                        Some(held),
                        WorkStatus::Succeeded,
                        Some(&output),
                        None,
                        &now,
                    )
                    .await
            }
            (Err(error), Some(held)) if step.attempts < self.settings.max_attempts => {
                self.store.recover(&step.key, held, None, true, error, &now).await
            }
            (Err(error), Some(held)) => {
                self.store
                    .finish(&step.key, Some(held), WorkStatus::Failed, None, Some(error), &now)
                    .await
            }
        };
        drop(holding);
        match recorded {
            Ok(true) => {}
            Ok(false) => {
                tracing::debug!(step = %step.key, "the step was settled elsewhere (report_step or recovery)")
            }
            Err(err) => tracing::error!(step = %step.key, error = %err, "could not record a step's outcome"),
        }
        self.after_step(&step.key).await;
    }

    /// Announces how a step ended and finalizes its mission if it was the last.
    async fn after_step(self: &Arc<Self>, key: &str) {
        let Ok(Some(step)) = self.store.step(key).await else {
            return;
        };
        let kind = match step.status {
            WorkStatus::Succeeded => "step.succeeded",
            WorkStatus::Failed => "step.failed",
            WorkStatus::Queued => "step.retrying",
            WorkStatus::Running | WorkStatus::Cancelled | WorkStatus::Unknown(_) => "step.ended",
        };
        let tag = format!("step:{}", step.status);
        self.emit(
            &step.agent,
            kind,
            &["step", &tag],
            json!({
                "step": step.key, "mission": step.mission, "kind": step.kind, "attempts": step.attempts,
                "error": step.last_error,
            }),
        )
        .await;
        if let Err(err) = self.finalize(&step.mission).await {
            tracing::warn!(mission = %step.mission, error = %err, "could not finalize a mission");
        }
    }

    /// Runs the step's agent on its input with the mission's context.
    async fn perform(&self, step: &Step, context: &[Step]) -> Result<String, String> {
        let agent = self
            .agents
            .turn_agent(&step.agent)
            .await
            .map_err(|err| err.to_string())?;
        let mission = self
            .store
            .mission(&step.mission)
            .await
            .map_err(|err| format!("storage is unavailable: {err}"))?
            .ok_or("the mission is gone")?;
        let prompt = step_prompt(&mission, step, context);
        let note = format!(
            "The mission worker started this run (step {} of mission {:?}). Nobody is watching it live: do the work, then answer with the result itself. If the step cannot be done, call report_step with status \"failed\" and say why.",
            step.key, mission.title
        );
        let turn = Turn {
            history: false,
            note: Some(note),
            who: Attribution {
                task: Some(format!("step:{}", step.key)),
                ..Attribution::default()
            },
            ..Turn::of(Thread::New("mission".into()), Message::user(prompt), "mission")
        };
        let request = self
            .agents
            .open_turn(agent, turn, None)
            .await
            .map_err(|err| err.to_string())?;
        let outcome = self
            .agents
            .run_to_end(request)
            .await
            .map_err(|err| err.public_message())?;
        Ok(outcome.content)
    }

    /// Fails (or queues again) the steps whose replica stopped renewing them:
    /// their lease ran out more than half a lease ago, a grace for clocks that
    /// differ between replicas and for a renewal delayed on a busy machine.
    pub(super) async fn recover_stale(self: &Arc<Self>) -> Result<Vec<String>, OrchestrationError> {
        let mut recovered = Vec::new();
        let now = stamp(self.store.leases().now());
        let cutoff = self.store.leases().reap_cutoff();
        for step in self.store.stale_steps().await? {
            let Some(held) = step.lease() else { continue };
            let requeue = step.attempts < self.settings.max_attempts;
            let error = format!(
                "stale: the replica running it ({}) stopped renewing its lease, which ran out at {}",
                step.lease_owner.as_deref().unwrap_or("unknown"),
                step.lease_until.as_deref().unwrap_or("?")
            );
            if self
                .store
                .recover(&step.key, &held, Some(&cutoff), requeue, &error, &now)
                .await?
            {
                tracing::warn!(step = %step.key, requeue, "recovered a stale step");
                self.after_step(&step.key).await;
                recovered.push(step.key);
            }
        }
        Ok(recovered)
    }

    /// Ends a mission whose steps have all ended (steps that wait on a failed
    /// one are cancelled first); announces it once.
    pub(super) async fn finalize(self: &Arc<Self>, mission: &str) -> Result<(), OrchestrationError> {
        let steps = self.store.steps_of(mission).await?;
        let dead: Vec<String> = steps
            .iter()
            .filter(|s| s.status == WorkStatus::Queued)
            .filter(|s| {
                s.after
                    .iter()
                    .any(|k| steps.iter().any(|o| &o.key == k && o.status.is_dead()))
            })
            .map(|s| s.key.clone())
            .collect();
        let now = stamp(Utc::now());
        if !dead.is_empty() {
            self.store
                .cancel_steps(&dead, "a step it waits for failed", &now)
                .await?;
            return Box::pin(self.finalize(mission)).await;
        }
        if steps.iter().any(|s| s.status.is_active()) {
            return Ok(());
        }
        let status = if steps.iter().all(|s| s.status == WorkStatus::Succeeded) {
            WorkStatus::Succeeded
        } else {
            WorkStatus::Failed
        };
        if !self.store.finalize(mission, status.clone(), &now).await? {
            return Ok(());
        }
        let Some(mission) = self.store.mission(mission).await? else {
            return Ok(());
        };
        let failed = steps.iter().find(|s| s.status == WorkStatus::Failed);
        let tag = format!("mission:{status}");
        self.emit(
            &mission.agent,
            &format!("mission.{status}"),
            &["mission", &tag],
            json!({
                "mission": mission.key, "title": mission.title, "steps": steps.len(),
                "failed_step": failed.map(|s| s.key.clone()),
                "error": failed.and_then(|s| s.last_error.clone()),
                "outputs": steps.iter().map(|s| s.output.clone()).collect::<Vec<_>>(),
            }),
        )
        .await;
        Ok(())
    }
}

/// What the step's agent is asked: the mission, its step, and the outputs of
/// the steps it waited for.
fn step_prompt(mission: &Mission, step: &Step, context: &[Step]) -> String {
    let mut prompt = format!("Mission: {}\n", mission.title);
    if !mission.description.trim().is_empty() {
        prompt.push_str(&format!("{}\n", mission.description.trim()));
    }
    prompt.push_str(&format!(
        "\nYour step ({}, step {}, id {}):\n{}\n",
        step.kind,
        step.index + 1,
        step.key,
        step.input
    ));
    for done in context {
        prompt.push_str(&format!(
            "\nOutput of step {} ({}, by {}):\n{}\n",
            done.index + 1,
            done.kind,
            done.agent,
            crate::text::ellipsize(done.output.as_deref().unwrap_or(""), MAX_CONTEXT_CHARS)
        ));
    }
    prompt
}
