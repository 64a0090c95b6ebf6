//! A provider's complete answer: typed ([`Completion`], from a translating
//! provider), or from an upstream that speaks chat completions its own bytes,
//! passed on unchanged. Forwarding the bytes spares parsing the answer into
//! types and writing it out again; only its `usage` is read (borrowed, with
//! serde), for metering, and the rest is checked to be JSON.

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::ProviderError;
use crate::chat::{Completion, Usage};

#[derive(Debug)]
pub enum CompletionReply {
    Typed(Completion),
    /// A JSON object, checked, with the usage it reports.
    Verbatim {
        bytes: Bytes,
        usage: Option<Usage>,
        /// Who sent it, to name in the error if it must be read and is not a completion.
        provider: String,
    },
}

/// The one field read from a forwarded answer; the rest is checked for
/// syntax but not built.
#[derive(Deserialize)]
struct UsageField<'a> {
    #[serde(borrow, default)]
    usage: Option<&'a RawValue>,
}

impl CompletionReply {
    /// The upstream's answer, passed on if it is a JSON object.
    pub fn verbatim(provider: &str, bytes: Bytes) -> Result<Self, ProviderError> {
        if bytes.trim_ascii_start().first() != Some(&b'{') {
            return Err(ProviderError::bad_response(
                provider,
                "the answer is not a JSON object",
            ));
        }
        let field: UsageField =
            serde_json::from_slice(&bytes).map_err(|err| ProviderError::bad_response(provider, err))?;
        // A usage Onyx cannot read (`"usage": "n/a"`) meters as none; the answer still goes.
        let usage = field
            .usage
            .and_then(|raw| serde_json::from_str::<Usage>(raw.get()).ok());
        Ok(Self::Verbatim {
            bytes,
            usage,
            provider: provider.to_string(),
        })
    }

    pub fn usage(&self) -> Option<&Usage> {
        match self {
            Self::Typed(completion) => completion.usage.as_ref(),
            Self::Verbatim { usage, .. } => usage.as_ref(),
        }
    }

    /// The answer typed (a verbatim one is parsed now: one that is not a
    /// `chat.completion` is the upstream's bad answer).
    pub fn into_completion(self) -> Result<Completion, ProviderError> {
        match self {
            Self::Typed(completion) => Ok(completion),
            Self::Verbatim { bytes, provider, .. } => serde_json::from_slice(&bytes).map_err(|err| {
                ProviderError::bad_response(&provider, format!("the answer is not a chat completion: {err}"))
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verbatim_answer_keeps_its_bytes_and_reads_its_usage() {
        let json = Bytes::from_static(
            br#"{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop","logprobs":null}],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7,"cost":0.5}}"#,
        );
        let reply = CompletionReply::verbatim("p", json.clone()).unwrap();
        assert_eq!(reply.usage().map(|u| u.total_tokens), Some(7));
        assert_eq!(
            reply.usage().map(|u| u.extra["cost"].clone()),
            Some(serde_json::json!(0.5))
        );
        let CompletionReply::Verbatim { bytes, .. } = &reply else {
            panic!("expected the bytes kept")
        };
        assert_eq!(bytes, &json);
        let completion = reply.into_completion().unwrap();
        assert_eq!(
            (
                completion.id.as_str(),
                completion.message().map(|m| m.text_content())
            ),
            ("c1", Some("hi".into()))
        );
    }

    #[test]
    fn a_verbatim_answer_must_be_a_json_object() {
        for bad in [
            &b"[1,2]"[..],
            b"not json",
            b"{\"usage\":",
            b"",
            b"{} trailing",
            b"{\"a\":1,}",
        ] {
            assert!(
                matches!(
                    CompletionReply::verbatim("p", Bytes::copy_from_slice(bad)),
                    Err(ProviderError::BadResponse { .. })
                ),
                "{:?} was accepted",
                String::from_utf8_lossy(bad)
            );
        }
        let not_a_completion = CompletionReply::verbatim("p", Bytes::from_static(br#"{"choices":"none"}"#));
        assert!(matches!(
            not_a_completion.unwrap().into_completion(),
            Err(ProviderError::BadResponse { provider, .. }) if provider == "p"
        ));
        let odd_usage = CompletionReply::verbatim("p", Bytes::from_static(br#"{"usage":"n/a"}"#)).unwrap();
        assert_eq!(odd_usage.usage(), None);
        let null_usage = CompletionReply::verbatim("p", Bytes::from_static(br#" {"usage":null}"#)).unwrap();
        assert_eq!(null_usage.usage(), None);
    }
}
