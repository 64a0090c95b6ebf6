//! What fits in a model's context window: the window of each model (config
//! first, then a shipped table of known models, then the provider's setting,
//! then a safe default) and how many tokens a request takes, counted with a
//! real BPE tokenizer (OpenAI's o200k_base; for other families a close
//! estimate, far better than characters / 4).

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Mutex, OnceLock, PoisonError};

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
pub const PER_MESSAGE: usize = 4;

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

/// Tokens in a text. A long text is counted line by line, each line's count
/// kept (`LineCounts`): an agent's system prompt is mostly the lines of its
/// last turn's (workspace files, daily-log excerpts), so a turn tokenizes only
/// what changed.
pub fn count_text(text: &str) -> usize {
    if text.len() < CACHED_FROM {
        return tokenize(text);
    }
    line_counts().count(text)
}

fn tokenize(text: &str) -> usize {
    o200k_base_singleton().encode_with_special_tokens(text).len()
}

/// Texts shorter than this are tokenized whole: hashing and locking would cost
/// about as much.
const CACHED_FROM: usize = 1024;
/// Lines whose counts are kept, per generation (two generations are kept).
const CACHED_LINES: usize = 50_000;

fn line_counts() -> &'static LineCounts {
    static COUNTS: OnceLock<LineCounts> = OnceLock::new();
    COUNTS.get_or_init(LineCounts::default)
}

/// Token counts of lines seen, keyed by a keyed hash of the line. Bounded by
/// two generations: when the current one fills, it becomes the previous one
/// and the older is dropped, so lines in use stay and the rest age out.
#[derive(Default)]
struct LineCounts {
    hasher: RandomState,
    generations: Mutex<[HashMap<u64, u32>; 2]>,
}

impl LineCounts {
    fn count(&self, text: &str) -> usize {
        let lines: Vec<(u64, &str)> = pieces(text).map(|l| (self.hasher.hash_one(l), l)).collect();
        let mut known = Vec::with_capacity(lines.len());
        {
            let generations = self.generations.lock().unwrap_or_else(PoisonError::into_inner);
            let [current, previous] = &*generations;
            for (hash, _) in &lines {
                known.push(
                    (current.get(hash).copied().map(Held::Current))
                        .or_else(|| previous.get(hash).copied().map(Held::Previous)),
                );
            }
        }
        let mut total = 0;
        // Lines tokenized now, and lines found only in the previous
        // generation (kept in the current one, so lines in use survive).
        let mut to_keep = Vec::new();
        for ((hash, line), known) in lines.iter().zip(known) {
            let (tokens, keep) = match known {
                Some(Held::Current(tokens)) => (tokens, false),
                Some(Held::Previous(tokens)) => (tokens, true),
                None => (tokenize(line) as u32, true),
            };
            total += tokens as usize;
            if keep {
                to_keep.push((*hash, tokens));
            }
        }
        if to_keep.is_empty() {
            return total;
        }
        let mut generations = self.generations.lock().unwrap_or_else(PoisonError::into_inner);
        for (hash, tokens) in to_keep {
            if generations[0].len() >= CACHED_LINES {
                generations[1] = std::mem::take(&mut generations[0]);
            }
            generations[0].insert(hash, tokens);
        }
        total
    }
}

/// Where a line's kept count was found.
enum Held {
    Current(u32),
    Previous(u32),
}

/// `text` cut where no o200k pre-token spans the cut, so the pieces' counts
/// add up to the text's (see [`next_cut`]).
fn pieces(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let (piece, tail) = rest.split_at(next_cut(rest).unwrap_or(rest.len()));
        rest = tail;
        Some(piece)
    })
}

/// After the last line break of the first stretch of whitespace that holds
/// one and is followed by more text. o200k's pre-tokens there: a word never
/// starts with a break; `\s*[\r\n]+` takes a stretch up to its last break;
/// punctuation takes the breaks right after it (`[\r\n/]*`), and so could
/// take a `/` after them: no cut is made before a `/`.
fn next_cut(text: &str) -> Option<usize> {
    let is_break = |c: char| c == '\n' || c == '\r';
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if !is_break(c) {
            continue;
        }
        let mut after_break = at + c.len_utf8();
        while let Some(&(at, c)) = chars.peek() {
            if !c.is_whitespace() {
                break;
            }
            if is_break(c) {
                after_break = at + c.len_utf8();
            }
            chars.next();
        }
        chars.peek()?;
        if !text[after_break..].starts_with('/') {
            return Some(after_break);
        }
    }
    None
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

    #[test]
    fn a_long_text_counts_as_many_tokens_line_by_line_as_whole() {
        let samples = [
            "# Heading\n\nA line.  \n  indented, with trailing spaces   \n\n\n",
            "url: https://example.com/a/b\n/slash after a break\n.\n/again\r\n\r\nend",
            "numbers 12345 and 3.14159\n\tTabs\there\n'quoted' it's we'll\nÜnïcödé 日本語\n",
            "no break at the end, then a long run of words that keeps going",
            "\n\nleading breaks\n  \n   \nspaces between breaks\n\n",
            "a\n \nb.\n \n/c\u{a0}\n\u{a0}\nd\u{2028}e\n\t \n 42\n-dash\n",
        ];
        for repeat in [1, 40] {
            for sample in samples {
                let text = sample.repeat(repeat) + &"x".repeat(CACHED_FROM);
                let cut: String = pieces(&text).collect();
                assert_eq!(cut, text, "the pieces are the text");
                // Twice: once tokenizing each line, once from the kept counts.
                assert_eq!(count_text(&text), tokenize(&text), "{sample:?} × {repeat}");
                assert_eq!(
                    count_text(&text),
                    tokenize(&text),
                    "{sample:?} × {repeat}, cached"
                );
            }
        }
    }
}
