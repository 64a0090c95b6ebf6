//! `usage` (price overrides, the global budget) as written, validated and
//! checked, and the check of agents' limits.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::ConfigError;
use crate::limits::Limits;

/// Prices and the gateway-wide budget.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawUsage {
    /// Model name (or `provider/model`, `provider/*`) → USD per million tokens.
    #[serde(default)]
    pub prices: BTreeMap<String, RawPrice>,
    pub limits: Option<crate::limits::Limits>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawPrice {
    pub input: f64,
    pub output: f64,
    pub cached_input: Option<f64>,
    pub cache_write: Option<f64>,
}

/// `usage`: price overrides and the gateway-wide budget.
#[derive(Debug, Clone, Default)]
pub struct UsageConfig {
    pub prices: BTreeMap<String, ModelPrice>,
    pub limits: Option<crate::limits::Limits>,
}

/// USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelPrice {
    pub input: f64,
    pub output: f64,
    pub cached_input: Option<f64>,
    pub cache_write: Option<f64>,
}

pub(super) fn usage(raw: RawUsage) -> Result<UsageConfig, ConfigError> {
    let mut prices = BTreeMap::new();
    for (model, price) in raw.prices {
        let path = format!("usage.prices.{model}");
        if model.trim().is_empty() {
            return Err(ConfigError::invalid("usage.prices", "a model name is empty"));
        }
        for (field, value) in [
            ("input", Some(price.input)),
            ("output", Some(price.output)),
            ("cachedInput", price.cached_input),
            ("cacheWrite", price.cache_write),
        ] {
            if let Some(v) = value
                && !(v.is_finite() && v >= 0.0)
            {
                return Err(ConfigError::invalid(
                    format!("{path}.{field}"),
                    "must be USD per million tokens, 0 or more",
                ));
            }
        }
        prices.insert(
            model,
            ModelPrice {
                input: price.input,
                output: price.output,
                cached_input: price.cached_input,
                cache_write: price.cache_write,
            },
        );
    }
    Ok(UsageConfig {
        prices,
        limits: limits(raw.limits, "usage.limits")?,
    })
}

/// Checked limits; `None` when absent or empty.
pub(super) fn limits(raw: Option<Limits>, path: &str) -> Result<Option<Limits>, ConfigError> {
    let Some(limits) = raw else {
        return Ok(None);
    };
    limits
        .check()
        .map_err(|(field, message)| ConfigError::invalid(format!("{path}.{field}"), message))?;
    Ok(limits.non_empty())
}
