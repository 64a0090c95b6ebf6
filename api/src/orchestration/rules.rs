//! Matching events: trigger conditions (type, tags, payload fields with
//! simple comparisons), reaction-matrix patterns, filling a proposal template
//! from an event, and the seedable random numbers reactions roll.

use std::sync::Mutex;

use serde_json::{Map, Value};

use super::model::OpsEvent;
use super::policy::ReactionPattern;

/// Whether `event` meets a trigger's condition:
/// `{ "type": "mission.failed", "tags": ["a"], "agent": "x", "payload": { "field": 3 | { "gt": 3 } } }`.
/// A field path may be dotted (`"result.score"`); comparisons are `eq`, `ne`,
/// `gt`, `gte`, `lt`, `lte` and `contains`.
pub fn matches(condition: &Value, event: &OpsEvent) -> bool {
    if let Some(kind) = condition["type"].as_str()
        && kind != event.kind
    {
        return false;
    }
    if let Some(agent) = condition["agent"].as_str()
        && agent != "*"
        && agent != event.agent
    {
        return false;
    }
    if let Some(tags) = condition["tags"].as_array()
        && !tags
            .iter()
            .filter_map(Value::as_str)
            .all(|t| event.tags.iter().any(|e| e == t))
    {
        return false;
    }
    match condition["payload"].as_object() {
        Some(fields) => fields.iter().all(|(path, test)| {
            let value = path.split('.').fold(&event.payload, |v, key| &v[key]);
            compare(value, test)
        }),
        None => true,
    }
}

fn compare(value: &Value, test: &Value) -> bool {
    let Some(ops) = test
        .as_object()
        .filter(|o| o.keys().all(|k| OPS.contains(&k.as_str())))
    else {
        return value == test;
    };
    ops.iter().all(|(op, expected)| {
        let numbers = value.as_f64().zip(expected.as_f64());
        match op.as_str() {
            "eq" => value == expected,
            "ne" => value != expected,
            "gt" => numbers.is_some_and(|(a, b)| a > b),
            "gte" => numbers.is_some_and(|(a, b)| a >= b),
            "lt" => numbers.is_some_and(|(a, b)| a < b),
            "lte" => numbers.is_some_and(|(a, b)| a <= b),
            "contains" => match (value, expected) {
                (Value::String(s), Value::String(part)) => s.contains(part.as_str()),
                (Value::Array(items), item) => items.contains(item),
                _ => false,
            },
            _ => false,
        }
    })
}

const OPS: &[&str] = &["eq", "ne", "gt", "gte", "lt", "lte", "contains"];

/// Whether a reaction-matrix pattern applies: its `source` agent (`*` for
/// any) and all its `tags` on the event.
pub fn pattern_applies(pattern: &ReactionPattern, event: &OpsEvent) -> bool {
    (pattern.source == "*" || pattern.source == event.agent)
        && pattern.tags.iter().all(|t| event.tags.iter().any(|e| e == t))
}

/// A template with `{{agent}}`, `{{type}}` and `{{payload.path}}` filled in
/// every string.
pub fn fill(template: &Value, event: &OpsEvent) -> Value {
    match template {
        Value::String(text) => Value::String(fill_text(text, event)),
        Value::Array(items) => Value::Array(items.iter().map(|v| fill(v, event)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), fill(v, event)))
                .collect::<Map<_, _>>(),
        ),
        other => other.clone(),
    }
}

fn fill_text(text: &str, event: &OpsEvent) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let Some(end) = rest[start..].find("}}") else {
            out.push_str(&rest[start..]);
            return out;
        };
        let name = rest[start + 2..start + end].trim();
        out.push_str(&match name {
            "agent" => event.agent.clone(),
            "type" => event.kind.clone(),
            path => match path.strip_prefix("payload.") {
                Some(path) => match path.split('.').fold(&event.payload, |v, key| &v[key]) {
                    Value::String(s) => s.clone(),
                    Value::Null => String::new(),
                    other => other.to_string(),
                },
                None => String::new(),
            },
        });
        rest = &rest[start + end + 2..];
    }
    out.push_str(rest);
    out
}

/// Random numbers for reaction probabilities: from the OS by default, a fixed
/// sequence with `orchestration.reactionSeed` (tests).
pub struct Dice(Mutex<u64>);

impl Dice {
    pub fn new(seed: Option<u64>) -> Self {
        let seed = seed.unwrap_or_else(|| {
            let bytes = uuid::Uuid::new_v4().into_bytes();
            u64::from_le_bytes(bytes[..8].try_into().unwrap_or_default())
        });
        Self(Mutex::new(seed.max(1)))
    }

    /// A number in `[0, 1)` (xorshift64*).
    pub fn roll(&self) -> f64 {
        let mut state = crate::locks::lock(&self.0);
        let mut x = *state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        *state = x;
        let out = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
        (out >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn event(kind: &str, tags: &[&str], payload: Value) -> OpsEvent {
        OpsEvent {
            key: "k".into(),
            agent: "writer".into(),
            kind: kind.into(),
            tags: tags.iter().map(|t| t.to_string()).collect(),
            payload,
            at: "2026-01-01T00:00:00Z".into(),
        }
    }

    #[test]
    fn conditions_match_type_tags_agent_and_payload_comparisons() {
        let e = event(
            "mission.failed",
            &["mission", "mission:failed"],
            json!({"title": "Launch post", "score": 0.07, "steps": 3}),
        );
        assert!(matches(&json!({"type": "mission.failed"}), &e));
        assert!(!matches(&json!({"type": "mission.succeeded"}), &e));
        assert!(matches(
            &json!({"tags": ["mission:failed"], "agent": "writer"}),
            &e
        ));
        assert!(!matches(&json!({"agent": "other"}), &e));
        assert!(matches(
            &json!({"payload": {"score": {"gt": 0.05}, "steps": 3, "title": {"contains": "Launch"}}}),
            &e
        ));
        assert!(!matches(&json!({"payload": {"score": {"gt": 0.1}}}), &e));
        assert!(!matches(&json!({"payload": {"missing": {"gte": 1}}}), &e));
    }

    #[test]
    fn templates_fill_from_the_event() {
        let e = event(
            "mission.failed",
            &[],
            json!({"title": "Launch", "error": {"text": "timeout"}}),
        );
        let filled = fill(
            &json!({"title": "Why did {{payload.title}} fail?", "steps": [{"input": "{{agent}}: {{payload.error.text}} ({{type}})"}]}),
            &e,
        );
        assert_eq!(filled["title"], "Why did Launch fail?");
        assert_eq!(filled["steps"][0]["input"], "writer: timeout (mission.failed)");
    }

    #[test]
    fn seeded_dice_repeat_and_stay_in_range() {
        let (a, b) = (Dice::new(Some(42)), Dice::new(Some(42)));
        let rolls: Vec<f64> = (0..100).map(|_| a.roll()).collect();
        assert_eq!(rolls, (0..100).map(|_| b.roll()).collect::<Vec<_>>());
        assert!(rolls.iter().all(|r| (0.0..1.0).contains(r)));
        let low = rolls.iter().filter(|r| **r < 0.3).count();
        assert!((15..=45).contains(&low), "{low} of 100 under 0.3");
    }
}
