//! The records of the loop, as stored and as the API shows them: proposals,
//! missions, steps, events, triggers, reactions, reviews.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Where a proposal stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum ProposalStatus {
    Pending,
    Accepted,
    Rejected,
    /// A status this version does not know (a newer replica wrote it): read
    /// back and shown as stored, never rewritten. (Not in the UI's types:
    /// it shows any other status as it comes.)
    #[serde(untagged)]
    #[cfg_attr(test, ts(skip))]
    Unknown(String),
}

impl std::fmt::Display for ProposalStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Pending => "pending",
            Self::Accepted => "accepted",
            Self::Rejected => "rejected",
            Self::Unknown(status) => status,
        })
    }
}

/// Where a mission or one of its steps stands: queued, running (a step
/// under a lease), then one of the three ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum WorkStatus {
    Queued,
    Running,
    Succeeded,
    Failed,
    Cancelled,
    /// A status this version does not know (a newer replica wrote it): read
    /// back and shown as stored, never rewritten. (Not in the UI's types:
    /// it shows any other status as it comes.)
    #[serde(untagged)]
    #[cfg_attr(test, ts(skip))]
    Unknown(String),
}

impl WorkStatus {
    pub fn as_str(&self) -> &str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::Unknown(status) => status,
        }
    }

    /// Still to end: queued or running.
    pub fn is_active(&self) -> bool {
        matches!(self, Self::Queued | Self::Running)
    }

    /// Ended without success: what waits on it never runs.
    pub fn is_dead(&self) -> bool {
        matches!(self, Self::Failed | Self::Cancelled)
    }
}

impl std::fmt::Display for WorkStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a reaction stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum ReactionStatus {
    Pending,
    Processed,
    Skipped,
    /// A status this version does not know (a newer replica wrote it): read
    /// back and shown as stored, never rewritten. (Not in the UI's types:
    /// it shows any other status as it comes.)
    #[serde(untagged)]
    #[cfg_attr(test, ts(skip))]
    Unknown(String),
}

/// One step a proposal asks for: which agent does what kind of work.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ProposedStep {
    /// What kind of work (`analyze`, `write_content`, `diagnose`, …): gates
    /// and auto-approval are set per kind.
    pub kind: String,
    /// The agent that runs it (default: the proposing agent).
    #[serde(default)]
    pub agent: Option<String>,
    /// What to do, in words: the step's prompt.
    pub input: String,
    /// Indexes of the steps this one waits for (their outputs are its context).
    /// Absent: the step before it (steps run in order); `[]`: none (in parallel).
    #[serde(default)]
    pub after: Option<Vec<usize>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Proposal {
    pub key: String,
    pub agent: String,
    pub title: String,
    #[serde(default)]
    pub description: String,
    /// `api`, `agent`, `trigger`, `reaction` or `task`.
    pub source: String,
    pub steps: Vec<ProposedStep>,
    pub status: ProposalStatus,
    /// Why it was rejected, or how it was accepted (`auto: …`, `approved by …`).
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub mission: Option<String>,
    pub created_at: String,
    #[serde(default)]
    pub decided_at: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Mission {
    pub key: String,
    pub proposal: String,
    pub agent: String,
    pub title: String,
    #[serde(default)]
    pub description: String,
    pub status: WorkStatus,
    pub created_at: String,
    #[serde(default)]
    pub finished_at: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Step {
    pub key: String,
    pub mission: String,
    /// Its place in the mission (0-based).
    pub index: usize,
    pub kind: String,
    pub agent: String,
    pub input: String,
    /// Keys of the steps it waits for.
    #[serde(default)]
    pub after: Vec<String>,
    pub status: WorkStatus,
    #[serde(default)]
    pub output: Option<String>,
    #[serde(default)]
    pub attempts: u32,
    #[serde(default)]
    pub last_error: Option<String>,
    #[serde(default)]
    pub lease_owner: Option<String>,
    #[serde(default)]
    pub lease_until: Option<String>,
    /// The lease's fencing token (one higher at every claim).
    #[serde(default)]
    pub lease_token: Option<u64>,
    pub created_at: String,
    #[serde(default)]
    pub started_at: Option<String>,
    #[serde(default)]
    pub finished_at: Option<String>,
}

impl Step {
    /// The lease a replica holds on this step while it runs.
    pub fn lease(&self) -> Option<crate::lease::Lease> {
        Some(crate::lease::Lease {
            owner: self.lease_owner.clone()?,
            token: self.lease_token?,
            until: self.lease_until.clone()?,
        })
    }
}

/// The audit trail: everything the loop does is an event.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct OpsEvent {
    pub key: String,
    pub agent: String,
    /// `proposal.created`, `mission.failed`, `step.succeeded`, …
    #[serde(rename = "type")]
    pub kind: String,
    pub tags: Vec<String>,
    #[cfg_attr(test, ts(type = "unknown"))]
    pub payload: Value,
    pub at: String,
}

/// When events of a kind (and tags, and payload values) appear, propose work.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "TriggerRule")]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "TriggerRule"))]
pub struct ReactionTrigger {
    pub key: String,
    pub name: String,
    /// `{ "type": "mission.failed", "tags": [..], "payload": { "field": { "gt": 3 } } }`.
    #[cfg_attr(test, ts(type = "unknown"))]
    pub condition: Value,
    /// The proposal to make: `agent`, `title`, `description`, `steps`; `{{payload.x}}`,
    /// `{{agent}}` and `{{type}}` in its text are filled from the event.
    #[cfg_attr(test, ts(type = "unknown"))]
    pub proposal: Value,
    pub cooldown_seconds: u64,
    pub enabled: bool,
    #[serde(default)]
    pub last_fired: Option<String>,
    #[serde(default)]
    pub builtin: bool,
}

/// Work one agent is to do because of another's event (the reaction matrix).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Reaction {
    pub key: String,
    pub event: String,
    pub source_agent: String,
    pub target: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub status: ReactionStatus,
    #[serde(default)]
    pub proposal: Option<String>,
    #[serde(default)]
    pub note: Option<String>,
    pub created_at: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Review {
    pub key: String,
    pub agent: String,
    pub summary: String,
    /// 1 to 5.
    pub rating: u8,
    /// `up`, `keep` or `down`.
    pub decision: String,
    pub feedback: String,
    pub level_before: u8,
    pub level_after: u8,
    pub at: String,
}

/// Fresh keys sort by time (UUID v7).
pub fn new_key() -> String {
    uuid::Uuid::now_v7().simple().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_this_version_does_not_know_round_trip_as_stored() {
        for (text, known) in [
            ("queued", Some(WorkStatus::Queued)),
            ("cancelled", Some(WorkStatus::Cancelled)),
            ("parked", None),
        ] {
            let status: WorkStatus = serde_json::from_value(serde_json::json!(text)).unwrap();
            assert_eq!(status.as_str(), text);
            assert_eq!(serde_json::to_value(&status).unwrap(), text);
            match known {
                Some(known) => assert_eq!(status, known),
                None => assert_eq!(status, WorkStatus::Unknown(text.into())),
            }
        }
        let parked = WorkStatus::Unknown("parked".into());
        assert!(
            !parked.is_active() && !parked.is_dead(),
            "neither waits nor blocks"
        );
        let proposal: ProposalStatus = serde_json::from_value(serde_json::json!("deferred")).unwrap();
        assert_eq!(proposal.to_string(), "deferred");
        let reaction: ReactionStatus = serde_json::from_value(serde_json::json!("pending")).unwrap();
        assert_eq!(reaction, ReactionStatus::Pending);
    }
}
