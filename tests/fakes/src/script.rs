//! What the fake model does, whatever protocol asked. The model name picks a
//! behaviour:
//!
//! | model | behaviour |
//! | --- | --- |
//! | `fake-echo` (and any other known model) | answers `echo: <last user text>` |
//! | `fake-tools` | calls the first offered tool with `{"query": <last user text>}`; after a tool result, answers `tool said: <result>` |
//! | `fake-429` / `fake-500` | always fails with that status |
//! | `fake-flaky` | fails with 503 twice, then answers like `fake-echo` (counted per fake) |
//! | `fake-slow` | streams 100 words, one every 30 ms; without streaming (OpenAI fake) answers after 3 s |
//! | `fake-script` | follows a script in the last user message (see [`script_plan`]) |
//! | `fake-memory-write` | calls the offered tool named `memory_write` or ending in it (`mcp__onyx__memory_write`, as a vendor CLI names Onyx's MCP tools) with `{"content": <last user text>}`; after its result, answers `saved: <result>`; answers `no memory_write tool offered` (naming the tools it got) when there is none |
//! | `fake-garbled` (OpenAI fake, chat) | answers 200 with JSON cut off mid-object (not listed as a model) |
//! | anything else | 404 model not found |
//!
//! Every model that answers also takes part in Onyx's context compaction
//! (see [`compaction_plan`]): it saves a note when asked to before a
//! compaction, and summarizes a transcript.

use serde_json::{Value, json};

use crate::FakeState;

pub const MODELS: &[&str] = &[
    "fake-echo",
    "fake-tools",
    "fake-429",
    "fake-500",
    "fake-flaky",
    "fake-slow",
    "fake-script",
    "fake-memory-write",
];

/// The model whose chat answers arrive garbled (see the table above).
pub const GARBLED: &str = "fake-garbled";

/// The protocol-independent view of a request.
pub struct Turn {
    pub model: String,
    pub last_role: String,
    pub last_text: String,
    pub tool_names: Vec<String>,
    pub prompt_words: u64,
    /// Every message as (role, text); tool results have the role `tool`.
    pub history: Vec<(String, String)>,
}

#[derive(Debug, Clone)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: Value,
}

pub enum Plan {
    Reply(String),
    /// One or more tool calls in one answer (several are meant to run in parallel).
    CallTools(Vec<ToolCall>),
    Fail {
        status: u16,
        message: String,
    },
    NotFound,
}

impl Plan {
    pub fn completion_words(&self) -> u64 {
        match self {
            Plan::Reply(text) => words(text),
            Plan::CallTools(calls) => calls.iter().map(|c| words(&c.arguments.to_string())).sum(),
            _ => 0,
        }
    }
}

/// What the fake model reads as the user's words: Onyx starts the newest user
/// message with an `<onyx-context>` block (date, daily logs…), which is not
/// part of the script or of what an echo repeats.
pub fn without_context(text: &str) -> String {
    match text.trim_start().strip_prefix("<onyx-context>") {
        Some(rest) => rest
            .split_once("</onyx-context>")
            .map_or("", |(_, after)| after)
            .trim_start()
            .to_string(),
        None => text.to_string(),
    }
}

pub fn words(text: &str) -> u64 {
    text.split_whitespace().count() as u64
}

pub fn is_slow(model: &str) -> bool {
    model == "fake-slow"
}

pub fn plan(state: &FakeState, turn: &Turn) -> Plan {
    let model = turn.model.as_str();
    if !MODELS.contains(&model) {
        return Plan::NotFound;
    }
    match model {
        "fake-429" => {
            return Plan::Fail {
                status: 429,
                message: "rate limit reached, slow down".into(),
            };
        }
        "fake-500" => {
            return Plan::Fail {
                status: 500,
                message: "the fake upstream broke".into(),
            };
        }
        "fake-flaky" if state.attempt(model) <= 2 => {
            return Plan::Fail {
                status: 503,
                message: "temporarily overloaded".into(),
            };
        }
        "fake-slow" => {
            let text = (0..100).map(|i| format!("w{i}")).collect::<Vec<_>>().join(" ");
            return Plan::Reply(text);
        }
        _ => {}
    }
    if let Some(plan) = compaction_plan(turn) {
        return plan;
    }
    if model == "fake-tools" && turn.last_role == "tool" {
        return Plan::Reply(format!("tool said: {}", turn.last_text));
    }
    if model == "fake-tools"
        && let Some(name) = turn.tool_names.first()
    {
        let id = format!("call_{}", state.attempt("tool-call-ids"));
        return Plan::CallTools(vec![ToolCall {
            id,
            name: name.clone(),
            arguments: json!({"query": turn.last_text}),
        }]);
    }
    if model == "fake-memory-write" {
        return memory_write_plan(state, turn);
    }
    if model == "fake-script" {
        return script_plan(state, turn);
    }
    Plan::Reply(format!("echo: {}", turn.last_text))
}

/// `fake-memory-write` (see the table above).
fn memory_write_plan(state: &FakeState, turn: &Turn) -> Plan {
    if turn.last_role == "tool" {
        return Plan::Reply(format!("saved: {}", turn.last_text));
    }
    let Some(name) = turn.tool_names.iter().find(|t| t.ends_with("memory_write")) else {
        return Plan::Reply(format!(
            "no memory_write tool offered (tools: {})",
            turn.tool_names.join(", ")
        ));
    };
    Plan::CallTools(vec![ToolCall {
        id: format!("call_{}", state.attempt("tool-call-ids")),
        name: name.clone(),
        arguments: json!({"content": turn.last_text}),
    }])
}

/// Onyx's compaction requests, answered as a model would: a transcript to
/// summarize (`Transcript:` in the last user message) gets `Summary of N
/// user messages, from "…" to "…".`; the pre-compaction memory flush
/// (`Before the conversation is compacted`, with `memory_write` offered)
/// saves the first user message of the history, then answers `DONE`.
pub fn compaction_plan(turn: &Turn) -> Option<Plan> {
    if turn.last_role == "user" && turn.last_text.contains("Transcript:\n") {
        let users: Vec<&str> = turn
            .last_text
            .lines()
            .filter_map(|l| l.strip_prefix("user: "))
            .collect();
        return Some(Plan::Reply(format!(
            "Summary of {} user messages, from {:?} to {:?}.",
            users.len(),
            users.first().copied().unwrap_or_default(),
            users.last().copied().unwrap_or_default()
        )));
    }
    let flush = turn.history.iter().rposition(|(role, text)| {
        role == "user" && text.starts_with("Before the conversation is compacted")
    })?;
    if !turn.tool_names.iter().any(|t| t == "memory_write") {
        return None;
    }
    if turn.history[flush + 1..].iter().any(|(role, _)| role == "tool") {
        return Some(Plan::Reply("DONE".into()));
    }
    let first = turn
        .history
        .iter()
        .find(|(role, _)| role == "user")
        .map_or("", |(_, text)| text.as_str());
    Some(Plan::CallTools(vec![ToolCall {
        id: "call_flush".into(),
        name: "memory_write".into(),
        arguments: json!({"content": format!("Before compaction: {}", first.chars().take(80).collect::<String>())}),
    }]))
}

/// `fake-script`: the last user message reads
/// `script: memory_search {"query": "dog"} ; fs_write {…} & fs_list {} ; answer`.
/// Step N (N = assistant messages since that user message) makes the calls of
/// the Nth `;`-separated step (`&` joins calls made in parallel). Past the last
/// step, or at `answer`, it replies `script done: ` and every tool result since
/// the user message, joined by ` | `. A step `say <text>` answers exactly
/// `<text>`. A message that does not start with `script:` may hold the script
/// on a line of its own (`- script: say HEARTBEAT_OK` in a HEARTBEAT.md the
/// heartbeat prompt quotes).
pub fn script_plan(state: &FakeState, turn: &Turn) -> Plan {
    let Some(start) = turn.history.iter().rposition(|(role, _)| role == "user") else {
        return Plan::Reply("script: no user message".into());
    };
    let message = turn.history[start].1.trim();
    let script = message.strip_prefix("script:").or_else(|| {
        message
            .lines()
            .find_map(|line| line.trim().trim_start_matches("- ").strip_prefix("script:"))
    });
    let Some(script) = script else {
        return Plan::Reply(format!("echo: {message}"));
    };
    let after = &turn.history[start + 1..];
    let step = after.iter().filter(|(role, _)| role == "assistant").count();
    let steps: Vec<&str> = script.split(" ; ").map(str::trim).collect();
    match steps.get(step) {
        Some(calls) if calls.starts_with("say ") => Plan::Reply(calls["say ".len()..].to_string()),
        Some(calls) if *calls != "answer" => {
            let mut out = Vec::new();
            for call in calls.split(" & ") {
                let call = call.trim();
                let (name, arguments) = match call.split_once(' ') {
                    Some((name, args)) => (name, serde_json::from_str(args).unwrap_or(json!({}))),
                    None => (call, json!({})),
                };
                out.push(ToolCall {
                    id: format!("call_{}", state.attempt("tool-call-ids")),
                    name: name.to_string(),
                    arguments,
                });
            }
            Plan::CallTools(out)
        }
        _ => {
            let results: Vec<&str> = after
                .iter()
                .filter(|(role, _)| role == "tool")
                .map(|(_, text)| text.as_str())
                .collect();
            Plan::Reply(format!("script done: {}", results.join(" | ")))
        }
    }
}

/// Splits an answer into stream pieces of one word each (spaces kept).
pub fn pieces(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, word) in text.split(' ').enumerate() {
        out.push(if i == 0 {
            word.to_string()
        } else {
            format!(" {word}")
        });
    }
    out
}

/// Embedding models the fakes serve, with their default dimensions
/// (`dimensions` in the request overrides it).
pub const EMBEDDING_MODELS: &[(&str, usize)] = &[
    ("fake-embed", 16),
    ("nomic-embed-text", 768),
    ("all-minilm", 384),
    ("text-embedding-3-small", 1536),
];

/// The default dimensions of an embedding model, `None` if it is not one.
pub fn embedding_dimensions(model: &str) -> Option<usize> {
    EMBEDDING_MODELS
        .iter()
        .find(|(name, _)| *name == model)
        .map(|(_, d)| *d)
}

/// A deterministic embedding that puts texts on the same topic close together
/// (see [`crate::topics`]).
pub fn embed(text: &str, dimensions: usize) -> Vec<f32> {
    crate::topics::embed(text, dimensions)
}
