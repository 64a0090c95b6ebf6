//! A JSON object as the client sent it ([`RawObject`]): its top-level
//! fields found by serde (each value read as a borrowed [`RawValue`], each
//! key borrowed where it has no escapes), kept as places in the text and
//! written out byte for byte. Duplicate keys read as a `serde_json` map reads
//! them (first place, last value), and text only decoding would refuse (a lone
//! surrogate escape, a number past f64's range) is refused here too.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

use bytes::Bytes;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, de::DeserializeOwned};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

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

    /// Writes each field `keep` accepts as `,"key":value`, as it came.
    pub(super) fn write_fields(
        &self,
        out: &mut Vec<u8>,
        keep: impl Fn(&str) -> bool,
    ) -> Result<(), serde_json::Error> {
        for field in self.fields.iter().filter(|field| keep(self.key(field))) {
            out.push(b',');
            self.write_field(field, out)?;
        }
        Ok(())
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
