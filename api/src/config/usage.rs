//! Validating `usage` (price overrides, the global budget) and the limits
//! of agents.

use std::collections::BTreeMap;

use super::ConfigError;
use super::raw::RawUsage;
use super::types::{ModelPrice, UsageConfig};
use crate::limits::Limits;

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
