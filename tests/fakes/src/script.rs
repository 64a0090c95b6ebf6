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
//! | anything else | 404 model not found |

use serde_json::{Value, json};

use crate::FakeState;

pub const MODELS: &[&str] = &[
    "fake-echo",
    "fake-tools",
    "fake-429",
    "fake-500",
    "fake-flaky",
    "fake-slow",
];

/// The protocol-independent view of a request.
pub struct Turn {
    pub model: String,
    pub last_role: String,
    pub last_text: String,
    pub tool_names: Vec<String>,
    pub prompt_words: u64,
}

pub enum Plan {
    Reply(String),
    CallTool {
        id: String,
        name: String,
        arguments: Value,
    },
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
            Plan::CallTool { arguments, .. } => words(&arguments.to_string()),
            _ => 0,
        }
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
    if model == "fake-tools" && turn.last_role == "tool" {
        return Plan::Reply(format!("tool said: {}", turn.last_text));
    }
    if model == "fake-tools"
        && let Some(name) = turn.tool_names.first()
    {
        let id = format!("call_{}", state.attempt("tool-call-ids"));
        return Plan::CallTool {
            id,
            name: name.clone(),
            arguments: json!({"query": turn.last_text}),
        };
    }
    Plan::Reply(format!("echo: {}", turn.last_text))
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
