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

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

use bytes::Bytes;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::{Error as _, Serialize, SerializeMap, Serializer};
use serde::{Deserialize, de::DeserializeOwned};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// A chat-completions body: as it came, or as a tree.
#[derive(Debug)]
pub enum ChatBody {
    Raw(RawObject),
    Tree(Map<String, Value>),
}

/// A JSON object as the client sent it, with its top-level fields found:
/// each value's place in the text, written out as it is.
#[derive(Debug, Clone)]
pub struct RawObject {
    json: Bytes,
    fields: Vec<Field>,
}

/// One top-level field: its key, and where its value's text is.
#[derive(Debug, Clone)]
struct Field {
    key: Key,
    value: Range<usize>,
}

/// A key as it is in the text (no escapes: written out as it is), or, when
/// it has escapes, unescaped (written out again by serde).
#[derive(Debug, Clone)]
enum Key {
    InText(Range<usize>),
    Unescaped(String),
}

/// Fields past this many are deduplicated through a map (a few are compared in turn).
const FEW_FIELDS: usize = 16;

impl RawObject {
    /// `json`'s top-level fields, if it is one JSON object (white space
    /// around it allowed). A key given twice keeps its first place and its
    /// last value, as a `serde_json` map does.
    pub fn read(json: Bytes) -> Result<Self, serde_json::Error> {
        let text =
            std::str::from_utf8(&json).map_err(|err| de::Error::custom(format!("invalid UTF-8: {err}")))?;
        let fields = read_fields(text)?;
        Ok(Self { json, fields })
    }

    /// The fields and the typed view `T` of the same text, read from it
    /// once checked to be UTF-8 (serde_json does not check each string again).
    pub fn parse<T: DeserializeOwned>(json: Bytes) -> Result<(Self, T), serde_json::Error> {
        Self::parse_with(json, |text| serde_json::from_str(text))
    }

    /// As [`parse`](Self::parse), the typed view read by `typed`.
    pub(super) fn parse_with<T>(
        json: Bytes,
        typed: impl FnOnce(&str) -> Result<T, serde_json::Error>,
    ) -> Result<(Self, T), serde_json::Error> {
        let text =
            std::str::from_utf8(&json).map_err(|err| de::Error::custom(format!("invalid UTF-8: {err}")))?;
        let fields = read_fields(text)?;
        let typed = typed(text)?;
        Ok((Self { json, fields }, typed))
    }

    fn text(&self, range: &Range<usize>) -> &str {
        // Checked to be UTF-8 when read, and ranges fall on token
        // boundaries; checked again only for the fields read as text.
        std::str::from_utf8(&self.json[range.clone()]).unwrap_or_default()
    }

    fn key<'a>(&'a self, field: &'a Field) -> &'a str {
        match &field.key {
            Key::InText(range) => self.text(range),
            Key::Unescaped(key) => key,
        }
    }

    /// Each field's key and value text, in order.
    pub fn fields(&self) -> impl Iterator<Item = (&str, &str)> {
        self.fields
            .iter()
            .map(|field| (self.key(field), self.text(&field.value)))
    }

    fn position(&self, key: &str) -> Option<usize> {
        self.fields.iter().position(|field| self.key(field) == key)
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

    /// Writes the field `field` as `"key":value`.
    fn write_field(&self, field: &Field, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
        match &field.key {
            Key::InText(range) => {
                out.push(b'"');
                out.extend_from_slice(&self.json[range.clone()]);
                out.push(b'"');
            }
            Key::Unescaped(key) => serde_json::to_writer(&mut *out, key)?,
        }
        out.push(b':');
        out.extend_from_slice(&self.json[field.value.clone()]);
        Ok(())
    }
}

/// The top-level fields of the object `text` is, found by serde_json (which
/// also words the error of anything else).
fn read_fields(text: &str) -> Result<Vec<Field>, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let fields = deserializer.deserialize_map(FieldsVisitor { text })?;
    deserializer.end()?;
    // A raw value's strings and numbers are checked for their syntax, not
    // decoded: a lone UTF-16 surrogate escape (`"\ud800"`) or a number out of
    // an f64's range (`1e400`) passes, where a `serde_json` tree refuses it.
    // Where the text may hold one, it is decoded once, so what is forwarded
    // as it came is what a tree would have accepted.
    if may_not_decode(text) {
        serde_json::from_str::<Decoded>(text)?;
    }
    Ok(fields)
}

/// Whether `text` may hold what only decoding refuses: a `\uD800`–`\uDFFF`
/// escape, an exponent, or a run of digits too long for an f64. (Text in a
/// string that looks so, such as `"h264e"`, only costs the decoding.)
fn may_not_decode(text: &str) -> bool {
    const LONGEST_NUMBER: usize = 300;
    let bytes = text.as_bytes();
    let mut digits = 0;
    for (at, &byte) in bytes.iter().enumerate() {
        match byte {
            b'0'..=b'9' => {
                digits += 1;
                if digits > LONGEST_NUMBER {
                    return true;
                }
                continue;
            }
            b'e' | b'E' if digits > 0 => return true,
            b'u' if at > 0 && bytes[at - 1] == b'\\' => {
                if matches!(
                    bytes.get(at + 1..at + 3),
                    Some([b'd' | b'D', b'8' | b'9' | b'a'..=b'f' | b'A'..=b'F'])
                ) {
                    return true;
                }
            }
            _ => {}
        }
        digits = 0;
    }
    false
}

/// Any JSON value, every string and number in it decoded (and nothing kept).
struct Decoded;

impl<'de> Deserialize<'de> for Decoded {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(Decoded)
    }
}

impl<'de> Visitor<'de> for Decoded {
    type Value = Decoded;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self, E> {
        Ok(self)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self, E> {
        Ok(self)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self, E> {
        Ok(self)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self, E> {
        Ok(self)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self, E> {
        Ok(self)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self, E> {
        Ok(self)
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self, A::Error> {
        while seq.next_element::<Decoded>()?.is_some() {}
        Ok(self)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self, A::Error> {
        while map.next_entry::<Decoded, Decoded>()?.is_some() {}
        Ok(self)
    }
}

struct FieldsVisitor<'a> {
    text: &'a str,
}

impl<'a> FieldsVisitor<'a> {
    /// Where `part` (a slice of the text) starts in the text.
    fn offset(&self, part: &str) -> usize {
        part.as_ptr() as usize - self.text.as_ptr() as usize
    }
}

impl<'de> Visitor<'de> for FieldsVisitor<'de> {
    type Value = Vec<Field>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<Field>, A::Error> {
        let mut fields: Vec<Field> = Vec::with_capacity(8);
        let mut seen: Option<std::collections::HashMap<Cow<'de, str>, usize>> = None;
        while let Some(KeyText(key)) = map.next_key::<KeyText<'de>>()? {
            let value: &'de RawValue = map.next_value()?;
            let start = self.offset(value.get());
            let value = start..start + value.get().len();
            let earlier = match &mut seen {
                Some(seen) => seen.get(&key).copied(),
                None => fields.iter().position(|field| match &field.key {
                    Key::InText(range) => &self.text[range.clone()] == key.as_ref(),
                    Key::Unescaped(known) => known == key.as_ref(),
                }),
            };
            if let Some(at) = earlier {
                fields[at].value = value;
                continue;
            }
            if let Some(seen) = &mut seen {
                seen.insert(key.clone(), fields.len());
            }
            fields.push(Field {
                key: match key {
                    Cow::Borrowed(key) => {
                        let start = self.offset(key);
                        Key::InText(start..start + key.len())
                    }
                    Cow::Owned(key) => Key::Unescaped(key),
                },
                value,
            });
            if seen.is_none() && fields.len() > FEW_FIELDS {
                seen = Some(
                    fields
                        .iter()
                        .enumerate()
                        .map(|(at, field)| {
                            let key = match &field.key {
                                Key::InText(range) => Cow::Borrowed(&self.text[range.clone()]),
                                Key::Unescaped(key) => Cow::Owned(key.clone()),
                            };
                            (key, at)
                        })
                        .collect(),
                );
            }
        }
        Ok(fields)
    }
}

/// A key borrowed from the text when it has no escapes.
struct KeyText<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for KeyText<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = KeyText<'de>;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }

            fn visit_borrowed_str<E: de::Error>(self, key: &'de str) -> Result<KeyText<'de>, E> {
                Ok(KeyText(Cow::Borrowed(key)))
            }

            fn visit_str<E: de::Error>(self, key: &str) -> Result<KeyText<'de>, E> {
                Ok(KeyText(Cow::Owned(key.to_owned())))
            }

            fn visit_string<E: de::Error>(self, key: String) -> Result<KeyText<'de>, E> {
                Ok(KeyText(Cow::Owned(key)))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
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
        for field in raw
            .fields
            .iter()
            .filter(|field| self.passes(raw.key(field).as_bytes()))
        {
            out.push(b',');
            raw.write_field(field, &mut out)?;
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
