//! Property tests (fuzzing) of the HTTP surface, in-process against the real
//! router with healthy fake upstreams behind it: structurally-aware bodies
//! (`bodies`) and raw bytes POSTed to the main JSON endpoints. Whatever
//! arrives, Onyx never panics and never answers 5xx, and every error is in
//! the endpoint's shape (OpenAI's; Anthropic's on `/v1/messages`), including
//! one that ends a stream already started.
//!
//! Budget: 96 cases per endpoint, or `PROPTEST_CASES`; a fixed seed (or
//! `PROPTEST_RNG_SEED`) so CI runs the same cases and a failure replays. No
//! persistence files: the seed replays a failure, and each bug found has a
//! plain regression test (`bad_input::fuzz_findings_are_clean_4xx`). With
//! `--nocapture` each endpoint prints how many answers had each status, and
//! `FUZZ_DEBUG=1` prints every error body: to see what the generators reach.

mod bodies;

use std::collections::BTreeMap;
use std::sync::Mutex;

use axum::body::Body;
use http::{Method, StatusCode};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestRunner};
use serde_json::{Value, json};

use crate::harness::inprocess::{InProcess, request};
use crate::harness::*;

const CASES: u32 = 96;
const SEED: u64 = 0x0_0022_f022;

/// The library's `fuzzing::config` (a `cfg(test)` item, so not visible here) with this budget.
fn config() -> Config {
    let mut config = Config::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = CASES;
    }
    if config.rng_seed == RngSeed::Random {
        config.rng_seed = RngSeed::Fixed(SEED);
    }
    config.failure_persistence = None;
    config
}

/// A healthy Onyx, in-process, and the runtime its fakes and database run on.
struct World {
    runtime: tokio::runtime::Runtime,
    onyx: InProcess,
    _fakes: Fakes,
    /// A session that exists (to PATCH).
    session: String,
}

impl World {
    fn start() -> Self {
        // Warnings carry the whole error chain of a 5xx; shown when a case fails.
        let _ = tracing_subscriber::fmt()
            .with_env_filter("warn")
            .with_test_writer()
            .try_init();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let (fakes, onyx, session) = runtime.block_on(async {
            let fakes = Fakes::start().await;
            let config = TestConfig::new(&fakes)
                .agent(json!({"id": "main", "default": true, "model": "openai/fake-echo"}))
                .agent(json!({"id": "fuzz", "model": "anthropic/fake-echo"}))
                .agent(json!({"id": "fuzzpatch", "model": "ollama/fake-echo"}));
            let onyx = InProcess::start(config).await;
            let reply = onyx
                .chat(json!({"model": "onyx:main", "messages": [{"role": "user", "content": "hello"}]}))
                .await;
            assert_eq!(reply.status, 200, "{}", reply.body);
            let sessions = onyx.call(Method::GET, "/v1/sessions", &Value::Null).await;
            let session = sessions.body["data"][0]["id"].as_str().unwrap().to_string();
            (fakes, onyx, session)
        });
        Self {
            runtime,
            onyx,
            _fakes: fakes,
            session,
        }
    }
}

/// Which error body an endpoint answers with.
#[derive(Clone, Copy, Debug)]
enum Shape {
    OpenAi,
    Anthropic,
}

#[derive(Clone, Debug)]
enum Payload {
    Json(Value),
    /// Raw bytes, with or without a JSON content type.
    Bytes(Vec<u8>, bool),
    Text(String),
}

#[derive(Clone, Debug)]
struct Case {
    method: Method,
    path: String,
    headers: Vec<(&'static str, String)>,
    payload: Payload,
}

/// Bytes that are almost the JSON a structured body would be, or anything.
fn raw(structured: BoxedStrategy<Value>) -> BoxedStrategy<Payload> {
    prop_oneof![
        8 => structured.clone().prop_map(Payload::Json),
        1 => (any::<Vec<u8>>(), any::<bool>()).prop_map(|(b, json)| Payload::Bytes(b, json)),
        1 => (structured, any::<prop::sample::Index>(), any::<u8>()).prop_map(|(v, at, byte)| {
            let mut bytes = v.to_string().into_bytes();
            let i = at.index(bytes.len());
            bytes[i] = byte;
            Payload::Bytes(bytes, true)
        }),
        1 => (structured_text(), any::<prop::sample::Index>()).prop_map(|(text, at)| {
            let mut bytes = text.into_bytes();
            bytes.truncate(at.index(bytes.len() + 1));
            Payload::Bytes(bytes, true)
        }),
    ]
    .boxed()
}

fn structured_text() -> impl Strategy<Value = String> {
    bodies::json().prop_map(|v| v.to_string())
}

fn post(path: &'static str, body: BoxedStrategy<Value>) -> BoxedStrategy<Case> {
    raw(body)
        .prop_map(move |payload| Case {
            method: Method::POST,
            path: path.into(),
            headers: Vec::new(),
            payload,
        })
        .boxed()
}

/// Header values a client might send (invalid header bytes are left out: they never reach Onyx).
fn header_value() -> impl Strategy<Value = String> {
    prop_oneof![bodies::text(), "[ -~]{0,40}"]
        .prop_filter("a valid header value", |v| http::HeaderValue::from_str(v).is_ok())
}

/// Percent-encodes every byte but unreserved characters (and `/` if `keep_slash`).
fn encode(text: &str, keep_slash: bool) -> String {
    text.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            b'/' if keep_slash => "/".into(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Sends one case and checks the answer; counts its status in `seen`.
async fn check(
    onyx: &InProcess,
    shape: Shape,
    case: Case,
    seen: &Mutex<BTreeMap<u16, u32>>,
) -> Result<(), TestCaseError> {
    let mut builder = request(case.method.clone(), &case.path, Some(ONYX_KEY));
    if matches!(shape, Shape::Anthropic) {
        builder = builder
            .header("x-api-key", ONYX_KEY)
            .header("anthropic-version", "2023-06-01");
    }
    for (name, value) in &case.headers {
        builder = builder.header(*name, value.as_str());
    }
    let body = match case.payload {
        Payload::Json(value) => {
            builder = builder.header("content-type", "application/json");
            Body::from(value.to_string())
        }
        Payload::Bytes(bytes, json) => {
            if json {
                builder = builder.header("content-type", "application/json");
            }
            Body::from(bytes)
        }
        Payload::Text(text) => Body::from(text),
    };
    let (status, headers, bytes) = onyx.send_raw(builder.body(body).unwrap()).await;
    let text = String::from_utf8_lossy(&bytes);
    *seen.lock().unwrap().entry(status.as_u16()).or_default() += 1;
    if std::env::var_os("FUZZ_DEBUG").is_some() && status.is_client_error() {
        println!(
            "DEBUG {} {status} {}",
            case.path.chars().take(40).collect::<String>(),
            text.chars().take(160).collect::<String>()
        );
    }
    prop_assert!(!status.is_server_error(), "{status}: {text}");
    if status.is_client_error() {
        let body: Value = serde_json::from_slice(&bytes)
            .map_err(|e| TestCaseError::fail(format!("{status}: not JSON ({e}): {text}")))?;
        check_error_shape(shape, &body)?;
    }
    let is_stream = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if status == StatusCode::OK && is_stream {
        // An agent run streams before its model answers, so a request the
        // upstream refuses can only fail in the stream: allowed when it is
        // the client's error, in the endpoint's shape (never a server error).
        for data in text.lines().filter_map(|l| l.strip_prefix("data: ")) {
            let Ok(event) = serde_json::from_str::<Value>(data) else {
                continue;
            };
            let failed = match shape {
                Shape::OpenAi => event.get("error").is_some_and(|e| !e.is_null()),
                Shape::Anthropic => event["type"] == "error",
            };
            if failed {
                check_error_shape(shape, &event)?;
                prop_assert_eq!(&event["error"]["type"], "invalid_request_error", "{}", text);
                *seen.lock().unwrap().entry(0).or_default() += 1;
            }
        }
    }
    Ok(())
}

fn check_error_shape(shape: Shape, body: &Value) -> Result<(), TestCaseError> {
    let error = &body["error"];
    prop_assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
    prop_assert!(error["type"].is_string(), "{body}");
    match shape {
        Shape::OpenAi => prop_assert!(
            error.get("param").is_some() && error.get("code").is_some(),
            "{body}"
        ),
        Shape::Anthropic => prop_assert_eq!(&body["type"], "error", "{}", body),
    }
    Ok(())
}

/// Runs `cases` against `world`, failing with the endpoint's name; prints
/// how many answers had each status (with `--nocapture`), to see what the
/// generators reach (status 0 counts streams that ended in a client error).
fn fuzz(world: &World, name: &str, shape: Shape, cases: BoxedStrategy<Case>) {
    let mut runner = TestRunner::new(config());
    let seen = Mutex::new(BTreeMap::new());
    let result = runner.run(&cases, |case| {
        world.runtime.block_on(check(&world.onyx, shape, case, &seen))
    });
    if let Err(err) = result {
        panic!("{name}: {err}");
    }
    println!("{name}: statuses {:?}", seen.into_inner().unwrap());
}

#[test]
fn model_endpoints_never_fail_on_bad_bodies() {
    let world = World::start();
    let chat = (
        raw(bodies::chat()),
        prop::option::of(header_value()),
        prop::option::of(header_value()),
    )
        .prop_map(|(payload, session, agent)| {
            let mut headers = Vec::new();
            if let Some(session) = session {
                headers.push(("x-onyx-session-id", session));
            }
            if let Some(agent) = agent {
                headers.push(("x-onyx-agent-id", agent));
            }
            Case {
                method: Method::POST,
                path: "/v1/chat/completions".into(),
                headers,
                payload,
            }
        })
        .boxed();
    fuzz(&world, "/v1/chat/completions", Shape::OpenAi, chat);
    for (path, shape, body) in [
        ("/v1/responses", Shape::OpenAi, bodies::responses()),
        ("/v1/messages", Shape::Anthropic, bodies::messages_api()),
        ("/v1/embeddings", Shape::OpenAi, bodies::embeddings()),
    ] {
        fuzz(&world, path, shape, post(path, body));
    }
}

#[test]
fn onyx_endpoints_never_fail_on_bad_bodies() {
    let world = World::start();
    for (path, body) in [
        ("/v1/agents", bodies::agent_create()),
        ("/v1/memory", bodies::memory_note()),
        ("/v1/tasks", bodies::task()),
        ("/v1/keys", bodies::key()),
    ] {
        fuzz(&world, &format!("POST {path}"), Shape::OpenAi, post(path, body));
    }
    let patch = raw(bodies::agent_patch())
        .prop_map(|payload| Case {
            method: Method::PATCH,
            path: "/v1/agents/fuzzpatch".into(),
            headers: Vec::new(),
            payload,
        })
        .boxed();
    fuzz(&world, "PATCH /v1/agents/{id}", Shape::OpenAi, patch);
    let session = world.session.clone();
    let id = prop_oneof![3 => Just(session), 1 => bodies::text()];
    let patch = (id, raw(bodies::session_patch()))
        .prop_map(|(id, payload)| Case {
            method: Method::PATCH,
            path: format!("/v1/sessions/{}", encode(&id, false)),
            headers: Vec::new(),
            payload,
        })
        .boxed();
    fuzz(&world, "PATCH /v1/sessions/{id}", Shape::OpenAi, patch);
}

#[test]
fn provider_alias_and_skill_endpoints_never_fail_on_bad_bodies() {
    let world = World::start();
    fuzz(
        &world,
        "POST /v1/providers",
        Shape::OpenAi,
        post("/v1/providers", bodies::provider()),
    );
    let named = |method: Method, prefix: &'static str, body: BoxedStrategy<Value>| {
        let name = prop_oneof![3 => "[a-z][a-z0-9-]{0,8}", 1 => bodies::text()];
        (name, raw(body))
            .prop_map(move |(name, payload)| Case {
                method: method.clone(),
                path: format!("{prefix}{}", encode(&name, false)),
                headers: Vec::new(),
                payload,
            })
            .boxed()
    };
    fuzz(
        &world,
        "PUT /v1/aliases/{name}",
        Shape::OpenAi,
        named(Method::PUT, "/v1/aliases/", bodies::alias()),
    );
    fuzz(
        &world,
        "PATCH /v1/providers/{name}",
        Shape::OpenAi,
        named(Method::PATCH, "/v1/providers/", bodies::provider()),
    );
    fuzz(
        &world,
        "PUT /v1/skills/_shared/{name}",
        Shape::OpenAi,
        named(Method::PUT, "/v1/skills/_shared/", bodies::skill_md()),
    );
}

#[test]
fn memory_files_and_search_never_fail_on_odd_paths_and_queries() {
    let world = World::start();
    let path = prop_oneof![
        3 => "(memory/|notes/)?[a-zA-Z0-9 _-]{1,12}\\.(md|txt)",
        1 => bodies::text(),
        1 =>
        prop::sample::select(vec![
            "../x.md",
            "..%2Fx.md",
            "a/../../b.md",
            "/etc/passwd",
            "x\\..\\y.md",
            "memory/2026-13-45.md",
            "MEMORY.md"
        ])
        .prop_map(String::from),
    ];
    let agent = prop_oneof![
        4 => prop::sample::select(vec!["main", "fuzz", "_shared", "..", "nobody"]).prop_map(String::from),
        1 => bodies::text(),
    ];
    let mode = prop_oneof![
        4 => prop::sample::select(vec!["hybrid", "vector", "text"]).prop_map(String::from),
        1 => bodies::text(),
    ];
    let limit = prop_oneof![
        4 => (0u32..200).prop_map(|n| n.to_string()),
        1 => bodies::text(),
    ];
    let write = (agent.clone(), path, any::<bool>(), bodies::text(), any::<bool>())
        .prop_filter("a non-empty path", |(_, path, ..)| !path.is_empty())
        .prop_map(|(agent, path, keep_slash, text, as_json)| Case {
            method: Method::PUT,
            path: format!(
                "/v1/memory/files/{}/{}",
                encode(&agent, false),
                encode(&path, keep_slash)
            ),
            headers: Vec::new(),
            payload: if as_json {
                Payload::Json(json!({"content": text}))
            } else {
                Payload::Text(text)
            },
        })
        .boxed();
    fuzz(
        &world,
        "PUT /v1/memory/files/{agent}/{path}",
        Shape::OpenAi,
        write,
    );
    let search = (
        bodies::text(),
        prop::option::of(mode),
        prop::option::of(limit),
        prop::option::of(agent),
    )
        .prop_map(|(q, mode, limit, agent)| {
            let mut query = format!("q={}", encode(&q, false));
            for (name, value) in [("mode", mode), ("limit", limit), ("agent", agent)] {
                if let Some(value) = value {
                    query.push_str(&format!("&{name}={}", encode(&value, false)));
                }
            }
            Case {
                method: Method::GET,
                path: format!("/v1/memory/search?{query}"),
                headers: Vec::new(),
                payload: Payload::Text(String::new()),
            }
        })
        .boxed();
    fuzz(&world, "GET /v1/memory/search", Shape::OpenAi, search);
}
