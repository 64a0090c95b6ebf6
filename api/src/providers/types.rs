//! OpenAI chat-completions wire types: a typed view of incoming requests (for
//! validation and for translating to other protocols) and the response and
//! chunk shapes that translating providers produce.
//!
//! The request view never drops anything: the raw JSON object travels beside it
//! and is what OpenAI-compatible upstreams receive, so fields Onyx does not model
//! pass through untouched.

mod message;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use message::{
    Content, ContentPart, FunctionCall, FunctionDef, ImageUrl, Message, Role, ToolCall, ToolDef,
};

/// A chat request: the body (source of truth), its validated typed view,
/// and who it is made for (for usage records, budgets and limits).
#[derive(Debug)]
pub struct ChatCall {
    pub body: super::ChatBody,
    pub request: ChatRequest,
    pub who: super::meter::Attribution,
}

#[derive(Debug, Deserialize)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<Message>,
    #[serde(default)]
    pub stream: bool,
    pub stream_options: Option<StreamOptions>,
    pub tools: Option<Vec<ToolDef>>,
    pub tool_choice: Option<ToolChoice>,
    pub parallel_tool_calls: Option<bool>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub max_tokens: Option<u32>,
    pub max_completion_tokens: Option<u32>,
    pub stop: Option<Stop>,
    pub n: Option<u32>,
    pub seed: Option<i64>,
    pub response_format: Option<ResponseFormat>,
    pub logprobs: Option<bool>,
    pub top_logprobs: Option<u32>,
    pub presence_penalty: Option<f64>,
    pub frequency_penalty: Option<f64>,
    pub user: Option<String>,
    /// OpenAI's prompt-cache routing key; for Anthropic models it asks for
    /// `cache_control` breakpoints.
    pub prompt_cache_key: Option<String>,
}

impl ChatRequest {
    pub fn include_usage(&self) -> bool {
        self.stream_options
            .as_ref()
            .and_then(|o| o.include_usage)
            .unwrap_or(false)
    }

    pub fn max_output_tokens(&self) -> Option<u32> {
        self.max_completion_tokens.or(self.max_tokens)
    }

    pub fn stop_sequences(&self) -> Vec<String> {
        match &self.stop {
            None => Vec::new(),
            Some(Stop::One(s)) => vec![s.clone()],
            Some(Stop::Many(v)) => v.clone(),
        }
    }
}

#[derive(Debug, Deserialize)]
pub struct StreamOptions {
    pub include_usage: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum ToolChoice {
    /// `"none"`, `"auto"` or `"required"`.
    Mode(String),
    Named {
        function: NamedFunction,
    },
}

#[derive(Debug, Deserialize)]
pub struct NamedFunction {
    pub name: String,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Stop {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Deserialize)]
pub struct ResponseFormat {
    #[serde(rename = "type")]
    pub kind: String,
    pub json_schema: Option<JsonSchemaFormat>,
}

#[derive(Debug, Deserialize)]
pub struct JsonSchemaFormat {
    pub name: Option<String>,
    pub schema: Option<Value>,
}

/// Token counts as OpenAI reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Usage {
    #[serde(default)]
    pub prompt_tokens: u64,
    #[serde(default)]
    pub completion_tokens: u64,
    #[serde(default)]
    pub total_tokens: u64,
    /// Present when the provider reported prompt caching.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub prompt_tokens_details: Option<PromptTokensDetails>,
    /// Present when the provider reported reasoning tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub completion_tokens_details: Option<CompletionTokensDetails>,
}

/// OpenAI's `usage.completion_tokens_details`: of the completion tokens (which
/// count them all), how many the model spent reasoning.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct CompletionTokensDetails {
    #[serde(default)]
    pub reasoning_tokens: u64,
}

/// OpenAI's `usage.prompt_tokens_details`: of the prompt tokens (which count
/// them all), how many the provider read from its prompt cache, and, as
/// OpenRouter reports it, how many it wrote to the cache (Anthropic's
/// `cache_creation_input_tokens`; OpenAI caches without a write count).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct PromptTokensDetails {
    #[serde(default)]
    pub cached_tokens: u64,
    /// 0 is left out of the JSON.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[cfg_attr(test, ts(type = "number | undefined"))]
    pub cache_write_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    pub fn new(prompt_tokens: u64, completion_tokens: u64) -> Self {
        Self {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens + completion_tokens,
            prompt_tokens_details: None,
            completion_tokens_details: None,
        }
    }

    /// With cache reads and writes (both already counted in `prompt_tokens`).
    pub fn with_cache(mut self, read: u64, written: u64) -> Self {
        self.prompt_tokens_details = Some(PromptTokensDetails {
            cached_tokens: read,
            cache_write_tokens: written,
        });
        self
    }

    /// Prompt tokens read from the provider's cache.
    pub fn cached_tokens(&self) -> u64 {
        self.prompt_tokens_details.map_or(0, |d| d.cached_tokens)
    }

    /// Prompt tokens written to the provider's cache.
    pub fn cache_write_tokens(&self) -> u64 {
        self.prompt_tokens_details.map_or(0, |d| d.cache_write_tokens)
    }

    /// Completion tokens spent reasoning.
    pub fn reasoning_tokens(&self) -> u64 {
        self.completion_tokens_details.map_or(0, |d| d.reasoning_tokens)
    }

    /// The `usage` object of a completion or chunk, if it has one.
    pub fn from_response(value: &Value) -> Option<Self> {
        value
            .get("usage")
            .filter(|u| u.is_object())
            .and_then(|u| Usage::deserialize(u).ok())
    }
}

impl Usage {
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

/// Sums the calls of one run.
impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Self) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.total_tokens = self.prompt_tokens + self.completion_tokens;
        self.prompt_tokens_details = match (self.prompt_tokens_details, other.prompt_tokens_details) {
            (Some(a), Some(b)) => Some(PromptTokensDetails {
                cached_tokens: a.cached_tokens + b.cached_tokens,
                cache_write_tokens: a.cache_write_tokens + b.cache_write_tokens,
            }),
            (a, b) => a.or(b),
        };
        self.completion_tokens_details =
            match (self.completion_tokens_details, other.completion_tokens_details) {
                (Some(a), Some(b)) => Some(CompletionTokensDetails {
                    reasoning_tokens: a.reasoning_tokens + b.reasoning_tokens,
                }),
                (a, b) => a.or(b),
            };
    }
}

/// `chat.completion`, as translating providers build it.
#[derive(Debug, Serialize)]
pub struct Completion {
    pub id: String,
    pub object: &'static str,
    pub created: u64,
    pub model: String,
    pub choices: Vec<Choice>,
    pub usage: Usage,
}

#[derive(Debug, Serialize)]
pub struct Choice {
    pub index: u32,
    pub message: AssistantMessage,
    pub finish_reason: &'static str,
    pub logprobs: Option<Value>,
}

#[derive(Debug, Serialize)]
pub struct AssistantMessage {
    pub role: &'static str,
    pub content: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    pub refusal: Option<String>,
}

/// `chat.completion.chunk`, as translating providers build it.
#[derive(Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Chunk {
    pub id: String,
    pub object: &'static str,
    pub created: u64,
    pub model: String,
    pub choices: Vec<ChunkChoice>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub usage: Option<Usage>,
}

#[derive(Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ChunkChoice {
    pub index: u32,
    pub delta: Delta,
    pub finish_reason: Option<&'static str>,
    pub logprobs: Option<Value>,
}

#[derive(Debug, Default, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Delta {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub content: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ToolCallDelta {
    pub index: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub id: Option<String>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub kind: Option<&'static str>,
    pub function: FunctionDelta,
}

#[derive(Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct FunctionDelta {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub arguments: Option<String>,
}

/// Builds the chunks of one streamed completion with a shared id, model and time.
#[derive(Debug, Clone)]
pub struct ChunkFactory {
    pub id: String,
    pub model: String,
    pub created: u64,
}

impl ChunkFactory {
    pub fn new(id: String, model: String) -> Self {
        Self {
            id,
            model,
            created: unix_now(),
        }
    }

    pub fn delta(&self, delta: Delta, finish_reason: Option<&'static str>) -> Value {
        self.to_value(
            vec![ChunkChoice {
                index: 0,
                delta,
                finish_reason,
                logprobs: None,
            }],
            None,
        )
    }

    /// The trailing usage-only chunk of `stream_options.include_usage`.
    pub fn usage(&self, usage: Usage) -> Value {
        self.to_value(Vec::new(), Some(usage))
    }

    /// After a translated stream's last event: its usage chunk, or the error
    /// of a stream cut off before its finish (`marker` names what was missing).
    pub fn ending(
        &self,
        provider: &str,
        finished: bool,
        usage: Option<Usage>,
        marker: &str,
    ) -> Result<Vec<Value>, super::ProviderError> {
        if !finished {
            return Err(super::ProviderError::Connect {
                provider: provider.to_string(),
                detail: format!("the stream ended before {marker}"),
            });
        }
        Ok(usage.map(|u| self.usage(u)).into_iter().collect())
    }

    fn to_value(&self, choices: Vec<ChunkChoice>, usage: Option<Usage>) -> Value {
        let chunk = Chunk {
            id: self.id.clone(),
            object: "chat.completion.chunk",
            created: self.created,
            model: self.model.clone(),
            choices,
            usage,
        };
        serde_json::to_value(chunk).unwrap_or(Value::Null)
    }
}

pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Embeddings request as OpenAI defines it.
#[derive(Debug)]
pub struct EmbeddingsCall {
    pub body: Map<String, Value>,
    pub request: EmbeddingsRequest,
}

#[derive(Debug, Deserialize)]
pub struct EmbeddingsRequest {
    pub model: String,
    pub input: EmbeddingInput,
    pub encoding_format: Option<String>,
    pub dimensions: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum EmbeddingInput {
    One(String),
    Many(Vec<String>),
    Tokens(Vec<u32>),
    TokenBatches(Vec<Vec<u32>>),
}

/// Adds a turn of `role`, merged into the last one when that has the same
/// role (upstreams that want strictly alternating roles).
pub fn push_turn<R: PartialEq, B>(turns: &mut Vec<(R, Vec<B>)>, role: R, blocks: Vec<B>) {
    match turns.last_mut() {
        Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
        _ => turns.push((role, blocks)),
    }
}
