//! Trust levels, earned through performance reviews: L1 observer, L2
//! advisor, L3 operator, L4 autonomous. Each maps onto what Onyx enforces:
//!
//! | level | permission mode | its proposals | daily budget |
//! | --- | --- | --- | --- |
//! | 1 observer | `safe` (read-only tools) | always wait for a human | `trust_budgets."1"` |
//! | 2 advisor | `ask` | always wait for a human | `trust_budgets."2"` |
//! | 3 operator | `ask` | auto-approved for the kinds `auto_approve` allows | `trust_budgets."3"` |
//! | 4 autonomous | `allow-all` | auto-approved whenever `auto_approve` is enabled | `trust_budgets."4"` |
//!
//! An agent with no level set is governed by the policy alone.

use serde_json::json;

use super::model::{Review, new_key};
use super::{OrchestrationError, Orchestrator};
use crate::agents::AgentPatch;
use crate::config::PermissionMode;

pub const OBSERVER: u8 = 1;
pub const AUTONOMOUS: u8 = 4;
pub const NAMES: [&str; 4] = ["observer", "advisor", "operator", "autonomous"];

/// Whether an agent at `level` may have work approved without a human.
pub fn may_act_alone(level: u8) -> bool {
    level >= 3
}

pub fn permission_mode(level: u8) -> PermissionMode {
    match level {
        OBSERVER => PermissionMode::Safe,
        AUTONOMOUS => PermissionMode::AllowAll,
        _ => PermissionMode::Ask,
    }
}

pub fn name(level: u8) -> &'static str {
    NAMES
        .get(usize::from(level.saturating_sub(1)))
        .copied()
        .unwrap_or("unknown")
}

/// A review as submitted.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReviewInput {
    pub summary: String,
    pub rating: u8,
    /// `up`, `keep` or `down`.
    pub decision: String,
    #[serde(default)]
    pub feedback: String,
}

impl Orchestrator {
    /// Sets an agent's level and the permission mode it maps to, at once.
    pub async fn set_trust(
        self: &std::sync::Arc<Self>,
        agent: &str,
        level: u8,
    ) -> Result<(), OrchestrationError> {
        if !(1..=4).contains(&level) {
            return Err(OrchestrationError::Invalid(
                "level: 1 (observer) to 4 (autonomous)".into(),
            ));
        }
        self.known_agent(agent).await?;
        self.store
            .set_trust_level(agent, level, &crate::clock::now_stamp())
            .await?;
        self.apply_level(agent, level).await?;
        self.emit(
            agent,
            "trust.changed",
            &["trust"],
            json!({"level": level, "name": name(level)}),
        )
        .await;
        Ok(())
    }

    async fn apply_level(&self, agent: &str, level: u8) -> Result<(), OrchestrationError> {
        let patch = AgentPatch {
            permission_mode: Some(permission_mode(level)),
            ..AgentPatch::default()
        };
        self.agents.registry.patch(agent, &patch).await?;
        Ok(())
    }

    async fn known_agent(&self, agent: &str) -> Result<(), OrchestrationError> {
        match self.agents.registry.get(agent).await? {
            Some(_) => Ok(()),
            None => Err(OrchestrationError::NotFound(format!("no agent {agent:?}"))),
        }
    }

    /// Records a review: the level moves (a demotion takes effect at the
    /// agent's next decision), and the feedback goes into its MEMORY.md.
    pub async fn review(
        self: &std::sync::Arc<Self>,
        agent: &str,
        input: ReviewInput,
    ) -> Result<Review, OrchestrationError> {
        self.known_agent(agent).await?;
        if input.summary.trim().is_empty() {
            return Err(OrchestrationError::Invalid(
                "summary: say what the agent delivered".into(),
            ));
        }
        if !(1..=5).contains(&input.rating) {
            return Err(OrchestrationError::Invalid("rating: 1 to 5".into()));
        }
        let before = self.store.trust_level(agent).await?.unwrap_or(OBSERVER);
        let after = match input.decision.as_str() {
            "up" => (before + 1).min(AUTONOMOUS),
            "keep" => before,
            "down" => before.saturating_sub(1).max(OBSERVER),
            other => {
                return Err(OrchestrationError::Invalid(format!(
                    "decision: {other:?} is not \"up\", \"keep\" or \"down\""
                )));
            }
        };
        let review = Review {
            key: new_key(),
            agent: agent.into(),
            summary: input.summary.trim().into(),
            rating: input.rating,
            decision: input.decision,
            feedback: input.feedback.trim().into(),
            level_before: before,
            level_after: after,
            at: crate::clock::now_stamp(),
        };
        self.store.insert_review(&review).await?;
        self.apply_level(agent, after).await?;
        let note = format!(
            "Performance review ({}): rated {}/5, trust level {} ({}) → {} ({}). {}{}",
            &review.at[..10],
            review.rating,
            before,
            name(before),
            after,
            name(after),
            review.summary,
            if review.feedback.is_empty() {
                String::new()
            } else {
                format!(" Feedback: {}", review.feedback)
            }
        );
        if let Err(err) = self
            .memory
            .append_note(agent, crate::memory::NoteTarget::Curated, &note)
            .await
        {
            tracing::warn!(agent, error = %err, "could not write a review into the agent's memory");
        }
        self.emit(
            agent,
            "review.recorded",
            &["review", &format!("trust:{}", review.decision)],
            json!({
                "review": review.key, "rating": review.rating, "from": before, "to": after,
            }),
        )
        .await;
        Ok(review)
    }
}
