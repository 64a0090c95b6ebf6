//! Token counts as OpenAI reports them, lossless: the details Onyx reads
//! (cached, cache-written and reasoning tokens) are typed, anything else an
//! upstream reports (OpenRouter's `cost`, OpenAI's `audio_tokens`…) is kept
//! beside them and written back as it came. So are a `null` details object
//! (vLLM) and a reported zero of cache writes (OpenRouter): session logs
//! store usage as upstreams sent it, and read it back the same. Counts sent
//! as floats or strings are the one thing read leniently and written as
//! whole numbers.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::lenient;

/// Token counts as OpenAI reports them.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Usage {
    #[serde(default, deserialize_with = "lenient::count")]
    pub prompt_tokens: u64,
    #[serde(default, deserialize_with = "lenient::count")]
    pub completion_tokens: u64,
    #[serde(default, deserialize_with = "lenient::count")]
    pub total_tokens: u64,
    /// Present when the provider reported prompt caching; `null` when it
    /// sent `null` (`Some(None)`).
    #[serde(
        default,
        deserialize_with = "lenient::null_kept",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(test, ts(optional = nullable, as = "Option<PromptTokensDetails>"))]
    pub prompt_tokens_details: Option<Option<PromptTokensDetails>>,
    /// Present when the provider reported reasoning tokens; `null` when it
    /// sent `null` (`Some(None)`).
    #[serde(
        default,
        deserialize_with = "lenient::null_kept",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(test, ts(optional = nullable, as = "Option<CompletionTokensDetails>"))]
    pub completion_tokens_details: Option<Option<CompletionTokensDetails>>,
    /// What else the upstream reported (OpenRouter's `cost`…), passed on.
    #[serde(flatten)]
    #[cfg_attr(test, ts(skip))]
    pub extra: Map<String, Value>,
}

/// OpenAI's `usage.completion_tokens_details`: of the completion tokens (which
/// count them all), how many the model spent reasoning.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct CompletionTokensDetails {
    #[serde(default, deserialize_with = "lenient::count")]
    pub reasoning_tokens: u64,
    /// `audio_tokens`, `accepted_prediction_tokens`… passed on.
    #[serde(flatten)]
    #[cfg_attr(test, ts(skip))]
    pub extra: Map<String, Value>,
}

/// OpenAI's `usage.prompt_tokens_details`: of the prompt tokens (which count
/// them all), how many the provider read from its prompt cache, and, as
/// OpenRouter reports it, how many it wrote to the cache (Anthropic's
/// `cache_creation_input_tokens`; OpenAI caches without a write count).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct PromptTokensDetails {
    #[serde(default, deserialize_with = "lenient::count")]
    pub cached_tokens: u64,
    /// Present when reported (a reported 0 included); Onyx's own answers
    /// report it only when there were writes.
    #[serde(
        default,
        deserialize_with = "lenient::maybe_count",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(test, ts(type = "number | undefined"))]
    pub cache_write_tokens: Option<u64>,
    /// `audio_tokens`… passed on.
    #[serde(flatten)]
    #[cfg_attr(test, ts(skip))]
    pub extra: Map<String, Value>,
}

impl Usage {
    pub fn new(prompt_tokens: u64, completion_tokens: u64) -> Self {
        Self {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens + completion_tokens,
            ..Self::default()
        }
    }

    /// With cache reads and writes (both already counted in `prompt_tokens`).
    pub fn with_cache(mut self, read: u64, written: u64) -> Self {
        self.prompt_tokens_details = Some(Some(PromptTokensDetails {
            cached_tokens: read,
            cache_write_tokens: (written > 0).then_some(written),
            extra: Map::new(),
        }));
        self
    }

    /// With `reasoning` of the completion tokens spent reasoning.
    pub fn with_reasoning(mut self, reasoning: u64) -> Self {
        self.completion_tokens_details = Some(Some(CompletionTokensDetails {
            reasoning_tokens: reasoning,
            extra: Map::new(),
        }));
        self
    }

    /// Prompt tokens read from the provider's cache.
    pub fn cached_tokens(&self) -> u64 {
        self.prompt_details().map_or(0, |d| d.cached_tokens)
    }

    /// Prompt tokens written to the provider's cache.
    pub fn cache_write_tokens(&self) -> u64 {
        self.prompt_details()
            .and_then(|d| d.cache_write_tokens)
            .unwrap_or(0)
    }

    /// Completion tokens spent reasoning.
    pub fn reasoning_tokens(&self) -> u64 {
        self.completion_details().map_or(0, |d| d.reasoning_tokens)
    }

    /// `prompt_tokens_details`, when reported and not `null`.
    pub fn prompt_details(&self) -> Option<&PromptTokensDetails> {
        self.prompt_tokens_details.as_ref().and_then(Option::as_ref)
    }

    /// `completion_tokens_details`, when reported and not `null`.
    pub fn completion_details(&self) -> Option<&CompletionTokensDetails> {
        self.completion_tokens_details.as_ref().and_then(Option::as_ref)
    }

    /// The `usage` object of a completion or chunk, if it has one.
    pub fn from_response(value: &Value) -> Option<Self> {
        value
            .get("usage")
            .filter(|u| u.is_object())
            .and_then(|u| Usage::deserialize(u).ok())
    }

    /// The `usage` of a Responses API `response` object, in chat terms.
    pub fn from_responses_usage(response: &Value) -> Option<Self> {
        let usage = response.get("usage").filter(|u| u.is_object())?;
        let count = |v: &Value| v.as_u64().unwrap_or(0);
        let usage = Usage::new(count(&usage["input_tokens"]), count(&usage["output_tokens"]));
        let cached = count(&response["usage"]["input_tokens_details"]["cached_tokens"]);
        Some(if cached > 0 {
            usage.with_cache(cached, 0)
        } else {
            usage
        })
    }
}

/// Sums the calls of one run (the counts; what else they reported is not summed).
impl std::ops::AddAssign<&Usage> for Usage {
    fn add_assign(&mut self, other: &Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.total_tokens = self.prompt_tokens + self.completion_tokens;
        self.prompt_tokens_details = match (self.prompt_details(), other.prompt_details()) {
            (Some(a), Some(b)) => Some(Some(PromptTokensDetails {
                cached_tokens: a.cached_tokens + b.cached_tokens,
                cache_write_tokens: match (a.cache_write_tokens, b.cache_write_tokens) {
                    (None, None) => None,
                    (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
                },
                extra: Map::new(),
            })),
            (a, b) => a.or(b).cloned().map(Some),
        };
        self.completion_tokens_details = match (self.completion_details(), other.completion_details()) {
            (Some(a), Some(b)) => Some(Some(CompletionTokensDetails {
                reasoning_tokens: a.reasoning_tokens + b.reasoning_tokens,
                extra: Map::new(),
            })),
            (a, b) => a.or(b).cloned().map(Some),
        };
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        *self += &other;
    }
}
