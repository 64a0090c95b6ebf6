//! What fits in a model's context window: the window of each model (config
//! first, then a shipped table of known models, then the provider's setting,
//! then a safe default) and how many tokens a request takes, counted with a
//! real BPE tokenizer (OpenAI's o200k_base; for other families a close
//! estimate, far better than characters / 4).

use tiktoken_rs::o200k_base_singleton;

use crate::config::ContextWindows;
use crate::model_ref::ModelRef;
use crate::providers::types::{Message, ToolDef};

/// For a model nobody describes: small enough for most local models' real window.
pub const DEFAULT_WINDOW: u32 = 32_768;

/// Known models by name prefix (the longest matching prefix wins).
const KNOWN: &[(&str, u32)] = &[
    ("gpt-4.1", 1_047_576),
    ("gpt-5", 400_000),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-4", 8_192),
    ("gpt-3.5-turbo", 16_385),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4", 200_000),
    ("claude", 200_000),
    ("gemini", 1_048_576),
    ("llama3.1", 131_072),
    ("llama3.2", 131_072),
    ("llama3.3", 131_072),
    ("llama3", 8_192),
    ("qwen2.5", 32_768),
    ("qwen3", 40_960),
    ("mistral", 32_768),
    ("gemma", 8_192),
    ("deepseek", 128_000),
];

/// Tokens every message costs beyond its text (role and separators).
const PER_MESSAGE: usize = 4;

/// The context window of `model` (`provider/model`, or an alias's first target).
pub fn window(model: &str, config: &ContextWindows) -> u32 {
    if let Some(tokens) = config.models.get(model) {
        return *tokens;
    }
    let reference = ModelRef::parse(model).ok();
    let name = reference.as_ref().map_or(model, |r| r.model.as_str());
    if let Some(tokens) = config.models.get(name) {
        return *tokens;
    }
    let known = KNOWN
        .iter()
        .filter(|(prefix, _)| name.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, tokens)| *tokens);
    known
        .or_else(|| reference.and_then(|r| config.providers.get(&r.provider).copied()))
        .unwrap_or(DEFAULT_WINDOW)
}

/// Tokens in a text.
pub fn count_text(text: &str) -> usize {
    o200k_base_singleton().encode_with_special_tokens(text).len()
}

/// Tokens a request takes: its messages (text parts, tool calls and their
/// arguments) and its tool definitions.
pub fn count_request(messages: &[Message], tools: &[ToolDef]) -> usize {
    let messages: usize = messages.iter().map(count_message).sum();
    let tools: usize = tools.iter().map(|t| count_text(&tool_json(t))).sum();
    messages + tools
}

/// A bound no tokenizer count can pass (a token is at least one byte), for
/// skipping the tokenizer when a request is clearly small.
pub fn upper_bound(messages: &[Message], tools: &[ToolDef]) -> usize {
    let messages: usize = messages
        .iter()
        .map(|m| {
            let calls: usize = calls_of(m)
                .map(|(name, arguments)| name.len() + arguments.len())
                .sum();
            PER_MESSAGE + m.text_content().len() + calls
        })
        .sum();
    messages + tools.iter().map(|t| tool_json(t).len()).sum::<usize>()
}

pub fn count_message(message: &Message) -> usize {
    let calls: usize = calls_of(message)
        .map(|(name, arguments)| count_text(name) + count_text(arguments))
        .sum();
    PER_MESSAGE + count_text(&message.text_content()) + calls
}

/// The name and arguments of each tool call a message makes.
fn calls_of(message: &Message) -> impl Iterator<Item = (&str, &str)> {
    message
        .tool_calls
        .iter()
        .flatten()
        .map(|c| (c.function.name.as_str(), c.function.arguments.as_str()))
}

fn tool_json(tool: &ToolDef) -> String {
    serde_json::to_string(tool).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn windows_come_from_config_then_the_table_then_the_provider() {
        let mut config = ContextWindows::default();
        assert_eq!(window("openai/gpt-4o-mini", &config), 128_000);
        assert_eq!(window("anthropic/claude-sonnet-4-5", &config), 200_000);
        assert_eq!(window("ollama/llama3.2:3b", &config), 131_072);
        assert_eq!(window("ollama/llama3:8b", &config), 8_192);
        assert_eq!(window("local/mystery", &config), DEFAULT_WINDOW);
        config.providers.insert("local".into(), 4_096);
        assert_eq!(window("local/mystery", &config), 4_096);
        config.models.insert("ollama/llama3.2:3b".into(), 8_000);
        assert_eq!(window("ollama/llama3.2:3b", &config), 8_000);
    }

    #[test]
    fn tokens_are_counted_by_the_tokenizer_not_by_characters() {
        // o200k_base: "hello world" is two tokens, a long word several.
        assert_eq!(count_text("hello world"), 2);
        assert!(count_text("antidisestablishmentarianism") > 3);
        let message = Message::user("hello world");
        assert_eq!(count_message(&message), PER_MESSAGE + 2);
        let parts: Message = serde_json::from_value(
            json!({"role": "user", "content": [{"type": "text", "text": "hello world"}]}),
        )
        .unwrap();
        assert_eq!(count_message(&parts), PER_MESSAGE + 2);
        let messages = [message, parts, Message::assistant("Grüße, ünïcödé!", Vec::new())];
        assert!(upper_bound(&messages, &[]) >= count_request(&messages, &[]));
    }
}
