//! A request body on its way to an upstream, and [`WithModel`], which writes
//! it out with `model` replaced.
//!
//! A plain chat call is forwarded as the client sent it: its top-level
//! fields are found once ([`RawObject`]) and written out byte for byte, never
//! built into a `serde_json` tree and written again (a tree costs an
//! allocation per key and string, a hash per key, and a free of each). A body
//! something rewrote (a session's history put in, a translation from another
//! protocol, an agent's call) is a tree.

use bytes::Bytes;
use serde::ser::{Error as _, Serialize, SerializeMap, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::json_scan::{self, Field};

/// A chat-completions body: as it came, or as a tree.
#[derive(Debug)]
pub enum ChatBody {
    Raw(RawObject),
    Tree(Map<String, Value>),
}

/// A JSON object as the client sent it, with its top-level fields found.
/// Its text is UTF-8 and every key plain ASCII (no escapes), so both are
/// written out as they are.
#[derive(Debug, Clone)]
pub struct RawObject {
    json: Bytes,
    fields: Vec<Field>,
}

impl RawObject {
    /// `json`'s fields, if it is plainly one JSON object (see `json_scan`);
    /// `None` leaves it to serde_json.
    pub fn scan(json: Bytes) -> Option<Self> {
        Self::scan_with(json, |_| Some(())).map(|(raw, ())| raw)
    }

    /// As [`scan`](Self::scan), also handing the text (checked to be UTF-8
    /// once, for both) to `read`, whose `None` is a `None` too.
    pub fn scan_with<T>(json: Bytes, read: impl FnOnce(&str) -> Option<T>) -> Option<(Self, T)> {
        let text = std::str::from_utf8(&json).ok()?;
        let fields = json_scan::object_fields(text)?;
        let read = read(text)?;
        Some((Self { json, fields }, read))
    }

    fn text(&self, range: &std::ops::Range<usize>) -> &str {
        // Checked to be UTF-8 by `object_fields`, and ranges fall on token
        // boundaries; checked again only for the fields read as text.
        std::str::from_utf8(&self.json[range.clone()]).unwrap_or_default()
    }

    /// Each field's key and value as bytes, in order (keys are plain ASCII).
    fn raw_fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.fields
            .iter()
            .map(|field| (&self.json[field.key.clone()], &self.json[field.value.clone()]))
    }

    /// Each field's key and value text, in order.
    pub fn fields(&self) -> impl Iterator<Item = (&str, &str)> {
        self.fields
            .iter()
            .map(|field| (self.text(&field.key), self.text(&field.value)))
    }

    fn position(&self, key: &str) -> Option<usize> {
        self.fields
            .iter()
            .position(|field| &self.json[field.key.clone()] == key.as_bytes())
    }

    /// The value text of the field `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.position(key).map(|at| self.text(&self.fields[at].value))
    }

    /// Leaves the field `key` out from now on; its value text, if it was there.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        let field = self.fields.remove(self.position(key)?);
        Some(self.text(&field.value).to_owned())
    }

    /// The object as a tree (fields removed stay out).
    pub fn into_tree(self) -> Result<Map<String, Value>, serde_json::Error> {
        self.fields()
            .map(|(key, value)| Ok((key.to_owned(), serde_json::from_str(value)?)))
            .collect()
    }

    /// The length of its JSON text.
    pub fn json_len(&self) -> usize {
        self.json.len()
    }
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
        for (key, value) in raw.raw_fields().filter(|(key, _)| self.passes(key)) {
            out.extend_from_slice(b",\"");
            out.extend_from_slice(key);
            out.extend_from_slice(b"\":");
            out.extend_from_slice(value);
        }
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
    use serde_json::json;

    fn tree(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    fn raw(text: &str) -> RawObject {
        RawObject::scan(Bytes::copy_from_slice(text.as_bytes())).expect("a plain object")
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
        for unplain in [r#"{"a\u0062":1}"#, r#"{"a":1,"a":2}"#, "[1]", r#"{"a":1"#] {
            assert!(
                RawObject::scan(Bytes::from_static(unplain.as_bytes())).is_none(),
                "{unplain}"
            );
        }
    }
}
