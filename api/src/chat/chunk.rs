//! `chat.completion.chunk`, typed and lossless: what a streamed answer is
//! made of, whether an OpenAI-compatible upstream sent it or a translating
//! provider built it ([`ChunkFactory`]). Every field may be missing (odd
//! servers leave some out) and fields Onyx does not model (`refusal`,
//! `reasoning`, `system_fingerprint`, `obfuscation`…) are kept and written
//! back as they came.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{FinishReason, Role, ToolCall, Usage, lenient};

/// One streamed chunk.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[schemars(rename = "Chunk")]
#[cfg_attr(test, derive(ts_rs::TS), ts(rename = "Chunk"))]
pub struct ChatChunk {
    #[serde(default, deserialize_with = "lenient::text")]
    pub id: String,
    #[serde(default = "chunk_object", deserialize_with = "lenient::text")]
    pub object: String,
    #[serde(default, deserialize_with = "lenient::count")]
    pub created: u64,
    #[serde(default, deserialize_with = "lenient::text")]
    pub model: String,
    #[serde(default, deserialize_with = "lenient::null_as_default")]
    pub choices: Vec<ChunkChoice>,
    /// On the usage-only chunk at the end (`stream_options.include_usage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub usage: Option<Usage>,
    #[serde(flatten)]
    #[cfg_attr(test, ts(skip))]
    pub extra: Map<String, Value>,
}

fn chunk_object() -> String {
    "chat.completion.chunk".into()
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ChunkChoice {
    #[serde(default, deserialize_with = "lenient::count_u32")]
    pub index: u32,
    #[serde(default, deserialize_with = "lenient::null_as_default")]
    pub delta: Delta,
    /// Written as `null` when there is none.
    #[serde(default)]
    #[cfg_attr(test, ts(type = "string | null"))]
    pub finish_reason: Option<FinishReason>,
    /// Passed on as it came; written as `null` when there is none.
    #[serde(default)]
    pub logprobs: Option<Value>,
    #[serde(flatten)]
    #[cfg_attr(test, ts(skip))]
    pub extra: Map<String, Value>,
}

/// What one chunk adds to the answer.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Delta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional, type = "string"))]
    pub role: Option<Role>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub content: Option<String>,
    /// The model's reasoning, as DeepSeek, vLLM and others stream it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub reasoning_content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub tool_calls: Option<Vec<ToolCallDelta>>,
    #[serde(flatten)]
    #[cfg_attr(test, ts(skip))]
    pub extra: Map<String, Value>,
}

/// A piece of a tool call: the first of a call has its id and name, the
/// rest add to its arguments; `index` says which call.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ToolCallDelta {
    /// Which call; some servers (Ollama's `/v1`) leave it out and send each
    /// call whole.
    #[serde(
        default,
        deserialize_with = "lenient::maybe_count_u32",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(test, ts(optional))]
    pub index: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub id: Option<String>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub kind: Option<String>,
    /// Written even when empty (`{}`).
    #[serde(default, deserialize_with = "lenient::null_as_default")]
    pub function: FunctionDelta,
    #[serde(flatten)]
    #[cfg_attr(test, ts(skip))]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct FunctionDelta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub arguments: Option<String>,
    #[serde(flatten)]
    #[cfg_attr(test, ts(skip))]
    pub extra: Map<String, Value>,
}

impl ChatChunk {
    /// The trailing chunk of `include_usage`: usage and no choices.
    pub fn is_usage_only(&self) -> bool {
        self.choices.is_empty() && self.usage.is_some()
    }

    /// The first choice's delta, if the chunk has a choice.
    pub fn delta(&self) -> Option<&Delta> {
        self.choices.first().map(|choice| &choice.delta)
    }

    /// An error an upstream sent inside its stream (`{"error": {...}}`, as
    /// OpenRouter and vLLM do), if this chunk is one.
    pub fn error(&self) -> Option<&Map<String, Value>> {
        self.extra.get("error").and_then(Value::as_object)
    }
}

impl Delta {
    /// A delta with text.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            content: Some(text.into()),
            ..Self::default()
        }
    }

    /// The first delta of an answer: the role, and empty content.
    pub fn start() -> Self {
        Self {
            role: Some(Role::Assistant),
            content: Some(String::new()),
            ..Self::default()
        }
    }

    /// A delta with one piece of a tool call.
    pub fn tool_call(call: ToolCallDelta) -> Self {
        Self {
            tool_calls: Some(vec![call]),
            ..Self::default()
        }
    }
}

impl ToolCallDelta {
    /// The first piece of a function call: its id and name, and `arguments`.
    pub fn start(index: u32, id: String, name: String, arguments: String) -> Self {
        Self {
            index: Some(index),
            id: Some(id),
            kind: Some("function".into()),
            function: FunctionDelta {
                name: Some(name),
                arguments: Some(arguments),
                extra: Map::new(),
            },
            extra: Map::new(),
        }
    }

    /// A whole call as one piece (the `index`th of its answer).
    pub fn whole(index: u32, call: &ToolCall) -> Self {
        Self {
            index: Some(index),
            id: Some(call.id.clone()),
            kind: Some(call.kind.clone()),
            function: FunctionDelta {
                name: Some(call.function.name.clone()),
                arguments: Some(call.function.arguments.clone()),
                extra: call.function.extra.clone(),
            },
            extra: call.extra.clone(),
        }
    }

    /// A later piece: more of the call's arguments.
    pub fn arguments(index: u32, arguments: String) -> Self {
        Self {
            index: Some(index),
            function: FunctionDelta {
                arguments: Some(arguments),
                ..FunctionDelta::default()
            },
            ..Self::default()
        }
    }
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
            created: super::unix_now(),
        }
    }

    /// A chunk of one choice with `delta`, and its finish reason if it is the last.
    pub fn delta(&self, delta: Delta, finish_reason: Option<FinishReason>) -> ChatChunk {
        self.chunk(
            vec![ChunkChoice {
                index: 0,
                delta,
                finish_reason,
                logprobs: None,
                extra: Map::new(),
            }],
            None,
        )
    }

    /// The trailing usage-only chunk of `stream_options.include_usage`.
    pub fn usage(&self, usage: Usage) -> ChatChunk {
        self.chunk(Vec::new(), Some(usage))
    }

    /// A chunk without choices, for fields a gateway adds beside the answer
    /// (set in its `extra`).
    pub fn bare(&self) -> ChatChunk {
        self.chunk(Vec::new(), None)
    }

    fn chunk(&self, choices: Vec<ChunkChoice>, usage: Option<Usage>) -> ChatChunk {
        ChatChunk {
            id: self.id.clone(),
            object: chunk_object(),
            created: self.created,
            model: self.model.clone(),
            choices,
            usage,
            extra: Map::new(),
        }
    }
}
