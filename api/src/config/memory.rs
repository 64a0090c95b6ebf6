//! `memory`: how memory search ranks (fusion, weights, recency half-life),
//! how files are chunked and re-read, and the resident index's budget. The
//! embedder and the reranker, its two outside parts, are in `embedder.rs`.

use std::time::Duration;

use serde::Deserialize;

use super::ConfigError;
use super::embedder::{EmbedderConfig, RawEmbedder, RawReranker, RerankerConfig};
use super::fields::Env;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawMemory {
    pub embedder: Option<RawEmbedder>,
    pub reranker: Option<RawReranker>,
    pub fusion: Option<String>,
    pub vector_weight: Option<f64>,
    pub text_weight: Option<f64>,
    pub min_score: Option<f64>,
    pub half_life_days: Option<f64>,
    pub chunk_tokens: Option<u32>,
    pub chunk_overlap: Option<u32>,
    pub sync_interval_seconds: Option<u64>,
    pub resident_budget_mb: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fusion {
    Linear,
    Rrf,
    /// A weighted sum of the legs' calibrated scores, each leg weighted per
    /// query by how far its best candidate stands out of the rest (the default).
    Adaptive,
}

/// `memory.residentBudgetMb` when unset: 100,000 chunks of 384 dimensions fit.
pub const DEFAULT_RESIDENT_BUDGET_MB: u64 = 512;

#[derive(Debug)]
pub struct MemoryConfig {
    pub embedder: Option<EmbedderConfig>,
    pub fusion: Fusion,
    pub vector_weight: f64,
    pub text_weight: f64,
    pub min_score: f64,
    pub half_life_days: f64,
    pub chunk_tokens: u32,
    pub chunk_overlap: u32,
    /// How often files changed outside Onyx are looked for.
    pub sync_interval: Duration,
    /// The memory a replica's resident search index may hold, in MiB.
    pub resident_budget_mb: u64,
    /// A reranking stage after fusion, when configured.
    pub reranker: Option<RerankerConfig>,
}

fn unit_interval(value: Option<f64>, default: f64, path: &str) -> Result<f64, ConfigError> {
    let value = value.unwrap_or(default);
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(ConfigError::invalid(
            path,
            format!("{value} is not between 0 and 1"),
        ))
    }
}

pub(super) fn memory(raw: RawMemory, env: Env) -> Result<MemoryConfig, ConfigError> {
    let fusion = match raw.fusion.as_deref() {
        None | Some("adaptive") => Fusion::Adaptive,
        Some("rrf") => Fusion::Rrf,
        Some("linear") => Fusion::Linear,
        Some(other) => {
            return Err(ConfigError::invalid(
                "memory.fusion",
                format!("{other:?} is not \"adaptive\", \"linear\" or \"rrf\""),
            ));
        }
    };
    let embedder = raw
        .embedder
        .map(|embedder| super::embedder::embedder(embedder, env))
        .transpose()?;
    let reranker = raw.reranker.map(super::embedder::reranker).transpose()?;
    let chunk_tokens = raw.chunk_tokens.unwrap_or(400);
    let chunk_overlap = raw.chunk_overlap.unwrap_or(80);
    if chunk_tokens < 32 {
        return Err(ConfigError::invalid("memory.chunkTokens", "must be at least 32"));
    }
    if chunk_overlap >= chunk_tokens {
        return Err(ConfigError::invalid(
            "memory.chunkOverlap",
            "must be smaller than memory.chunkTokens",
        ));
    }
    let half_life_days = raw.half_life_days.unwrap_or(365.0);
    if half_life_days <= 0.0 {
        return Err(ConfigError::invalid(
            "memory.halfLifeDays",
            "must be greater than 0",
        ));
    }
    Ok(MemoryConfig {
        embedder,
        fusion,
        vector_weight: unit_interval(raw.vector_weight, 0.6, "memory.vectorWeight")?,
        text_weight: unit_interval(raw.text_weight, 0.4, "memory.textWeight")?,
        min_score: unit_interval(raw.min_score, 0.0, "memory.minScore")?,
        half_life_days,
        chunk_tokens,
        chunk_overlap,
        sync_interval: std::time::Duration::from_secs(match raw.sync_interval_seconds {
            Some(0) => {
                return Err(ConfigError::invalid(
                    "memory.syncIntervalSeconds",
                    "must be at least 1",
                ));
            }
            Some(seconds) => seconds,
            None => 60,
        }),
        resident_budget_mb: match raw.resident_budget_mb {
            Some(0) => {
                return Err(ConfigError::invalid(
                    "memory.residentBudgetMb",
                    "must be at least 1",
                ));
            }
            Some(mb) if mb > 1 << 20 => {
                return Err(ConfigError::invalid(
                    "memory.residentBudgetMb",
                    "must be at most 1048576 (1 TiB)",
                ));
            }
            Some(mb) => mb,
            None => DEFAULT_RESIDENT_BUDGET_MB,
        },
        reranker,
    })
}
