//! What decides when agents run on their own: the `scheduler` block, the
//! default timezone and each agent's heartbeat, as written, validated and
//! checked.

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::ConfigError;

/// The task scheduler's settings.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawScheduler {
    pub enabled: Option<bool>,
    pub catch_up: Option<String>,
    pub missed_after_seconds: Option<u64>,
    pub lease_seconds: Option<u64>,
    pub max_consecutive_failures: Option<u32>,
    pub failure_backoff_seconds: Option<u64>,
    pub run_timeout_seconds: Option<u64>,
}

#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    pub enabled: bool,
    /// Tasks without their own timezone use this one (`agents.defaults.timezone`).
    pub timezone: chrono_tz::Tz,
    pub catch_up: CatchUp,
    /// A due run this overdue was missed (no replica was running).
    pub missed_after: Duration,
    /// How long a claimed run is owned without renewal; a replica that dies
    /// mid-run loses its claim after this long.
    pub lease: Duration,
    /// A task failing this many times in a row is paused.
    pub max_consecutive_failures: u32,
    /// The first retry delay after a failure; doubles per further failure (to 1 h).
    pub failure_backoff: Duration,
    pub run_timeout: Duration,
}

/// What happens to occurrences missed while no replica was running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatchUp {
    /// Recorded as skipped; the task waits for its next occurrence.
    Skip,
    /// Run once now, however many were missed.
    Once,
}

/// An agent's `heartbeat`: how often it runs its HEARTBEAT.md checklist, and
/// where a result other than `HEARTBEAT_OK` goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatConfig {
    pub every: Duration,
    /// `telegram:<chat>`, `discord:<channel>` or `session:<id>`.
    pub deliver_to: Option<String>,
}

/// An IANA timezone name (`Europe/Berlin`, `UTC`); `default` when unset.
pub fn timezone(
    name: Option<&str>,
    path: &str,
    default: impl FnOnce() -> chrono_tz::Tz,
) -> Result<chrono_tz::Tz, ConfigError> {
    match name {
        None => Ok(default()),
        Some(name) => name.parse().map_err(|_| {
            ConfigError::invalid(
                path,
                format!("{name:?} is not an IANA timezone name (like \"Europe/Berlin\" or \"UTC\")"),
            )
        }),
    }
}

pub fn scheduler(raw: RawScheduler, timezone: chrono_tz::Tz) -> Result<SchedulerConfig, ConfigError> {
    let catch_up = match raw.catch_up.as_deref() {
        None | Some("once") => CatchUp::Once,
        Some("skip") => CatchUp::Skip,
        Some(other) => {
            return Err(ConfigError::invalid(
                "scheduler.catchUp",
                format!("{other:?} is not \"once\" or \"skip\""),
            ));
        }
    };
    let lease = raw.lease_seconds.unwrap_or(60);
    if lease == 0 {
        return Err(ConfigError::invalid(
            "scheduler.leaseSeconds",
            "must be at least 1",
        ));
    }
    let max_consecutive_failures = raw.max_consecutive_failures.unwrap_or(5);
    if max_consecutive_failures == 0 {
        return Err(ConfigError::invalid(
            "scheduler.maxConsecutiveFailures",
            "must be at least 1",
        ));
    }
    Ok(SchedulerConfig {
        enabled: raw.enabled.unwrap_or(true),
        timezone,
        catch_up,
        missed_after: Duration::from_secs(raw.missed_after_seconds.unwrap_or(60).max(1)),
        lease: Duration::from_secs(lease),
        max_consecutive_failures,
        failure_backoff: Duration::from_secs(raw.failure_backoff_seconds.unwrap_or(30)),
        run_timeout: Duration::from_secs(raw.run_timeout_seconds.unwrap_or(600).max(1)),
    })
}

/// OpenClaw's `heartbeat: { every: "30m", deliverTo: "telegram:123" }` (a
/// bare `"30m"` works too); `"0"`, `"off"` or nothing turns it off.
pub fn heartbeat(raw: Option<&Value>, path: &str) -> Result<Option<HeartbeatConfig>, ConfigError> {
    let mut deliver_to = None;
    let every = match raw {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(every)) => every.as_str(),
        Some(Value::Object(map)) => {
            if let Some(key) = map.keys().find(|k| !matches!(k.as_str(), "every" | "deliverTo")) {
                return Err(ConfigError::invalid(
                    format!("{path}.{key}"),
                    "unknown key (heartbeat takes \"every\" and \"deliverTo\")",
                ));
            }
            deliver_to = match map.get("deliverTo") {
                None | Some(Value::Null) => None,
                Some(Value::String(target)) => Some(deliver_target(target, &format!("{path}.deliverTo"))?),
                Some(_) => {
                    return Err(ConfigError::invalid(
                        format!("{path}.deliverTo"),
                        "expected a target like \"telegram:<chat_id>\"",
                    ));
                }
            };
            match map.get("every") {
                None | Some(Value::Null) => return Ok(None),
                Some(Value::String(every)) => every.as_str(),
                Some(_) => {
                    return Err(ConfigError::invalid(
                        format!("{path}.every"),
                        "expected a duration like \"30m\"",
                    ));
                }
            }
        }
        Some(_) => {
            return Err(ConfigError::invalid(path, "expected { every: \"30m\" }"));
        }
    };
    if matches!(every.trim(), "" | "0" | "off") {
        return Ok(None);
    }
    let duration = humantime::parse_duration(every.trim()).map_err(|e| {
        ConfigError::invalid(
            format!("{path}.every"),
            format!("{every:?} is not a duration like \"30m\" or \"2h\": {e}"),
        )
    })?;
    if duration < Duration::from_secs(1) {
        return Err(ConfigError::invalid(
            format!("{path}.every"),
            "must be at least 1s",
        ));
    }
    Ok(Some(HeartbeatConfig {
        every: duration,
        deliver_to,
    }))
}

/// `telegram:<chat>`, `discord:<channel>` or `session:<id>`.
fn deliver_target(target: &str, path: &str) -> Result<String, ConfigError> {
    let target = target.trim();
    match target.split_once(':') {
        Some(("telegram" | "discord" | "session", rest)) if !rest.trim().is_empty() => Ok(target.to_string()),
        _ => Err(ConfigError::invalid(
            path,
            format!("{target:?} is not \"telegram:<chat_id>\", \"discord:<channel_id>\" or \"session:<id>\""),
        )),
    }
}
