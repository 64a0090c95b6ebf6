//! Generators of request bodies. Each endpoint's body is built valid (required
//! fields present, optional ones sometimes), then, in a third of the cases,
//! one corruption per object: a field's value replaced by a wrong type, a huge
//! number, unicode or deep nesting; a field removed; an unknown field added.
//! Mostly-valid bodies reach past the first check into the handlers, the
//! router and the upstream translation.

use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{Map, Value, json};

/// Models that answer: the fuzz is about Onyx, not about a broken upstream.
pub const MODELS: &[&str] = &[
    "openai/fake-echo",
    "anthropic/fake-echo",
    "ollama/fake-echo",
    "fast",
    "onyx:main",
    "onyx:fuzz",
];

pub fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => "[a-zA-Z0-9 ]{1,24}",
        2 => any::<String>(),
        1 => prop::sample::select(vec![
            "", " ", "\u{0}", "null", "../../etc/passwd", "%00", "${ONYX_API_KEY}", "\u{202e}abc",
            "😀😀", "a\u{301}", "\r\n", "'; DROP TABLE session; --", "\u{2066}x\u{2069}", "main", "_shared",
            "2026-11-24T10:00:00Z", "0 9 * * *", "@daily", "+10m", "1s", "99999999999999999999",
        ])
        .prop_map(String::from),
        1 => (1usize..3000).prop_map(|n| "x".repeat(n)),
    ]
}

/// A scalar of any JSON type (the usual wrong type for a field).
pub fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        prop::sample::select(vec![0.0, -1.0, 0.5, 1e-300, 1e300, f64::MAX, -f64::MAX, 2.5])
            .prop_map(Value::from),
        text().prop_map(Value::String),
    ]
}

/// Any JSON value, up to a few levels deep.
pub fn json() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(text(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A scalar wrapped in 1 to 199 arrays or objects (serde_json stops at 128).
pub fn nested() -> impl Strategy<Value = Value> {
    (1usize..200, any::<bool>(), scalar()).prop_map(|(depth, arrays, leaf)| {
        (0..depth).fold(leaf, |inner, _| {
            if arrays {
                json!([inner])
            } else {
                json!({ "a": inner })
            }
        })
    })
}

/// What replaces a field's value when it is corrupted.
fn wrong() -> impl Strategy<Value = Value> {
    prop_oneof![4 => scalar(), 2 => json(), 1 => nested()]
}

#[derive(Clone, Debug)]
enum Corruption {
    Replace(Index, Value),
    Remove(Index),
    Add(String, Value),
}

fn corruption() -> impl Strategy<Value = Option<Corruption>> {
    prop_oneof![
        8 => Just(None),
        2 => (any::<Index>(), wrong()).prop_map(|(at, v)| Some(Corruption::Replace(at, v))),
        1 => any::<Index>().prop_map(|at| Some(Corruption::Remove(at))),
        1 => (text(), json()).prop_map(|(k, v)| Some(Corruption::Add(k, v))),
    ]
}

type Fields = Vec<(&'static str, BoxedStrategy<Value>)>;

/// An object with every `required` field, each `optional` one half of the
/// time, and maybe one corruption.
fn object(required: Fields, optional: Fields) -> BoxedStrategy<Value> {
    let required: Vec<_> = required
        .into_iter()
        .map(|(name, value)| value.prop_map(move |v| (name, Some(v))).boxed())
        .collect();
    let optional: Vec<_> = optional
        .into_iter()
        .map(|(name, value)| prop::option::of(value).prop_map(move |v| (name, v)).boxed())
        .collect();
    (required, optional, corruption())
        .prop_map(|(required, optional, corruption)| {
            let mut map = Map::new();
            for (name, value) in required.into_iter().chain(optional) {
                if let Some(value) = value {
                    map.insert(name.to_string(), value);
                }
            }
            match corruption {
                Some(Corruption::Replace(at, value)) if !map.is_empty() => {
                    let key = map.keys().nth(at.index(map.len())).cloned().unwrap_or_default();
                    map.insert(key, value);
                }
                Some(Corruption::Remove(at)) if !map.is_empty() => {
                    let key = map.keys().nth(at.index(map.len())).cloned().unwrap_or_default();
                    map.remove(&key);
                }
                Some(Corruption::Add(key, value)) => {
                    map.insert(key, value);
                }
                _ => {}
            }
            Value::Object(map)
        })
        .boxed()
}

fn string() -> BoxedStrategy<Value> {
    text().prop_map(Value::String).boxed()
}

fn one_of(values: &'static [&'static str]) -> BoxedStrategy<Value> {
    prop_oneof![
        12 => prop::sample::select(values).prop_map(Value::from),
        1 => string(),
    ]
    .boxed()
}

fn boolean() -> BoxedStrategy<Value> {
    any::<bool>().prop_map(Value::Bool).boxed()
}

fn number(max: i64) -> BoxedStrategy<Value> {
    (1..max).prop_map(Value::from).boxed()
}

fn float(max: f64) -> BoxedStrategy<Value> {
    (0.0..max).prop_map(Value::from).boxed()
}

fn model() -> BoxedStrategy<Value> {
    prop_oneof![
        6 => prop::sample::select(MODELS).prop_map(Value::from),
        1 => string(),
    ]
    .boxed()
}

/// A message's content: text, or content parts.
fn content() -> BoxedStrategy<Value> {
    let part = (
        prop_oneof![
            4 => Just("text"),
            1 => prop::sample::select(vec!["input_text", "output_text", "image_url", "image", "tool_result", "x"]),
        ],
        text(),
    )
        .prop_map(|(kind, text)| json!({"type": kind, "text": text}));
    prop_oneof![
        4 => string(),
        1 => prop::collection::vec(part, 0..3).prop_map(Value::Array),
    ]
    .boxed()
}

fn message() -> BoxedStrategy<Value> {
    let tool_calls = prop::collection::vec(
        (text(), text()).prop_map(|(name, args)| {
            json!({"id": "call_1", "type": "function", "function": {"name": name, "arguments": args}})
        }),
        0..2,
    )
    .prop_map(Value::Array)
    .boxed();
    object(
        vec![
            (
                "role",
                one_of(&["user", "user", "user", "assistant", "system", "developer", "tool"]),
            ),
            ("content", content()),
        ],
        vec![
            ("tool_calls", tool_calls),
            ("name", string()),
            ("tool_call_id", string()),
        ],
    )
}

fn messages() -> BoxedStrategy<Value> {
    prop::collection::vec(message(), 1..4)
        .prop_map(Value::Array)
        .boxed()
}

fn tools() -> BoxedStrategy<Value> {
    let tool = (text(), json()).prop_map(|(name, parameters)| {
        json!({"type": "function", "function": {"name": name, "parameters": parameters}})
    });
    prop::collection::vec(tool, 0..2).prop_map(Value::Array).boxed()
}

pub fn chat() -> BoxedStrategy<Value> {
    object(
        vec![("model", model()), ("messages", messages())],
        vec![
            ("stream", boolean()),
            ("temperature", float(2.0)),
            ("max_tokens", number(5000)),
            ("max_completion_tokens", number(5000)),
            ("n", number(3)),
            ("tools", tools()),
            ("tool_choice", one_of(&["auto", "none", "required"])),
            ("stream_options", Just(json!({"include_usage": true})).boxed()),
            ("response_format", Just(json!({"type": "json_object"})).boxed()),
            ("user", string()),
        ],
    )
}

pub fn responses() -> BoxedStrategy<Value> {
    let input = prop_oneof![string(), messages()].boxed();
    object(
        vec![("model", model()), ("input", input)],
        vec![
            ("instructions", string()),
            ("stream", boolean()),
            ("store", boolean()),
            ("max_output_tokens", number(5000)),
            ("previous_response_id", string()),
            ("tools", tools()),
            ("temperature", float(2.0)),
        ],
    )
}

pub fn messages_api() -> BoxedStrategy<Value> {
    object(
        vec![
            ("model", model()),
            ("max_tokens", number(5000)),
            ("messages", messages()),
        ],
        vec![
            ("system", content()),
            ("stream", boolean()),
            ("temperature", float(1.0)),
            ("metadata", json().boxed()),
            (
                "stop_sequences",
                prop::collection::vec(text(), 0..3).prop_map(|v| json!(v)).boxed(),
            ),
        ],
    )
}

pub fn embeddings() -> BoxedStrategy<Value> {
    let input = prop_oneof![
        string(),
        prop::collection::vec(text(), 0..4).prop_map(|v| json!(v)),
        prop::collection::vec(any::<i64>(), 0..4).prop_map(|v| json!(v)),
        prop::collection::vec(prop::collection::vec(0u32..100_000, 0..4), 0..3).prop_map(|v| json!(v)),
    ]
    .boxed();
    object(
        vec![
            (
                "model",
                one_of(&[
                    "openai/fake-embed",
                    "ollama/fake-embed",
                    "openai/text-embedding-3-small",
                ]),
            ),
            ("input", input),
        ],
        vec![
            ("dimensions", number(2000)),
            ("encoding_format", one_of(&["float", "base64"])),
        ],
    )
}

fn agent_id() -> BoxedStrategy<Value> {
    prop_oneof![4 => "[a-z0-9_-]{1,12}".prop_map(Value::from), 1 => string()].boxed()
}

fn permission_mode() -> BoxedStrategy<Value> {
    one_of(&["safe", "ask", "allow-all"])
}

pub fn agent_create() -> BoxedStrategy<Value> {
    object(
        vec![("id", agent_id())],
        vec![
            ("name", string()),
            ("model", model()),
            ("permission_mode", permission_mode()),
        ],
    )
}

pub fn agent_patch() -> BoxedStrategy<Value> {
    object(
        vec![],
        vec![
            ("enabled", boolean()),
            ("name", string()),
            ("model", model()),
            ("permission_mode", permission_mode()),
        ],
    )
}

pub fn memory_note() -> BoxedStrategy<Value> {
    object(
        vec![("content", string())],
        vec![
            ("agent", one_of(&["main", "fuzz", "_shared", "nobody"])),
            ("target", one_of(&["daily", "memory"])),
        ],
    )
}

pub fn task() -> BoxedStrategy<Value> {
    let schedule = prop_oneof![
        Just(("cron", "0 9 * * *")),
        Just(("cron", "*/5 * * * * *")),
        Just(("cron", "@daily")),
        Just(("cron", "@sometimes")),
        Just(("cron", "0 9 * * 8")),
        Just(("cron", "0 0 30 2 *")),
        Just(("interval", "1h")),
        Just(("interval", "500")),
        Just(("interval", "18446744073709551615")),
        Just(("interval", "4104222977810500")),
        Just(("once", "+10m")),
        Just(("once", "+100000000y")),
        Just(("once", "in 5 years")),
        Just(("once", "2099-01-01T00:00:00Z")),
        Just(("once", "2020-01-01T00:00:00Z")),
        Just(("once", "2027-03-28T02:30")),
    ];
    let body = object(
        vec![("prompt", string())],
        vec![
            ("agent", one_of(&["main", "fuzz", "nobody"])),
            ("name", string()),
            ("timezone", one_of(&["UTC", "Europe/Berlin", "Mars/Olympus"])),
            ("context_mode", one_of(&["isolated", "main"])),
            ("deliver_to", one_of(&["session:new", "telegram:123", "nowhere"])),
        ],
    );
    (body, schedule, prop::option::weighted(0.1, (text(), text())))
        .prop_map(|(mut body, (kind, value), odd)| {
            let (kind, value) = odd.unwrap_or((kind.into(), value.into()));
            if let Value::Object(map) = &mut body {
                map.entry("schedule_type").or_insert(json!(kind));
                map.entry("schedule_value").or_insert(json!(value));
            }
            body
        })
        .boxed()
}

pub fn key() -> BoxedStrategy<Value> {
    let limits = object(
        vec![],
        vec![
            ("dailyUsd", number(100)),
            ("monthlyUsd", number(1000)),
            ("rpm", number(100)),
            ("tpm", number(100_000)),
        ],
    );
    object(
        vec![("name", string())],
        vec![
            ("scope", one_of(&["chat", "admin", "read"])),
            ("limits", limits),
            (
                "agents",
                prop::collection::vec(agent_id(), 0..3)
                    .prop_map(Value::Array)
                    .boxed(),
            ),
            (
                "expiresAt",
                one_of(&[
                    "2099-01-01T00:00:00Z",
                    "2000-01-01T00:00:00Z",
                    "tomorrow",
                    "+262143-01-01T00:00:00Z",
                ]),
            ),
        ],
    )
}

pub fn session_patch() -> BoxedStrategy<Value> {
    object(
        vec![],
        vec![
            ("title", string()),
            ("status", one_of(&["active", "archived", "deleted"])),
        ],
    )
}

pub fn provider() -> BoxedStrategy<Value> {
    let headers = prop::collection::btree_map("[A-Za-z-]{1,12}|.{0,6}", text(), 0..3)
        .prop_map(|map| Value::Object(map.into_iter().map(|(k, v)| (k, Value::String(v))).collect()))
        .boxed();
    object(
        vec![
            ("name", prop_oneof![3 => "[a-z][a-z0-9-]{0,10}".prop_map(Value::String), 1 => text().prop_map(Value::String)].boxed()),
            ("type", one_of(&["openai", "anthropic", "ollama", "gemini", ""])),
        ],
        vec![
            ("baseUrl", one_of(&["http://127.0.0.1:9/v1", "https://api.example.com", "not a url", "ftp://x", ""])),
            ("apiKey", prop_oneof![string(), Just(Value::Null)].boxed()),
            ("headers", headers),
            ("timeoutSeconds", number(100_000)),
            ("connectTimeoutSeconds", number(1000)),
            ("maxRetries", number(100)),
            ("models", prop::collection::vec(string(), 0..3).prop_map(Value::Array).boxed()),
            ("responses", boolean()),
        ],
    )
}

pub fn alias() -> BoxedStrategy<Value> {
    object(
        vec![(
            "targets",
            prop::collection::vec(
                prop_oneof![
                    one_of(&["openai/fake-echo", "nobody/model", "no-slash", "onyx:main"]),
                    string()
                ],
                0..3,
            )
            .prop_map(Value::Array)
            .boxed(),
        )],
        vec![],
    )
}

pub fn skill_md() -> BoxedStrategy<Value> {
    let content = prop_oneof![
        2 => ("[a-z-]{1,8}", text()).prop_map(|(name, description)| format!("---\nname: {name}\ndescription: {description}\n---\nbody")),
        1 => text(),
    ];
    object(vec![("content", content.prop_map(Value::String).boxed())], vec![])
}
