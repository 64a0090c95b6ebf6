//! Spending budgets and rate limits as configured for a key, an agent or the
//! whole gateway (`limits: { dailyUsd, monthlyUsd, rpm, tpm }`): shared
//! vocabulary of the config, the key store and the usage meter. A leaf: it
//! imports nothing from the crate.

use serde::{Deserialize, Serialize};

/// Absent fields do not limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Limits {
    /// USD per UTC day.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub daily_usd: Option<f64>,
    /// USD per UTC calendar month.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub monthly_usd: Option<f64>,
    /// Upstream requests per minute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub rpm: Option<u64>,
    /// Tokens (prompt + completion) per minute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub tpm: Option<u64>,
}

impl Limits {
    pub fn is_empty(&self) -> bool {
        self.daily_usd.is_none() && self.monthly_usd.is_none() && self.rpm.is_none() && self.tpm.is_none()
    }

    /// Checks every value; the error names the field (`dailyUsd`, …).
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        for (field, value) in [("dailyUsd", self.daily_usd), ("monthlyUsd", self.monthly_usd)] {
            if let Some(v) = value
                && !(v.is_finite() && v >= 0.0)
            {
                return Err((field, format!("{field}: must be a number of USD, 0 or more")));
            }
        }
        for (field, value) in [("rpm", self.rpm), ("tpm", self.tpm)] {
            if value == Some(0) {
                return Err((
                    field,
                    format!("{field}: must be at least 1 (leave it out for no limit)"),
                ));
            }
        }
        Ok(())
    }

    /// `None` when nothing is limited, so callers can skip all checks.
    pub fn non_empty(self) -> Option<Self> {
        (!self.is_empty()).then_some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_camel_case_and_rejects_bad_values() {
        let limits: Limits = serde_json::from_str(r#"{"dailyUsd": 1.5, "rpm": 10}"#).unwrap();
        assert_eq!(limits.daily_usd, Some(1.5));
        assert_eq!(limits.rpm, Some(10));
        assert!(limits.check().is_ok());
        assert!(!limits.is_empty());
        assert!(serde_json::from_str::<Limits>(r#"{"daily": 1}"#).is_err());
        let bad = Limits {
            monthly_usd: Some(-1.0),
            ..Default::default()
        };
        assert_eq!(bad.check().unwrap_err().0, "monthlyUsd");
        let zero = Limits {
            tpm: Some(0),
            ..Default::default()
        };
        assert_eq!(zero.check().unwrap_err().0, "tpm");
        assert_eq!(Limits::default().non_empty(), None);
    }
}
