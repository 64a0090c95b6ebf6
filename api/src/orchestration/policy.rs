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
//! | `reaction_matrix` | `{ patterns: [{ source, tags, target, type, probability, cooldown }] }` (cooldown in seconds) |
//! | `diagnosis_agent` | the agent the built-in "mission failed" trigger asks (default: the default agent) |

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
            let patterns = object()?
                .get("patterns")
                .and_then(Value::as_array)
                .ok_or("reaction_matrix.patterns must be a list")?;
            for (i, p) in patterns.iter().enumerate() {
                for field in ["source", "target", "type"] {
                    if !p[field].is_string() {
                        return Err(format!("reaction_matrix.patterns[{i}].{field} must be a string"));
                    }
                }
                if !p["probability"]
                    .as_f64()
                    .is_some_and(|x| (0.0..=1.0).contains(&x))
                {
                    return Err(format!(
                        "reaction_matrix.patterns[{i}].probability must be between 0 and 1"
                    ));
                }
            }
            Ok(())
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
}
