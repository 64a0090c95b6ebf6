//! `orchestration`: proposals become missions whose steps run as agent runs;
//! whether this replica runs steps, their lease, attempts, parallelism and
//! time limit.

use std::time::Duration;

use serde::Deserialize;

use super::ConfigError;

/// Proposals, missions and steps (`orchestration`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawOrchestration {
    pub enabled: Option<bool>,
    /// `false`: this replica never runs steps (a control-plane replica).
    pub worker: Option<bool>,
    pub lease_seconds: Option<u64>,
    pub max_attempts: Option<u32>,
    pub max_parallel_steps: Option<usize>,
    pub step_timeout_seconds: Option<u64>,
    /// Seeds the reaction matrix's random numbers (tests, reproducible runs).
    pub reaction_seed: Option<u64>,
}

/// `orchestration`: proposals become missions whose steps run as agent runs.
#[derive(Debug, Clone)]
pub struct OrchestrationConfig {
    pub enabled: bool,
    /// Whether this replica claims and runs steps.
    pub worker: bool,
    /// A step whose replica stops renewing it this long is stale.
    pub lease: Duration,
    /// Runs of one step before it fails for good.
    pub max_attempts: u32,
    /// Steps this replica runs at once.
    pub max_parallel_steps: usize,
    pub step_timeout: Duration,
    pub reaction_seed: Option<u64>,
}

impl Default for OrchestrationConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            worker: true,
            lease: Duration::from_secs(60),
            max_attempts: 2,
            max_parallel_steps: 4,
            step_timeout: Duration::from_secs(600),
            reaction_seed: None,
        }
    }
}

pub(super) fn orchestration(raw: RawOrchestration) -> Result<OrchestrationConfig, ConfigError> {
    let defaults = OrchestrationConfig::default();
    let positive = |value: Option<u64>, path: &str| match value {
        Some(0) => Err(ConfigError::invalid(path, "must be at least 1")),
        other => Ok(other),
    };
    Ok(OrchestrationConfig {
        enabled: raw.enabled.unwrap_or(defaults.enabled),
        worker: raw.worker.unwrap_or(defaults.worker),
        lease: positive(raw.lease_seconds, "orchestration.leaseSeconds")?
            .map_or(defaults.lease, Duration::from_secs),
        max_attempts: positive(raw.max_attempts.map(u64::from), "orchestration.maxAttempts")?
            .map_or(defaults.max_attempts, |n| u32::try_from(n).unwrap_or(u32::MAX)),
        max_parallel_steps: positive(
            raw.max_parallel_steps.map(|n| n as u64),
            "orchestration.maxParallelSteps",
        )?
        .map_or(defaults.max_parallel_steps, |n| {
            usize::try_from(n).unwrap_or(usize::MAX)
        }),
        step_timeout: positive(raw.step_timeout_seconds, "orchestration.stepTimeoutSeconds")?
            .map_or(defaults.step_timeout, Duration::from_secs),
        reaction_seed: raw.reaction_seed,
    })
}
