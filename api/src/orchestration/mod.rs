//! Agents that run things end to end: proposal → (gates, auto-approval or a
//! human) → mission with steps → a worker claims and runs each step as an
//! agent run → events → triggers and reactions → new proposals. Every
//! proposal, whatever its source, enters through [`Orchestrator::propose`];
//! policies (`/v1/policy`) are data, read at each decision.

mod coordination;
mod executor;
mod heartbeat;
mod model;
mod policy;
mod reactive;
mod rules;
mod store;
pub mod trust;

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::{Notify, broadcast};

pub use coordination::Coordinator;
pub use heartbeat::HeartbeatReport;
pub use model::{
    Mission, OpsEvent, Proposal, ProposalStatus, ProposedStep, Reaction, ReactionStatus, ReactionTrigger,
    Review, Step, WorkStatus,
};
pub use policy::{KEYS as POLICY_KEYS, check as check_policy};
use rules::Dice;
pub use store::MissionStore;

use crate::agents::Agents;
use crate::clock::stamp;
use crate::config::OrchestrationConfig;
use crate::memory::Memory;
use crate::storage::{Db, DbError};

/// Where a proposal came from.
pub const SOURCES: &[&str] = &["api", "agent", "trigger", "reaction", "task"];
const MAX_STEPS: usize = 20;

#[derive(Debug, thiserror::Error)]
pub enum OrchestrationError {
    /// The request is wrong: what to fix.
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    NotFound(String),
    /// The record is no longer in a state that allows this.
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Db(#[from] DbError),
}

/// A proposal as asked for, before the gates.
#[derive(Debug, Clone)]
pub struct ProposalInput {
    pub agent: String,
    pub title: String,
    pub description: String,
    pub source: String,
    pub steps: Vec<ProposedStep>,
}

pub struct Orchestrator {
    pub store: MissionStore,
    db: Db,
    agents: Arc<Agents>,
    memory: Arc<Memory>,
    settings: OrchestrationConfig,
    dice: Dice,
    /// Wakes this replica's worker: a mission was created or a step ended here.
    wake: Notify,
    replica: String,
    /// Events as this replica writes them (the SSE feed also polls the table).
    events: broadcast::Sender<OpsEvent>,
    /// Steps started by heartbeats on this replica and still running.
    heartbeat_running: Arc<std::sync::atomic::AtomicUsize>,
}

impl Orchestrator {
    /// `lease_db`: where step leases are renewed and lapsed ones found (its
    /// own connection to a server, [`Db::dedicated`]).
    pub fn new(
        db: Db,
        lease_db: Db,
        agents: Arc<Agents>,
        memory: Arc<Memory>,
        settings: OrchestrationConfig,
    ) -> Arc<Self> {
        Arc::new(Self {
            store: MissionStore::new(
                db.clone(),
                crate::lease::Leases::new(lease_db, "step", settings.lease, crate::clock::system()),
            ),
            db,
            agents,
            memory,
            dice: Dice::new(settings.reaction_seed),
            settings,
            wake: Notify::new(),
            replica: crate::replica::id().to_string(),
            events: broadcast::channel(256).0,
            heartbeat_running: Arc::default(),
        })
    }

    pub fn settings(&self) -> &OrchestrationConfig {
        &self.settings
    }

    pub fn subscribe(&self) -> broadcast::Receiver<OpsEvent> {
        self.events.subscribe()
    }

    /// The loops: the built-in triggers set up, then the worker (unless this
    /// replica is control-plane only) beside the reaction queue.
    pub async fn run(self: Arc<Self>) {
        while let Err(err) = reactive::seed_builtin_triggers(&self).await {
            tracing::warn!(error = %err, "could not set up the built-in triggers; retrying");
            tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        }
        if self.settings.worker {
            tokio::join!(
                self.store.renewals().run(),
                self.clone().work(),
                self.clone().react()
            );
        } else {
            self.react().await;
        }
    }

    /// The one entry point for every proposal: validated, gated (a rejection
    /// is stored with its reason, never queued), stored, announced, and
    /// accepted at once when the policy and the agent's trust allow.
    pub async fn propose(self: &Arc<Self>, input: ProposalInput) -> Result<Proposal, OrchestrationError> {
        self.validate(&input).await?;
        let now = stamp(crate::clock::now());
        let mut proposal = Proposal {
            key: model::new_key(),
            agent: input.agent,
            title: input.title.trim().to_string(),
            description: input.description,
            source: input.source,
            steps: input.steps,
            status: ProposalStatus::Pending,
            reason: None,
            mission: None,
            created_at: now.clone(),
            decided_at: None,
        };
        if let Some(reason) = self.gate(&proposal).await? {
            proposal.status = ProposalStatus::Rejected;
            proposal.reason = Some(reason.clone());
            proposal.decided_at = Some(now);
            self.store.insert_proposal(&proposal).await?;
            self.emit(&proposal.agent, "proposal.rejected", &["proposal", "rejected"], json!({
                "proposal": proposal.key, "title": proposal.title, "source": proposal.source, "reason": reason,
            }))
            .await;
            return Ok(proposal);
        }
        self.store.insert_proposal(&proposal).await?;
        self.emit(
            &proposal.agent,
            "proposal.created",
            &["proposal"],
            json!({
                "proposal": proposal.key, "title": proposal.title, "source": proposal.source,
                "kinds": proposal.steps.iter().map(|s| s.kind.clone()).collect::<Vec<_>>(),
            }),
        )
        .await;
        if let Some(why) = self.auto_approval(&proposal).await? {
            return self.accept(proposal, &why).await;
        }
        Ok(proposal)
    }

    /// A human's decision on a pending proposal.
    pub async fn decide(
        self: &Arc<Self>,
        key: &str,
        approve: bool,
        reason: Option<String>,
    ) -> Result<Proposal, OrchestrationError> {
        let proposal = self
            .store
            .proposal(key)
            .await?
            .ok_or_else(|| OrchestrationError::NotFound(format!("no proposal {key:?}")))?;
        if proposal.status != ProposalStatus::Pending {
            return Err(OrchestrationError::Conflict(format!(
                "proposal {key} is already {}",
                proposal.status
            )));
        }
        if approve {
            // The gates again: the world may have moved since it was proposed.
            if let Some(gate) = self.gate(&proposal).await? {
                return self.reject(proposal, &gate).await;
            }
            let why = reason.unwrap_or_else(|| "approved".into());
            self.accept(proposal, &why).await
        } else {
            let why = reason.unwrap_or_else(|| "rejected by a human".into());
            self.reject(proposal, &why).await
        }
    }

    async fn reject(
        self: &Arc<Self>,
        mut proposal: Proposal,
        reason: &str,
    ) -> Result<Proposal, OrchestrationError> {
        let now = stamp(crate::clock::now());
        if !self.store.reject(&proposal.key, reason, &now).await? {
            return Err(OrchestrationError::Conflict(format!(
                "proposal {} was decided meanwhile",
                proposal.key
            )));
        }
        proposal.status = ProposalStatus::Rejected;
        proposal.reason = Some(reason.into());
        proposal.decided_at = Some(now);
        self.emit(&proposal.agent, "proposal.rejected", &["proposal", "rejected"], json!({
            "proposal": proposal.key, "title": proposal.title, "source": proposal.source, "reason": reason,
        }))
        .await;
        Ok(proposal)
    }

    /// Creates the mission and its steps (once, even when two replicas try).
    async fn accept(
        self: &Arc<Self>,
        mut proposal: Proposal,
        why: &str,
    ) -> Result<Proposal, OrchestrationError> {
        let now = stamp(crate::clock::now());
        let mission = Mission {
            key: model::new_key(),
            proposal: proposal.key.clone(),
            agent: proposal.agent.clone(),
            title: proposal.title.clone(),
            description: proposal.description.clone(),
            status: WorkStatus::Queued,
            created_at: now.clone(),
            finished_at: None,
        };
        let keys: Vec<String> = proposal.steps.iter().map(|_| model::new_key()).collect();
        let steps: Vec<Step> = proposal
            .steps
            .iter()
            .enumerate()
            .map(|(index, s)| Step {
                key: keys[index].clone(),
                mission: mission.key.clone(),
                index,
                kind: s.kind.clone(),
                agent: s.agent.clone().unwrap_or_else(|| proposal.agent.clone()),
                input: s.input.clone(),
                after: match &s.after {
                    Some(after) => after.iter().map(|i| keys[*i].clone()).collect(),
                    None if index > 0 => vec![keys[index - 1].clone()],
                    None => Vec::new(),
                },
                status: WorkStatus::Queued,
                output: None,
                attempts: 0,
                last_error: None,
                lease_owner: None,
                lease_until: None,
                lease_token: None,
                created_at: now.clone(),
                started_at: None,
                finished_at: None,
            })
            .collect();
        if !self.store.accept(&proposal.key, why, &mission, &steps).await? {
            return Err(OrchestrationError::Conflict(format!(
                "proposal {} was decided meanwhile",
                proposal.key
            )));
        }
        proposal.status = ProposalStatus::Accepted;
        proposal.reason = Some(why.into());
        proposal.mission = Some(mission.key.clone());
        proposal.decided_at = Some(now);
        self.emit(
            &proposal.agent,
            "proposal.accepted",
            &["proposal", "accepted"],
            json!({
                "proposal": proposal.key, "mission": mission.key, "title": proposal.title, "how": why,
            }),
        )
        .await;
        self.emit(
            &proposal.agent,
            "mission.created",
            &["mission"],
            json!({
                "mission": mission.key, "title": mission.title, "steps": steps.len(),
            }),
        )
        .await;
        self.wake.notify_one();
        Ok(proposal)
    }

    async fn validate(&self, input: &ProposalInput) -> Result<(), OrchestrationError> {
        let invalid = |m: String| Err(OrchestrationError::Invalid(m));
        if input.title.trim().is_empty() {
            return invalid("title: a proposal needs a title".into());
        }
        if !SOURCES.contains(&input.source.as_str()) {
            return invalid(format!(
                "source: {:?} is not one of {}",
                input.source,
                SOURCES.join(", ")
            ));
        }
        if input.steps.is_empty() || input.steps.len() > MAX_STEPS {
            return invalid(format!("steps: a proposal has 1 to {MAX_STEPS} steps"));
        }
        let known: Vec<String> = self
            .agents
            .registry
            .list()
            .await?
            .into_iter()
            .map(|a| a.id)
            .collect();
        if !known.contains(&input.agent) {
            return invalid(format!("agent: there is no agent {:?}", input.agent));
        }
        for (i, step) in input.steps.iter().enumerate() {
            let kind_ok = !step.kind.is_empty()
                && step.kind.len() <= 40
                && step
                    .kind
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
            if !kind_ok {
                return invalid(format!(
                    "steps[{i}].kind: use 1-40 lowercase letters, digits, '_' or '-'"
                ));
            }
            if step.input.trim().is_empty() {
                return invalid(format!("steps[{i}].input: say what the step is to do"));
            }
            if let Some(agent) = &step.agent
                && !known.contains(agent)
            {
                return invalid(format!("steps[{i}].agent: there is no agent {agent:?}"));
            }
            if let Some(after) = &step.after
                && let Some(bad) = after.iter().find(|a| **a >= i)
            {
                return invalid(format!("steps[{i}].after: step {bad} is not an earlier step"));
            }
        }
        Ok(())
    }

    /// The cap gates, in order; the first that says no is the reason.
    async fn gate(&self, proposal: &Proposal) -> Result<Option<String>, DbError> {
        let today = crate::clock::now().format("%Y-%m-%dT00:00:00Z").to_string();
        if let Some(quotas) = self.store.policy("step_quotas").await? {
            let mut kinds: Vec<&str> = proposal.steps.iter().map(|s| s.kind.as_str()).collect();
            kinds.sort_unstable();
            kinds.dedup();
            for kind in kinds {
                let Some(limit) = quotas[kind].as_f64() else {
                    continue;
                };
                let asked = proposal.steps.iter().filter(|s| s.kind == kind).count() as u64;
                let used = self.store.steps_of_kind_since(kind, &today).await?;
                if (used + asked) as f64 > limit {
                    return Ok(Some(format!(
                        "the daily quota for {kind} steps is reached ({used}/{limit} today, this proposal asks for {asked})"
                    )));
                }
            }
        }
        let mut runners: Vec<String> = proposal
            .steps
            .iter()
            .map(|s| s.agent.clone().unwrap_or_else(|| proposal.agent.clone()))
            .collect();
        runners.sort_unstable();
        runners.dedup();
        for agent in runners {
            let Some(budget) = self.budget_of(&agent).await? else {
                continue;
            };
            let spent = crate::usage::spent(&self.db, &format!("agent:{agent}"))
                .await?
                .today_usd;
            if spent >= budget {
                return Ok(Some(format!(
                    "agent {agent} has spent ${spent:.2} of its ${budget:.2} daily budget"
                )));
            }
        }
        if let Some(max) = self
            .store
            .policy("concurrency")
            .await?
            .and_then(|c| c["max_active_missions"].as_u64())
        {
            let active = self.store.active_missions().await?;
            if active >= max {
                return Ok(Some(format!("{active} missions are active; the limit is {max}")));
            }
        }
        Ok(None)
    }

    /// An agent's daily USD budget: its own in `agent_budgets`, else its trust level's.
    async fn budget_of(&self, agent: &str) -> Result<Option<f64>, DbError> {
        if let Some(budget) = self
            .store
            .policy("agent_budgets")
            .await?
            .and_then(|b| b[agent].as_f64())
        {
            return Ok(Some(budget));
        }
        let Some(level) = self.store.trust_level(agent).await? else {
            return Ok(None);
        };
        Ok(self
            .store
            .policy("trust_budgets")
            .await?
            .and_then(|b| b[level.to_string()].as_f64()))
    }

    /// Why the proposal may go ahead without a human, if it may.
    async fn auto_approval(&self, proposal: &Proposal) -> Result<Option<String>, DbError> {
        let level = self.store.trust_level(&proposal.agent).await?;
        if level.is_some_and(|l| !trust::may_act_alone(l)) {
            return Ok(None);
        }
        let policy = self.store.policy("auto_approve").await?;
        let kinds: Vec<&str> = proposal.steps.iter().map(|s| s.kind.as_str()).collect();
        let autonomous = level == Some(trust::AUTONOMOUS)
            && policy.as_ref().is_some_and(|p| p["enabled"] == Value::Bool(true));
        if autonomous || policy::auto_approves(policy.as_ref(), &proposal.agent, &kinds) {
            return Ok(Some(format!(
                "auto: policy auto_approve allows {}",
                kinds.join(", ")
            )));
        }
        Ok(None)
    }

    /// Records an event, tells this replica's listeners, and lets triggers
    /// and the reaction matrix act on it (in the background). A failure to
    /// record is logged: the work it describes already happened.
    pub async fn emit(self: &Arc<Self>, agent: &str, kind: &str, tags: &[&str], payload: Value) {
        let event = OpsEvent {
            key: model::new_key(),
            agent: agent.into(),
            kind: kind.into(),
            tags: tags.iter().map(|t| t.to_string()).collect(),
            payload,
            at: stamp(crate::clock::now()),
        };
        if let Err(err) = self.store.insert_event(&event).await {
            tracing::warn!(error = %err, kind, "could not record an event");
            return;
        }
        let _ = self.events.send(event.clone());
        tokio::spawn(reactive::on_event(self.clone(), event));
    }

    /// Cancels a mission: its queued steps will not run.
    pub async fn cancel(self: &Arc<Self>, key: &str) -> Result<Mission, OrchestrationError> {
        let now = stamp(crate::clock::now());
        let mission = self
            .store
            .mission(key)
            .await?
            .ok_or_else(|| OrchestrationError::NotFound(format!("no mission {key:?}")))?;
        if !self.store.cancel_mission(key, &now).await? {
            return Err(OrchestrationError::Conflict(format!(
                "mission {key} already ended ({})",
                mission.status
            )));
        }
        self.emit(
            &mission.agent,
            "mission.cancelled",
            &["mission", "mission:cancelled"],
            json!({
                "mission": key, "title": mission.title,
            }),
        )
        .await;
        Ok(self.store.mission(key).await?.unwrap_or(mission))
    }

    /// An agent's own report on one of its running steps.
    pub async fn report(
        self: &Arc<Self>,
        agent: &str,
        key: &str,
        status: WorkStatus,
        output: &str,
    ) -> Result<(), OrchestrationError> {
        let step = self
            .store
            .step(key)
            .await?
            .ok_or_else(|| OrchestrationError::NotFound(format!("no step {key:?}")))?;
        if step.agent != agent {
            return Err(OrchestrationError::Invalid(format!(
                "step {key} is {}'s, not yours",
                step.agent
            )));
        }
        let (output, error) = match status {
            WorkStatus::Failed => (None, Some(output)),
            _ => (Some(output), None),
        };
        let now = stamp(crate::clock::now());
        if !self.store.finish(key, None, status, output, error, &now).await? {
            return Err(OrchestrationError::Conflict(format!(
                "step {key} is not running (it is {})",
                step.status
            )));
        }
        Ok(())
    }

    /// Every agent with its trust level and the steps it is running.
    pub async fn standing(&self) -> Result<Value, OrchestrationError> {
        let running = self.store.steps(Some("running"), None, 500).await?;
        let mut out = Vec::new();
        for agent in self.agents.registry.list().await? {
            let level = self.store.trust_level(&agent.id).await?;
            out.push(json!({
                "id": agent.id, "name": agent.name, "model": agent.model, "enabled": agent.enabled,
                "trust": level.map(|l| json!({"level": l, "name": trust::name(l)})),
                "running_steps": running.iter().filter(|s| s.agent == agent.id).count(),
            }));
        }
        Ok(json!({"agents": out}))
    }
}
