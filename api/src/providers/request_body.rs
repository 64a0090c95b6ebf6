//! A request body on its way to an upstream, and [`WithModel`], which writes
//! it out with `model` replaced.
//!
//! A plain chat call is forwarded as the client sent it: its top-level
//! fields are found once ([`RawObject`], serde reading each value as a
//! borrowed [`RawValue`]) and written out byte for byte, never built into a
//! `serde_json` tree and written again (a tree costs an allocation per key and
//! string, a hash per key, and a free of each). A body something rewrote (a
//! session's history put in, a translation from another protocol, an agent's
//! call) is a tree.

use serde::ser::{Error as _, Serialize, SerializeMap, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::RawObject;

/// A chat-completions body: as it came, or as a tree.
#[derive(Debug)]
pub enum ChatBody {
    Raw(RawObject),
    Tree(Map<String, Value>),
}

impl ChatBody {
    /// The body as a tree, for callers that rewrite it.
    pub fn into_tree(self) -> Result<Map<String, Value>, serde_json::Error> {
        match self {
            Self::Tree(map) => Ok(map),
            Self::Raw(raw) => raw.into_tree(),
        }
    }

    pub fn as_ref(&self) -> BodyRef<'_> {
        match self {
            Self::Tree(map) => BodyRef::Tree(map),
            Self::Raw(raw) => BodyRef::Raw(raw),
        }
    }
}

impl From<Map<String, Value>> for ChatBody {
    fn from(map: Map<String, Value>) -> Self {
        Self::Tree(map)
    }
}

/// A body of any protocol, borrowed: what metering and [`WithModel`] read.
#[derive(Clone, Copy)]
pub enum BodyRef<'a> {
    Raw(&'a RawObject),
    Tree(&'a Map<String, Value>),
}

impl<'a> From<&'a Map<String, Value>> for BodyRef<'a> {
    fn from(map: &'a Map<String, Value>) -> Self {
        Self::Tree(map)
    }
}

impl<'a> From<&'a ChatBody> for BodyRef<'a> {
    fn from(body: &'a ChatBody) -> Self {
        body.as_ref()
    }
}

impl BodyRef<'_> {
    /// The first of `keys` present as a whole number.
    pub fn first_u64(&self, keys: &[&str]) -> Option<u64> {
        keys.iter().find_map(|key| match self {
            Self::Tree(map) => map.get(*key).and_then(Value::as_u64),
            Self::Raw(raw) => raw.get(key).and_then(|text| text.parse().ok()),
        })
    }
}

/// Writes a request body with `model` replaced, without copying the body.
pub(crate) struct WithModel<'a> {
    pub model: &'a str,
    pub body: BodyRef<'a>,
    /// Fields the upstream must not get.
    pub without: &'a [&'a str],
    /// Ask for the usage chunk of a stream (`stream_options.include_usage`)
    /// whether or not the client did, keeping its other stream options.
    pub stream_usage: bool,
}

impl WithModel<'_> {
    /// Whether `key` is written from the body as it is.
    fn passes(&self, key: &[u8]) -> bool {
        key != b"model"
            && !self.without.iter().any(|left_out| left_out.as_bytes() == key)
            && !(self.stream_usage && key == b"stream_options")
    }

    /// The client's stream options with `include_usage` set.
    fn stream_options(&self) -> Map<String, Value> {
        let given = match self.body {
            BodyRef::Tree(map) => map.get("stream_options").cloned(),
            BodyRef::Raw(raw) => raw
                .get("stream_options")
                .and_then(|text| serde_json::from_str(text).ok()),
        };
        let mut options = match given {
            Some(Value::Object(options)) => options,
            _ => Map::new(),
        };
        options.insert("include_usage".into(), Value::Bool(true));
        options
    }

    /// The JSON text: a raw body's fields are copied as they came.
    pub fn to_json(&self) -> Result<Vec<u8>, serde_json::Error> {
        let BodyRef::Raw(raw) = self.body else {
            return serde_json::to_vec(self);
        };
        let mut out = Vec::with_capacity(raw.json_len() + self.model.len() + 16);
        out.extend_from_slice(b"{\"model\":");
        serde_json::to_writer(&mut out, self.model)?;
        raw.write_fields(&mut out, |key| self.passes(key.as_bytes()))?;
        if self.stream_usage {
            out.extend_from_slice(b",\"stream_options\":");
            serde_json::to_writer(&mut out, &self.stream_options())?;
        }
        out.push(b'}');
        Ok(out)
    }
}

impl Serialize for WithModel<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("model", self.model)?;
        match self.body {
            BodyRef::Tree(body) => {
                for (key, value) in body.iter().filter(|(key, _)| self.passes(key.as_bytes())) {
                    map.serialize_entry(key, value)?;
                }
            }
            BodyRef::Raw(raw) => {
                for (key, value) in raw.fields().filter(|(key, _)| self.passes(key.as_bytes())) {
                    let value: &RawValue = serde_json::from_str(value).map_err(S::Error::custom)?;
                    map.serialize_entry(key, value)?;
                }
            }
        }
        if self.stream_usage {
            map.serialize_entry("stream_options", &self.stream_options())?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use proptest::prelude::*;
    use serde_json::json;

    fn tree(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    fn raw(text: &str) -> RawObject {
        RawObject::read(Bytes::copy_from_slice(text.as_bytes())).expect("an object")
    }

    /// Both ways of writing, as JSON values.
    fn written(with: WithModel<'_>) -> (Value, Value) {
        let direct: Value = serde_json::from_slice(&with.to_json().unwrap()).unwrap();
        let serialized = serde_json::to_value(&with).unwrap();
        (direct, serialized)
    }

    #[test]
    fn replaces_only_the_model_from_a_tree_or_as_it_came() {
        let text = r#"{"model": "openai/gpt-4o", "messages": [], "custom": {"x": 1.50}}"#;
        let expected = json!({"model": "gpt-4o", "messages": [], "custom": {"x": 1.5}});
        let map = tree(serde_json::from_str(text).unwrap());
        let raw = raw(text);
        for body in [BodyRef::Tree(&map), BodyRef::Raw(&raw)] {
            let with = |without, stream_usage| WithModel {
                model: "gpt-4o",
                body,
                without,
                stream_usage,
            };
            assert_eq!(written(with(&[], false)), (expected.clone(), expected.clone()));
            let (direct, _) = written(with(&["custom"], false));
            assert_eq!(direct, json!({"model": "gpt-4o", "messages": []}));
        }
        // As it came: the client's own number text, byte for byte.
        let with = WithModel {
            model: "gpt-4o",
            body: BodyRef::Raw(&raw),
            without: &[],
            stream_usage: false,
        };
        let out = String::from_utf8(with.to_json().unwrap()).unwrap();
        assert_eq!(out, r#"{"model":"gpt-4o","messages":[],"custom":{"x": 1.50}}"#);
    }

    #[test]
    fn asks_a_stream_for_its_usage_keeping_the_clients_options() {
        let text = r#"{"model":"m","stream":true,"stream_options":{"include_obfuscation":false}}"#;
        let map = tree(serde_json::from_str(text).unwrap());
        let raw = raw(text);
        let expected = json!({"model": "m", "stream": true,
            "stream_options": {"include_obfuscation": false, "include_usage": true}});
        for body in [BodyRef::Tree(&map), BodyRef::Raw(&raw)] {
            let with = WithModel {
                model: "m",
                body,
                without: &[],
                stream_usage: true,
            };
            assert_eq!(written(with), (expected.clone(), expected.clone()));
        }
    }

    #[test]
    fn a_raw_body_reads_removes_and_becomes_a_tree() {
        let mut body = raw(r#" {"model":"m","x-onyx-session-id":"s1","max_tokens":7} "#);
        assert_eq!(body.get("max_tokens"), Some("7"));
        assert_eq!(body.remove("x-onyx-session-id").as_deref(), Some(r#""s1""#));
        assert_eq!(body.remove("x-onyx-session-id"), None);
        assert_eq!(
            BodyRef::Raw(&body).first_u64(&["max_completion_tokens", "max_tokens"]),
            Some(7)
        );
        let tree = ChatBody::Raw(body).into_tree().unwrap();
        assert_eq!(Value::Object(tree), json!({"model": "m", "max_tokens": 7}));
        for refused in ["[1]", r#"{"a":1"#, r#"{"a":1} x"#, r#"{"a":1,}"#, "", "\"s\""] {
            assert!(
                RawObject::read(Bytes::from_static(refused.as_bytes())).is_err(),
                "{refused}"
            );
        }
        assert!(
            RawObject::read(Bytes::from_static(b"{\"a\":\"\xff\"}")).is_err(),
            "not UTF-8"
        );
        for undecodable in [
            r#"{"a":["\ud800"]}"#,
            r#"{"a":{"b":"x\uDC00"}}"#,
            r#"{"\ud83d":1}"#,
            r#"{"a":[1e400]}"#,
            r#"{"a":-2.5E+999}"#,
        ] {
            assert!(
                RawObject::read(Bytes::from_static(undecodable.as_bytes())).is_err(),
                "{undecodable}"
            );
        }
        let long = format!(r#"{{"a":{}}}"#, "9".repeat(400));
        assert!(
            RawObject::read(Bytes::from(long)).is_err(),
            "a number past f64's range"
        );
        assert!(raw(r#"{"a":1.5e3,"b":"h264e","c":"\u00e9"}"#).get("a") == Some("1.5e3"));
        let paired = raw(r#"{"a":"\ud83d\ude00","b":"\\ud800"}"#);
        assert_eq!(paired.get("a"), Some(r#""\ud83d\ude00""#));
    }

    #[test]
    fn escaped_and_repeated_keys_read_as_serde_json_reads_them() {
        // An escaped key is the key it spells: `mod\u0065l` is `model`, so
        // it is replaced like any other spelling of it.
        let body = raw(r#"{"mod\u0065l":"a/b","x\"y":1,"a":1,"b":2,"a":3}"#);
        let fields: Vec<_> = body.fields().collect();
        assert_eq!(
            fields,
            [("model", r#""a/b""#), ("x\"y", "1"), ("a", "3"), ("b", "2")]
        );
        let with = WithModel {
            model: "m",
            body: BodyRef::Raw(&body),
            without: &[],
            stream_usage: false,
        };
        assert_eq!(
            String::from_utf8(with.to_json().unwrap()).unwrap(),
            r#"{"model":"m","x\"y":1,"a":3,"b":2}"#
        );
        // Past a few fields, repeats are found through a map, the same way.
        let many: String = (0..40).map(|i| format!(r#""k{}":{i},"#, i % 25)).collect();
        let body = raw(&format!("{{{}\"last\":true}}", many));
        let tree: Map<String, Value> = serde_json::from_str(&format!("{{{}\"last\":true}}", many)).unwrap();
        assert_eq!(body.fields().count(), tree.len());
        assert_eq!(body.get("k3"), Some("28"));
        assert_eq!(body.clone().into_tree().unwrap(), tree);
        let keys: Vec<_> = body.fields().map(|(key, _)| key.to_string()).collect();
        assert_eq!(keys[..3], ["k0", "k1", "k2"], "first places kept");
    }

    /// JSON-like text: valid objects, and the same with bytes cut, doubled or changed.
    fn objects() -> impl Strategy<Value = Vec<u8>> {
        let leaf = prop_oneof![
            Just("null".to_string()),
            Just("true".to_string()),
            "-?(0|[1-9][0-9]{0,3})(\\.[0-9]{1,3})?([eE][+-]?[0-9]{1,3})?",
            "\"([a-z é\\\\\"/]|\\\\[\"\\\\/bfnrtu]|\\\\u[0-9a-fA-F]{4}|\\\\ud[89ab][0-9a-f]{2}(\\\\ud[c-f][0-9a-f]{2})?){0,8}\"",
        ];
        let value = leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(|items| format!("[{}]", items.join(","))),
                prop::collection::vec(("(model|[a-z]{1,3})", inner), 0..4).prop_map(|fields| {
                    let fields: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\" : {v}")).collect();
                    format!("{{ {} }}", fields.join(","))
                }),
            ]
        });
        let key = "(model|messages|[a-z]{1,2}|m\\\\u006fdel|\\\\u00e9|é)";
        let object = prop::collection::vec((key, value), 0..6).prop_map(|fields| {
            let fields: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
            format!(" {{{}}}", fields.join(","))
        });
        (object, any::<u16>(), any::<u8>(), 0..4u8).prop_map(|(text, at, byte, how)| {
            let mut bytes = text.into_bytes();
            let at = usize::from(at) % (bytes.len() + 1);
            match how {
                0 => {}
                1 => bytes.truncate(at),
                2 => bytes.insert(at, byte),
                _ => {
                    if at < bytes.len() {
                        bytes[at] = byte;
                    }
                }
            }
            bytes
        })
    }

    proptest! {
        #![proptest_config(crate::fuzzing::config(2048))]

        /// The fields are serde_json's, value for value: what one accepts the
        /// other does, and the body written with `model` replaced reads back
        /// as serde_json's tree with `model` replaced.
        #[test]
        fn fields_match_serde_json(json in objects()) {
            let tree = serde_json::from_slice::<Map<String, Value>>(&json);
            let read = RawObject::read(Bytes::copy_from_slice(&json));
            prop_assert_eq!(read.is_ok(), tree.is_ok(), "{:?}", String::from_utf8_lossy(&json));
            if let (Ok(read), Ok(mut tree)) = (read, tree) {
                prop_assert_eq!(read.fields().count(), tree.len());
                prop_assert_eq!(&read.clone().into_tree().map_err(|e| TestCaseError::fail(e.to_string()))?, &tree);
                let written = WithModel { model: "m", body: BodyRef::Raw(&read), without: &[], stream_usage: false }
                    .to_json()
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                let written: Map<String, Value> = serde_json::from_slice(&written)
                    .map_err(|e| TestCaseError::fail(format!("wrote invalid JSON: {e}")))?;
                tree.insert("model".into(), Value::from("m"));
                prop_assert_eq!(written, tree);
            }
        }
    }
}
