//! JSON ↔ Smithy `Document`, the SDK's type for free-form JSON: tool input
//! schemas and tool-call arguments going out, tool-call inputs coming back.

use aws_smithy_types::{Document, Number};
use serde_json::{Map, Value};

pub fn from_json(value: &Value) -> Document {
    match value {
        Value::Null => Document::Null,
        Value::Bool(b) => Document::Bool(*b),
        Value::Number(n) => Document::Number(match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => Number::PosInt(u),
            (None, Some(i)) => Number::NegInt(i),
            _ => Number::Float(n.as_f64().unwrap_or_default()),
        }),
        Value::String(s) => Document::String(s.clone()),
        Value::Array(items) => Document::Array(items.iter().map(from_json).collect()),
        Value::Object(map) => Document::Object(map.iter().map(|(k, v)| (k.clone(), from_json(v))).collect()),
    }
}

pub fn to_json(document: &Document) -> Value {
    match document {
        Document::Null => Value::Null,
        Document::Bool(b) => Value::Bool(*b),
        Document::Number(Number::PosInt(u)) => Value::from(*u),
        Document::Number(Number::NegInt(i)) => Value::from(*i),
        Document::Number(Number::Float(f)) => {
            serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number)
        }
        Document::String(s) => Value::String(s.clone()),
        Document::Array(items) => Value::Array(items.iter().map(to_json).collect()),
        Document::Object(map) => {
            // Sorted, so arguments read the same on every call.
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let object: Map<String, Value> =
                keys.into_iter().map(|k| (k.clone(), to_json(&map[k]))).collect();
            Value::Object(object)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_survives_the_round_trip() {
        let value = json!({"type": "object", "n": -3, "big": 18446744073709551615u64, "f": 0.5,
            "list": [true, null, "x"], "nested": {"a": {}}});
        assert_eq!(to_json(&from_json(&value)), value);
        assert!(matches!(
            from_json(&json!(-3)),
            Document::Number(Number::NegInt(-3))
        ));
        assert!(matches!(
            from_json(&json!(2.5)),
            Document::Number(Number::Float(_))
        ));
    }
}
