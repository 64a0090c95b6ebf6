//! A chat-completions request, typed: the view of what a client sent that
//! Onyx validates and translates to other protocols, and what the agent loop
//! builds. It never stands in for the client's body on the way to an
//! OpenAI-compatible upstream: the body travels beside it (`providers::ChatBody`),
//! so fields Onyx does not model pass through untouched.

use serde::Deserialize;
use serde_json::Value;

use super::{Message, ToolDef};

/// The typed view of a chat-completions request body.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
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

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct StreamOptions {
    pub include_usage: Option<bool>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum ToolChoice {
    /// `"none"`, `"auto"` or `"required"`.
    Mode(String),
    Named {
        function: NamedFunction,
    },
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct NamedFunction {
    pub name: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum Stop {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ResponseFormat {
    #[serde(rename = "type")]
    pub kind: String,
    pub json_schema: Option<JsonSchemaFormat>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct JsonSchemaFormat {
    pub name: Option<String>,
    pub schema: Option<Value>,
}

/// An embeddings request as OpenAI defines it.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct EmbeddingsRequest {
    pub model: String,
    pub input: EmbeddingInput,
    pub encoding_format: Option<String>,
    pub dimensions: Option<u32>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum EmbeddingInput {
    One(String),
    Many(Vec<String>),
    Tokens(Vec<u32>),
    TokenBatches(Vec<Vec<u32>>),
}
