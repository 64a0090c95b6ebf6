//! The chat vocabulary, OpenAI-shaped and typed: messages and tools
//! (`message`), requests (`request`), complete answers (`completion`),
//! streamed chunks (`chunk`), token counts (`usage`) and the one merger of
//! streamed deltas (`assemble`). Providers answer in these types, the agent
//! loop and the translators of other protocols read them, and sessions store
//! the same `Message`.
//!
//! Lossless: every struct keeps the fields Onyx does not model in an `extra`
//! map and writes them back as they came, so an answer passes through Onyx
//! without losing what an upstream added (OpenRouter's `cost`, a tool call's
//! `extra_content`, `system_fingerprint`…). Reading is lenient where servers
//! differ (missing fields, `null`s, counts as floats or strings); `null` and
//! absent read the same for optional fields. A leaf: imports nothing from the crate.

mod assemble;
mod chunk;
mod completion;
mod lenient;
mod message;
mod request;
mod usage;

pub use assemble::{Assembled, Assembler};
pub use chunk::{ChatChunk, ChunkChoice, ChunkFactory, Delta, FunctionDelta, ToolCallDelta};
pub use completion::{Choice, Completion, FinishReason};
pub use message::{
    Content, ContentPart, FunctionCall, FunctionDef, ImageUrl, Message, Role, ToolCall, ToolDef,
};
pub use request::{
    ChatRequest, EmbeddingInput, EmbeddingsRequest, JsonSchemaFormat, NamedFunction, ResponseFormat, Stop,
    StreamOptions, ToolChoice,
};
pub use usage::{CompletionTokensDetails, PromptTokensDetails, Usage};

/// Seconds since the Unix epoch (a completion's `created`).
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
