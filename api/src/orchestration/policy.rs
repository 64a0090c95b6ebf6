//! Policy as data: the keys the loop reads from the `policy` table (edited
//! at runtime through `/v1/policy`), with their defaults when absent.
//!
//! | key | value |
//! | --- | --- |
//! | `auto_approve` | `{ enabled, allowed_step_kinds: [..], agents: { id: [kinds] } }` |
//! | `step_quotas` | `{ kind: daily limit }` (UTC day) |
//! | `agent_budgets` | `{ agent: daily USD }`, else the trust level's |
//! | `trust_budgets` | `{ "1".."4": daily USD }` |
//! | `concurrency` | `{ max_active_missions }` |
//! | `reaction_matrix` | `{ patterns: [{ source, tags, target, type, probability, cooldown_minutes }] }` (or `cooldown_seconds`; see [`ReactionPattern`]) |
//! | `diagnosis_agent` | the agent the built-in "mission failed" trigger asks (default: the default agent) |

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;

pub const KEYS: &[&str] = &[
    "auto_approve",
    "step_quotas",
    "agent_budgets",
    "trust_budgets",
    "concurrency",
    "reaction_matrix",
    "diagnosis_agent",
];

/// Whether a value has the shape its key needs: a clear 400 instead of a
/// policy the loop would ignore.
pub fn check(key: &str, value: &Value) -> Result<(), String> {
    let object = || {
        value
            .as_object()
            .ok_or_else(|| format!("policy {key} must be a JSON object"))
    };
    match key {
        "auto_approve" => {
            let o = object()?;
            if o.get("enabled").is_some_and(|v| !v.is_boolean()) {
                return Err("auto_approve.enabled must be true or false".into());
            }
            if let Some(kinds) = o.get("allowed_step_kinds")
                && !kinds.as_array().is_some_and(|k| k.iter().all(Value::is_string))
            {
                return Err("auto_approve.allowed_step_kinds must be a list of step kinds".into());
            }
            Ok(())
        }
        "step_quotas" | "agent_budgets" | "trust_budgets" => {
            for (name, limit) in object()? {
                if !limit.as_f64().is_some_and(|l| l >= 0.0) {
                    return Err(format!("{key}.{name} must be a number, 0 or more"));
                }
            }
            Ok(())
        }
        "concurrency" => match object()?.get("max_active_missions") {
            Some(v) if v.as_u64().is_none_or(|n| n == 0) => {
                Err("concurrency.max_active_missions must be a whole number above 0".into())
            }
            _ => Ok(()),
        },
        "reaction_matrix" => {
            object()?;
            reaction_patterns(value, Stored::Refuse).map(drop)
        }
        "diagnosis_agent" => value
            .as_str()
            .map(drop)
            .ok_or_else(|| "diagnosis_agent must be an agent id".into()),
        other => Err(format!(
            "there is no policy {other:?} (policies: {})",
            KEYS.join(", ")
        )),
    }
}

/// One pattern of the reaction matrix: when an event of `source` (`*`: any
/// agent) carries all of `tags`, `target` reacts with a step of `kind`, with
/// `probability`, at most once per `cooldown` for that target and kind.
#[derive(Debug, Clone, PartialEq)]
pub struct ReactionPattern {
    pub source: String,
    pub tags: Vec<String>,
    pub target: String,
    pub kind: String,
    pub probability: f64,
    pub cooldown: Duration,
}

/// What to do with a pattern's bare `cooldown`: seed 004 means minutes
/// (`"cooldown": 120` is two hours), while Onyx read it as seconds. New
/// policies must name the unit; a policy stored before keeps meaning what
/// it meant when it was stored (seconds), with a warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// Written through the API now: refused, naming the keys to use.
    Refuse,
    /// Read back from the database: seconds, as when it was written.
    AsSeconds,
}

/// The longest cooldown a pattern may ask for (a year).
const MAX_COOLDOWN_MINUTES: f64 = 365.0 * 24.0 * 60.0;

/// The reaction matrix's patterns, typed; the first bad field, named.
pub fn reaction_patterns(value: &Value, bare_cooldown: Stored) -> Result<Vec<ReactionPattern>, String> {
    let patterns = value["patterns"]
        .as_array()
        .ok_or("reaction_matrix.patterns must be a list")?;
    patterns
        .iter()
        .enumerate()
        .map(|(i, p)| pattern(i, p, bare_cooldown))
        .collect()
}

fn pattern(i: usize, p: &Value, bare_cooldown: Stored) -> Result<ReactionPattern, String> {
    let at = |field: &str| format!("reaction_matrix.patterns[{i}].{field}");
    let text = |field: &str| {
        p[field]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("{} must be a string", at(field)))
    };
    let probability = p["probability"]
        .as_f64()
        .filter(|x| (0.0..=1.0).contains(x))
        .ok_or_else(|| format!("{} must be between 0 and 1", at("probability")))?;
    let tags = match &p["tags"] {
        Value::Null => Vec::new(),
        Value::Array(tags) => tags
            .iter()
            .map(|t| t.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| format!("{} must be a list of strings", at("tags")))?,
        _ => return Err(format!("{} must be a list of strings", at("tags"))),
    };
    let number = |field: &str, max: f64| -> Result<Option<f64>, String> {
        match &p[field] {
            Value::Null => Ok(None),
            v => v
                .as_f64()
                .filter(|n| (0.0..=max).contains(n))
                .map(Some)
                .ok_or_else(|| format!("{} must be a number from 0 to {max}", at(field))),
        }
    };
    let minutes = number("cooldown_minutes", MAX_COOLDOWN_MINUTES)?;
    let seconds = number("cooldown_seconds", MAX_COOLDOWN_MINUTES * 60.0)?;
    let bare = number("cooldown", MAX_COOLDOWN_MINUTES * 60.0)?;
    if bare.is_some() && (minutes.is_some() || seconds.is_some()) {
        return Err(format!(
            "{}: remove it; cooldown_minutes or cooldown_seconds says the cooldown",
            at("cooldown")
        ));
    }
    let cooldown = match (minutes, seconds, bare) {
        (Some(_), Some(_), _) => {
            return Err(format!(
                "{}: give cooldown_minutes or cooldown_seconds, not both",
                at("cooldown_minutes")
            ));
        }
        (Some(m), None, _) => Duration::from_secs_f64(m * 60.0),
        (None, Some(s), _) => Duration::from_secs_f64(s),
        (None, None, Some(s)) => match bare_cooldown {
            Stored::Refuse => {
                return Err(format!(
                    "{} is ambiguous (seed 004 means minutes, Onyx read it as seconds): write cooldown_minutes (or cooldown_seconds) instead",
                    at("cooldown")
                ));
            }
            Stored::AsSeconds => {
                warn_bare_cooldown();
                Duration::from_secs_f64(s)
            }
        },
        (None, None, None) => Duration::ZERO,
    };
    Ok(ReactionPattern {
        source: text("source")?,
        tags,
        target: text("target")?,
        kind: text("type")?,
        probability,
        cooldown,
    })
}

/// Once per process: a stored matrix still says `cooldown`.
fn warn_bare_cooldown() {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if !WARNED.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            "policy reaction_matrix has a pattern with \"cooldown\", read as seconds as when it was stored; \
             it is deprecated: write cooldown_minutes (seed 004's unit) or cooldown_seconds with PUT /v1/policy/reaction_matrix"
        );
    }
}

/// Whether `auto_approve` lets these step kinds of this agent run without a human.
pub fn auto_approves(policy: Option<&Value>, agent: &str, kinds: &[&str]) -> bool {
    let Some(policy) = policy else { return false };
    if policy["enabled"] != Value::Bool(true) {
        return false;
    }
    let listed = |list: &Value| -> Vec<String> {
        list.as_array()
            .map(|l| l.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default()
    };
    let mut allowed = listed(&policy["allowed_step_kinds"]);
    allowed.extend(listed(&policy["agents"][agent]));
    kinds.iter().all(|k| allowed.iter().any(|a| a == k || a == "*"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn auto_approval_needs_every_kind_allowed_globally_or_for_the_agent() {
        let policy = json!({"enabled": true, "allowed_step_kinds": ["analyze"], "agents": {"writer": ["write_content"]}});
        assert!(auto_approves(Some(&policy), "any", &["analyze"]));
        assert!(!auto_approves(Some(&policy), "any", &["analyze", "deploy"]));
        assert!(auto_approves(
            Some(&policy),
            "writer",
            &["analyze", "write_content"]
        ));
        assert!(!auto_approves(
            Some(&json!({"enabled": false, "allowed_step_kinds": ["*"]})),
            "a",
            &["x"]
        ));
        assert!(!auto_approves(None, "a", &["x"]));
    }

    #[test]
    fn bad_policies_are_refused_with_the_field() {
        assert!(
            check("auto_approve", &json!({"enabled": "yes"}))
                .unwrap_err()
                .contains("enabled")
        );
        assert!(
            check("step_quotas", &json!({"deploy": -1}))
                .unwrap_err()
                .contains("step_quotas.deploy")
        );
        assert!(
            check("nope", &json!({}))
                .unwrap_err()
                .contains("there is no policy")
        );
        assert!(
            check(
                "reaction_matrix",
                &json!({"patterns": [{"source": "*", "target": "b", "type": "t", "probability": 2}]})
            )
            .is_err()
        );
        assert!(check("concurrency", &json!({"max_active_missions": 3})).is_ok());
    }

    fn matrix(pattern: Value) -> Value {
        let mut p = json!({"source": "*", "tags": ["mission:failed"], "target": "brain", "type": "diagnose", "probability": 1.0});
        p.as_object_mut()
            .unwrap()
            .extend(pattern.as_object().unwrap().clone());
        json!({"patterns": [p]})
    }

    #[test]
    fn reaction_cooldowns_say_their_unit() {
        let minutes = reaction_patterns(&matrix(json!({"cooldown_minutes": 60})), Stored::Refuse).unwrap();
        assert_eq!(minutes[0].cooldown, Duration::from_secs(3600));
        assert_eq!(minutes[0].tags, ["mission:failed"]);
        let seconds = reaction_patterns(&matrix(json!({"cooldown_seconds": 90})), Stored::Refuse).unwrap();
        assert_eq!(seconds[0].cooldown, Duration::from_secs(90));
        let none = reaction_patterns(&matrix(json!({})), Stored::Refuse).unwrap();
        assert_eq!(none[0].cooldown, Duration::ZERO);
        assert!(check("reaction_matrix", &matrix(json!({"cooldown_minutes": 120}))).is_ok());
    }

    #[test]
    fn a_bare_cooldown_is_refused_when_written_and_keeps_its_stored_meaning_when_read() {
        let bare = matrix(json!({"cooldown": 120}));
        let refused = check("reaction_matrix", &bare).unwrap_err();
        assert!(
            refused.contains("patterns[0].cooldown is ambiguous") && refused.contains("cooldown_minutes"),
            "{refused}"
        );
        let stored = reaction_patterns(&bare, Stored::AsSeconds).unwrap();
        assert_eq!(
            stored[0].cooldown,
            Duration::from_secs(120),
            "seconds, as it was stored"
        );
        for (both, field) in [
            (
                json!({"cooldown_minutes": 1, "cooldown_seconds": 60}),
                "cooldown_minutes",
            ),
            (json!({"cooldown_minutes": 1, "cooldown": 60}), "cooldown"),
        ] {
            let err = reaction_patterns(&matrix(both), Stored::AsSeconds).unwrap_err();
            assert!(err.contains(&format!("patterns[0].{field}")), "{err}");
        }
        for bad in [json!({"cooldown_minutes": -1}), json!({"cooldown_minutes": "2h"})] {
            let err = check("reaction_matrix", &matrix(bad)).unwrap_err();
            assert!(err.contains("cooldown_minutes must be a number"), "{err}");
        }
        let err = check("reaction_matrix", &matrix(json!({"tags": "x"}))).unwrap_err();
        assert!(err.contains("tags must be a list"), "{err}");
    }
}
