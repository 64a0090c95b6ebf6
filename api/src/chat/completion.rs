//! `chat.completion`, typed and lossless: what translating providers build
//! and what an OpenAI-compatible upstream's answer reads as. Fields Onyx does
//! not model (`system_fingerprint`, `service_tier`, a message's `refusal`…)
//! are kept and written back as they came.

use std::fmt;

use serde::de::Deserializer;
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Content, Message, Usage, lenient};

/// A complete answer.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
pub struct Completion {
    #[serde(default, deserialize_with = "lenient::text")]
    pub id: String,
    #[serde(default = "completion_object", deserialize_with = "lenient::text")]
    pub object: String,
    #[serde(default, deserialize_with = "lenient::count")]
    pub created: u64,
    #[serde(default, deserialize_with = "lenient::text")]
    pub model: String,
    #[serde(default, deserialize_with = "lenient::null_as_default")]
    pub choices: Vec<Choice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn completion_object() -> String {
    "chat.completion".into()
}

/// One answer of a completion (most have one).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
pub struct Choice {
    #[serde(default, deserialize_with = "lenient::count_u32")]
    pub index: u32,
    /// Its `content` is written as `null` when there is none, as OpenAI does.
    #[serde(serialize_with = "with_content")]
    pub message: Message,
    /// Written as `null` when there is none.
    #[serde(default)]
    pub finish_reason: Option<FinishReason>,
    /// Passed on as it came; written as `null` when there is none.
    #[serde(default)]
    pub logprobs: Option<Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Completion {
    /// A completion as translating providers answer: a fresh `created`, usage always.
    pub fn new(id: String, model: String, choices: Vec<Choice>, usage: Usage) -> Self {
        Self {
            id,
            object: completion_object(),
            created: super::unix_now(),
            model,
            choices,
            usage: Some(usage),
            extra: Map::new(),
        }
    }

    /// A one-choice completion.
    pub fn single(id: String, model: String, message: Message, finish: FinishReason, usage: Usage) -> Self {
        Self::new(id, model, vec![Choice::new(0, message, finish)], usage)
    }

    /// The first choice's message, if there is a choice.
    pub fn message(&self) -> Option<&Message> {
        self.choices.first().map(|choice| &choice.message)
    }
}

impl Choice {
    pub fn new(index: u32, message: Message, finish: FinishReason) -> Self {
        Self {
            index,
            message,
            finish_reason: Some(finish),
            logprobs: None,
            extra: Map::new(),
        }
    }
}

/// The message with `content: null` written when it has none (a request's
/// message leaves it out; a completion's has it).
fn with_content<S: Serializer>(message: &Message, serializer: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct WithNullContent<'a> {
        content: Option<&'a Content>,
        #[serde(flatten)]
        message: &'a Message,
    }
    match message.content {
        Some(_) => message.serialize(serializer),
        None => WithNullContent {
            content: None,
            message,
        }
        .serialize(serializer),
    }
}

/// Why the model stopped. Lossless: a reason OpenAI does not define (an
/// upstream's own, such as `"error"` or `"eos"`) is kept as it came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishReason {
    Stop,
    Length,
    ToolCalls,
    ContentFilter,
    FunctionCall,
    Other(String),
}

impl FinishReason {
    pub fn as_str(&self) -> &str {
        match self {
            Self::Stop => "stop",
            Self::Length => "length",
            Self::ToolCalls => "tool_calls",
            Self::ContentFilter => "content_filter",
            Self::FunctionCall => "function_call",
            Self::Other(other) => other,
        }
    }

    pub fn parse(text: &str) -> Self {
        match text {
            "stop" => Self::Stop,
            "length" => Self::Length,
            "tool_calls" => Self::ToolCalls,
            "content_filter" => Self::ContentFilter,
            "function_call" => Self::FunctionCall,
            other => Self::Other(other.to_string()),
        }
    }
}

impl fmt::Display for FinishReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for FinishReason {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// A string: OpenAI's reasons, or an upstream's own kept as it came.
impl schemars::JsonSchema for FinishReason {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "FinishReason".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "examples": ["stop", "length", "tool_calls", "content_filter", "function_call"],
        })
    }
}

impl<'de> Deserialize<'de> for FinishReason {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        lenient::text(deserializer).map(|text| Self::parse(&text))
    }
}
