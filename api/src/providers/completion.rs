//! A `chat.completion` on its way back to the client: parsed, or, from an
//! upstream that speaks chat completions, the upstream's own bytes passed on
//! unchanged. Forwarding the bytes spares parsing the answer into a tree and
//! writing it out again; only its `usage` is read, for metering.

use bytes::Bytes;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::{ProviderError, Usage};

pub enum Completion {
    Parsed(Value),
    /// A JSON object, checked, with the usage it reports.
    Forwarded {
        json: Bytes,
        usage: Option<Usage>,
    },
}

/// The one field read from a forwarded answer; the rest is checked for
/// syntax but not built.
#[derive(Deserialize)]
struct UsageField<'a> {
    #[serde(borrow, default)]
    usage: Option<&'a RawValue>,
}

impl Completion {
    /// The upstream's answer, passed on if it is a JSON object.
    pub fn forwarded(provider: &str, json: Bytes) -> Result<Self, ProviderError> {
        if json.trim_ascii_start().first() != Some(&b'{') {
            return Err(ProviderError::bad_response(
                provider,
                "the answer is not a JSON object",
            ));
        }
        let usage = match super::json_scan::object_usage(&json) {
            Some(usage) => usage.and_then(|range| serde_json::from_slice::<Usage>(&json[range]).ok()),
            // Not plainly valid: serde_json decides, and names what is wrong.
            None => {
                let field: UsageField = serde_json::from_slice(&json)
                    .map_err(|err| ProviderError::bad_response(provider, err))?;
                field
                    .usage
                    .and_then(|raw| serde_json::from_str::<Usage>(raw.get()).ok())
            }
        };
        Ok(Self::Forwarded { json, usage })
    }

    pub fn usage(&self) -> Option<Usage> {
        match self {
            Self::Parsed(value) => Usage::from_response(value),
            Self::Forwarded { usage, .. } => *usage,
        }
    }

    /// The completion as a JSON tree, for callers that read or translate it.
    pub fn into_value(self) -> Value {
        match self {
            Self::Parsed(value) => value,
            // Checked when it arrived (`forwarded`), so it parses.
            Self::Forwarded { json, .. } => serde_json::from_slice(&json).unwrap_or(Value::Null),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forwarded_answer_keeps_its_bytes_and_reads_its_usage() {
        let json = Bytes::from_static(
            br#"{"id":"c1","object":"chat.completion","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}"#,
        );
        let completion = Completion::forwarded("p", json.clone()).unwrap();
        assert_eq!(completion.usage().map(|u| u.total_tokens), Some(7));
        let Completion::Forwarded { json: kept, .. } = &completion else {
            panic!("expected the bytes forwarded")
        };
        assert_eq!(kept, &json);
        assert_eq!(completion.into_value()["id"], "c1");
    }

    #[test]
    fn a_forwarded_answer_must_be_a_json_object() {
        for bad in [&b"[1,2]"[..], b"not json", b"{\"usage\":", b"", b"{} trailing"] {
            assert!(
                matches!(
                    Completion::forwarded("p", Bytes::copy_from_slice(bad)),
                    Err(ProviderError::BadResponse { .. })
                ),
                "{:?} was accepted",
                String::from_utf8_lossy(bad)
            );
        }
        let odd_usage = Completion::forwarded("p", Bytes::from_static(br#"{"usage":"n/a"}"#)).unwrap();
        assert_eq!(odd_usage.usage(), None);
        let null_usage = Completion::forwarded("p", Bytes::from_static(br#" {"usage":null}"#)).unwrap();
        assert_eq!(null_usage.usage(), None);
    }
}
