//! Lenient readers for answers from upstreams that bend OpenAI's shapes
//! (vLLM, llama.cpp, Ollama's `/v1`, OpenRouter): a `null` where a value is
//! expected reads as the default, and a count sent as a float or a string
//! still counts. A chunk is never refused over such a field.

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

/// A field where `null` means the same as absent: the type's default.
pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// A token count or index: a whole number, a float (truncated), a numeric
/// string or `null` (0). Negative or unreadable values count as 0.
pub(crate) fn count<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    deserializer.deserialize_any(CountVisitor)
}

/// [`count`] for 32-bit fields (indexes), saturating.
pub(crate) fn count_u32<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
    count(deserializer).map(|n| u32::try_from(n).unwrap_or(u32::MAX))
}

/// [`count_u32`] for a field that may be missing or `null` (then `None`).
pub(crate) fn maybe_count_u32<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u32>, D::Error> {
    Ok(maybe_count(deserializer)?.map(|n| u32::try_from(n).unwrap_or(u32::MAX)))
}

/// [`count`] for a field that may be missing or `null` (then `None`).
pub(crate) fn maybe_count<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    Ok(Option::<serde_json::Value>::deserialize(deserializer)?
        .filter(|value| !value.is_null())
        .map(|value| count(value).unwrap_or(0)))
}

/// An optional field whose `null` is kept apart from its absence (with
/// `default`, absent is `None` and `null` is `Some(None)`), so it is written
/// back as it came.
pub(crate) fn null_kept<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

struct CountVisitor;

impl<'de> Visitor<'de> for CountVisitor {
    type Value = u64;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a count")
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<u64, E> {
        Ok(n)
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<u64, E> {
        Ok(u64::try_from(n).unwrap_or(0))
    }

    fn visit_f64<E: de::Error>(self, n: f64) -> Result<u64, E> {
        // `as` saturates and maps NaN to 0.
        Ok(if n > 0.0 { n as u64 } else { 0 })
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<u64, E> {
        let text = text.trim();
        Ok(text
            .parse::<u64>()
            .ok()
            .or_else(|| {
                text.parse::<f64>()
                    .ok()
                    .map(|n| if n > 0.0 { n as u64 } else { 0 })
            })
            .unwrap_or(0))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<u64, E> {
        Ok(0)
    }

    fn visit_unit<E: de::Error>(self) -> Result<u64, E> {
        Ok(0)
    }

    fn visit_none<E: de::Error>(self) -> Result<u64, E> {
        Ok(0)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<u64, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<u64, A::Error> {
        while seq.next_element::<de::IgnoredAny>()?.is_some() {}
        Ok(0)
    }

    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<u64, A::Error> {
        while map.next_entry::<de::IgnoredAny, de::IgnoredAny>()?.is_some() {}
        Ok(0)
    }
}

/// A string field that may come as `null`, a number or a bool: read as its
/// text (`null` as empty), so an odd id or model name does not refuse the answer.
pub(crate) fn text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    Ok(match serde_json::Value::deserialize(deserializer)? {
        serde_json::Value::String(text) => text,
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Counted {
        #[serde(deserialize_with = "count")]
        n: u64,
    }

    #[test]
    fn counts_read_whatever_an_upstream_sends() {
        for (json, n) in [
            (r#"{"n": 7}"#, 7),
            (r#"{"n": 7.9}"#, 7),
            (r#"{"n": -3}"#, 0),
            (r#"{"n": "12"}"#, 12),
            (r#"{"n": "1e3"}"#, 1000),
            (r#"{"n": "lots"}"#, 0),
            (r#"{"n": null}"#, 0),
            (r#"{"n": [1]}"#, 0),
            (r#"{"n": {"a": 1}}"#, 0),
            (r#"{"n": true}"#, 0),
        ] {
            assert_eq!(serde_json::from_str::<Counted>(json).unwrap().n, n, "{json}");
        }
    }
}
