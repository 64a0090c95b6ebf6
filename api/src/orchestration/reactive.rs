//! What events set off: trigger rules (a condition, a proposal template, a
//! cooldown that holds across replicas) and the reaction matrix (policy
//! `reaction_matrix`: another agent reacts, with a probability and a
//! cooldown in named units), whose queue the loop turns into proposals.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use serde::Serialize;
use serde_json::{Value, json};

use super::model::{OpsEvent, ProposedStep, Reaction, ReactionStatus, ReactionTrigger, new_key};
use super::policy::{Stored, reaction_patterns};
use super::rules::{fill, matches, pattern_applies};
use super::{OrchestrationError, Orchestrator, ProposalInput};
use crate::clock::{parse_stamp, stamp};
use crate::storage::DbError;

const REACTION_POLL: Duration = Duration::from_secs(1);
pub const MISSION_FAILED_TRIGGER: &str = "builtin_mission_failed";
pub const INSIGHT_TRIGGER: &str = "builtin_insight_promoted";

/// The built-in triggers, added once (then editable like any other):
/// a failed mission is diagnosed; a promoted insight is shared (disabled
/// until someone enables it).
pub async fn seed_builtin_triggers(orch: &Orchestrator) -> Result<(), DbError> {
    let builtin = [
        ReactionTrigger {
            key: MISSION_FAILED_TRIGGER.into(),
            name: "Diagnose a failed mission".into(),
            condition: json!({"type": "mission.failed"}),
            proposal: json!({
                "agent": "{{diagnosis_agent}}",
                "title": "Diagnose: {{payload.title}}",
                "description": "Mission {{payload.mission}} of {{agent}} failed: {{payload.error}}",
                "steps": [{"kind": "diagnose", "input": "Mission \"{{payload.title}}\" of agent {{agent}} failed with: {{payload.error}}. Find the root cause and say what to change."}],
            }),
            cooldown_seconds: 3600,
            enabled: true,
            last_fired: None,
            builtin: true,
        },
        ReactionTrigger {
            key: INSIGHT_TRIGGER.into(),
            name: "Share a promoted insight".into(),
            condition: json!({"type": "memory.insight_promoted"}),
            proposal: json!({
                "agent": "{{agent}}",
                "title": "Share an insight of {{agent}}",
                "steps": [{"kind": "share_insight", "input": "You promoted this to long-term memory: {{payload.note}}. Tell the agents it concerns."}],
            }),
            cooldown_seconds: 4 * 3600,
            enabled: false,
            last_fired: None,
            builtin: true,
        },
    ];
    for trigger in &builtin {
        orch.store.seed_trigger(trigger).await?;
    }
    Ok(())
}

/// Runs the triggers and the reaction matrix on one new event. (Boxed: the
/// proposals it makes emit events that come back here.)
pub fn on_event(orch: Arc<Orchestrator>, event: OpsEvent) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(async move {
        if let Err(err) = fire_triggers(&orch, &event).await {
            tracing::warn!(event = %event.key, error = %err, "could not evaluate triggers");
        }
        if let Err(err) = queue_reactions(&orch, &event).await {
            tracing::warn!(event = %event.key, error = %err, "could not evaluate the reaction matrix");
        }
    })
}

async fn fire_triggers(orch: &Arc<Orchestrator>, event: &OpsEvent) -> Result<(), OrchestrationError> {
    // A trigger's own events never set off triggers (no loops through them).
    if event.kind.starts_with("trigger.") {
        return Ok(());
    }
    for trigger in orch.store.triggers().await? {
        if !trigger.enabled || !matches(&trigger.condition, event) {
            continue;
        }
        let now = Utc::now();
        let cooled =
            now - chrono::Duration::seconds(i64::try_from(trigger.cooldown_seconds).unwrap_or(i64::MAX / 2));
        if !orch.store.fire(&trigger.key, &stamp(now), &stamp(cooled)).await? {
            orch.emit(
                &event.agent,
                "trigger.cooling",
                &["trigger"],
                json!({
                    "trigger": trigger.key, "event": event.key, "last_fired": trigger.last_fired,
                }),
            )
            .await;
            continue;
        }
        let input = match proposal_from(orch, &trigger.proposal, event, "trigger").await {
            Ok(input) => input,
            Err(reason) => {
                orch.emit(
                    &event.agent,
                    "trigger.failed",
                    &["trigger"],
                    json!({
                        "trigger": trigger.key, "event": event.key, "reason": reason,
                    }),
                )
                .await;
                continue;
            }
        };
        let outcome = orch.propose(input).await;
        let (proposal, reason) = match &outcome {
            Ok(p) => (Some(p.key.clone()), p.reason.clone()),
            Err(err) => (None, Some(err.to_string())),
        };
        orch.emit(&event.agent, "trigger.fired", &["trigger"], json!({
            "trigger": trigger.key, "name": trigger.name, "event": event.key, "proposal": proposal, "reason": reason,
        }))
        .await;
    }
    Ok(())
}

/// A trigger's template filled from the event, as a proposal.
async fn proposal_from(
    orch: &Orchestrator,
    template: &Value,
    event: &OpsEvent,
    source: &str,
) -> Result<ProposalInput, String> {
    let diagnosis = match orch.store.policy("diagnosis_agent").await {
        Ok(Some(Value::String(agent))) => agent,
        _ => orch
            .agents
            .registry
            .default_agent()
            .await
            .map(|a| a.id)
            .map_err(|e| e.to_string())?,
    };
    let template = serde_json::to_string(template).map_err(|e| e.to_string())?;
    let template: Value = serde_json::from_str(&template.replace("{{diagnosis_agent}}", &diagnosis))
        .map_err(|e| e.to_string())?;
    let filled = fill(&template, event);
    let steps: Vec<ProposedStep> = serde_json::from_value(filled["steps"].clone())
        .map_err(|err| format!("the template's steps are not steps: {err}"))?;
    Ok(ProposalInput {
        agent: filled["agent"].as_str().unwrap_or(&event.agent).to_string(),
        title: filled["title"].as_str().unwrap_or_default().to_string(),
        description: filled["description"].as_str().unwrap_or_default().to_string(),
        source: source.into(),
        steps,
    })
}

/// Rolls each pattern of the matrix that applies; a hit outside its
/// cooldown queues a reaction for the target agent.
async fn queue_reactions(orch: &Arc<Orchestrator>, event: &OpsEvent) -> Result<(), DbError> {
    if event.kind.starts_with("reaction.") {
        return Ok(());
    }
    let Some(matrix) = orch.store.policy("reaction_matrix").await? else {
        return Ok(());
    };
    // As stored: a pattern written before the cooldown's unit was named keeps its meaning.
    let patterns = match reaction_patterns(&matrix, Stored::AsSeconds) {
        Ok(patterns) => patterns,
        Err(reason) => {
            tracing::warn!(%reason, "the stored reaction matrix is unusable; no reactions");
            return Ok(());
        }
    };
    for pattern in patterns {
        if !pattern_applies(&pattern, event) || pattern.target == event.agent {
            continue;
        }
        if orch.dice.roll() >= pattern.probability {
            continue;
        }
        let cooldown = chrono::Duration::from_std(pattern.cooldown).unwrap_or(chrono::Duration::MAX);
        if let Some(last) = orch
            .store
            .last_reaction(&pattern.target, &pattern.kind)
            .await?
            .as_deref()
            .and_then(parse_stamp)
            && Utc::now() - last < cooldown
        {
            orch.emit(
                &pattern.target,
                "reaction.cooling",
                &["reaction"],
                json!({
                    "type": pattern.kind, "from": event.agent, "event": event.key, "event_type": event.kind,
                    "last": stamp(last), "cooldown_seconds": pattern.cooldown.as_secs(),
                }),
            )
            .await;
            continue;
        }
        let reaction = Reaction {
            key: new_key(),
            event: event.key.clone(),
            source_agent: event.agent.clone(),
            target: pattern.target.clone(),
            kind: pattern.kind.clone(),
            status: ReactionStatus::Pending,
            proposal: None,
            note: None,
            created_at: stamp(Utc::now()),
        };
        orch.store.insert_reaction(&reaction).await?;
        orch.emit(&pattern.target, "reaction.queued", &["reaction"], json!({
            "reaction": reaction.key, "type": pattern.kind, "from": event.agent, "event": event.key, "event_type": event.kind,
        }))
        .await;
    }
    Ok(())
}

/// What became of one queued reaction.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ReactionOutcome {
    pub reaction: String,
    /// The proposal it made, if it made one.
    pub proposal: Option<String>,
    /// Why it was rejected, or how it was accepted.
    pub note: Option<String>,
}

impl Orchestrator {
    /// Turns queued reactions into proposals (any replica; each reaction once).
    pub(super) async fn react(self: Arc<Self>) {
        loop {
            if let Err(err) = self.process_reactions().await {
                tracing::warn!(error = %err, "could not process reactions");
            }
            tokio::time::sleep(REACTION_POLL).await;
        }
    }

    /// Turns the pending reactions (20 at most) into proposals; what became of each.
    pub(super) async fn process_reactions(
        self: &Arc<Self>,
    ) -> Result<Vec<ReactionOutcome>, OrchestrationError> {
        let mut outcomes = Vec::new();
        for reaction in self.store.reactions(Some("pending"), 20).await? {
            // Claim it first, so two replicas never both propose.
            if !self.store.claim_reaction(&reaction.key).await? {
                continue;
            }
            let input = ProposalInput {
                agent: reaction.target.clone(),
                title: format!("{} (reacting to {})", reaction.kind, reaction.source_agent),
                description: format!(
                    "A reaction to event {} of {}",
                    reaction.event, reaction.source_agent
                ),
                source: "reaction".into(),
                steps: vec![ProposedStep {
                    kind: reaction.kind.clone(),
                    agent: None,
                    input: format!(
                        "Agent {} did something you react to (event {}). Look at it and do your part as {}.",
                        reaction.source_agent, reaction.event, reaction.kind
                    ),
                    after: None,
                }],
            };
            let (proposal, note) = match self.propose(input).await {
                Ok(p) => (Some(p.key), p.reason),
                Err(err) => (None, Some(err.to_string())),
            };
            self.store
                .settle_reaction_result(&reaction.key, proposal.as_deref(), note.as_deref())
                .await?;
            outcomes.push(ReactionOutcome {
                reaction: reaction.key,
                proposal,
                note,
            });
        }
        Ok(outcomes)
    }
}
