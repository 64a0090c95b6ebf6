//! Sessions through the real binary: continuing a conversation, streaming and
//! aborted turns, the session API, concurrent appends, crash safety and
//! `onyx reindex`.

use crate::harness::*;
use serde_json::{Value, json};

async fn setup() -> (Fakes, Onyx) {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&fakes.config()), &[]).await;
    (fakes, onyx)
}

async fn chat_in(onyx: &Onyx, session: &str, model: &str, text: &str) -> (String, Value) {
    let response = onyx
        .post("/v1/chat/completions")
        .header("x-onyx-session-id", session)
        .json(&json!({"model": model, "messages": [{"role": "user", "content": text}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let id = session_id(&response);
    (id, response.json().await.unwrap())
}

async fn session(onyx: &Onyx, id: &str) -> Value {
    let (status, body) = reply(onyx.get(&format!("/v1/sessions/{id}"))).await;
    assert_eq!(status, 200, "{body}");
    body
}

#[tokio::test]
async fn a_session_continues_with_its_history() {
    let (fakes, onyx) = setup().await;
    let (id, first) = chat_in(&onyx, "new", "openai/fake-echo", "my name is Ada").await;
    assert_eq!(first["choices"][0]["message"]["content"], "echo: my name is Ada");
    assert_eq!(uuid::Uuid::parse_str(&id).unwrap().get_version_num(), 7);

    let (same, _) = chat_in(&onyx, &id, "anthropic/fake-echo", "what is my name?").await;
    assert_eq!(same, id);
    let sent = fakes.anthropic.state.last_request().unwrap();
    let texts: Vec<String> = sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"][0]["text"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        texts,
        ["my name is Ada", "echo: my name is Ada", "what is my name?"],
        "history prepended: {sent}"
    );

    let body = session(&onyx, &id).await;
    assert_eq!(body["title"], "my name is Ada");
    assert_eq!(body["message_count"], 4);
    assert_eq!(body["total_messages"], 4);
    assert_eq!(body["source"], "api");
    assert_eq!(body["status"], "active");
    let roles = pluck(&body["messages"], "/role");
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
    assert_eq!(body["messages"][1]["model"], "openai/fake-echo");
    assert!(body["messages"][1]["usage"]["total_tokens"].as_u64().unwrap() > 0);
    assert!(body["token_count"].as_u64().unwrap() > 0);
    assert_eq!(body["last_message_preview"], "echo: what is my name?");
    let page = onyx
        .get_json(&format!("/v1/sessions/{id}?offset=1&limit=2"))
        .await;
    assert_eq!(page["messages"].as_array().unwrap().len(), 2);
    assert_eq!(page["messages"][0]["role"], "assistant");
}

#[tokio::test]
async fn the_body_field_works_and_never_reaches_the_upstream() {
    let (fakes, onyx) = setup().await;
    let response = onyx
        .post("/v1/chat/completions")
        .json(&json!({"model": "openai/fake-echo", "x-onyx-session-id": "new", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers().contains_key("x-onyx-session-id"));
    let sent = fakes.openai.state.last_request().unwrap();
    assert!(sent.get("x-onyx-session-id").is_none(), "{sent}");
    // Plain requests store nothing.
    let (status, _) = onyx
        .chat(json!({"model": "openai/fake-echo", "messages": [{"role": "user", "content": "x"}]}))
        .await;
    assert_eq!(status, 200);
    let list: Value = onyx.get_json("/v1/sessions").await;
    assert_eq!(list["data"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn streamed_turns_and_tool_calls_are_recorded() {
    let (_fakes, onyx) = setup().await;
    let response = onyx
        .post("/v1/chat/completions")
        .header("x-onyx-session-id", "new")
        .json(&json!({"model": "anthropic/fake-tools", "stream": true, "tools": weather_tool(), "messages": [{"role": "user", "content": "lisbon"}]}))
        .send()
        .await
        .unwrap();
    let id = session_id(&response);
    let events = sse_events(response).await;
    assert_eq!(events.last().unwrap(), "[DONE]");
    let body = session(&onyx, &id).await;
    let assistant = &body["messages"][1];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(assistant["content"], "Let me look that up.");
    assert_eq!(assistant["tool_calls"][0]["function"]["name"], "lookup");
    assert_eq!(
        serde_json::from_str::<Value>(
            assistant["tool_calls"][0]["function"]["arguments"]
                .as_str()
                .unwrap()
        )
        .unwrap(),
        json!({"query": "lisbon"})
    );
    assert!(assistant.get("aborted").is_none());
}

#[tokio::test]
async fn an_aborted_stream_keeps_the_partial_answer() {
    let (_fakes, onyx) = setup().await;
    let mut response = onyx
        .post("/v1/chat/completions")
        .header("x-onyx-session-id", "new")
        .json(&json!({"model": "openai/fake-slow", "stream": true, "messages": [{"role": "user", "content": "long story"}]}))
        .send()
        .await
        .unwrap();
    let id = session_id(&response);
    let mut seen = 0;
    while seen < 5 {
        let chunk = response.chunk().await.unwrap().unwrap();
        seen += chunk.windows(6).filter(|w| w == b"data: ").count();
    }
    drop(response);
    let body = wait_until(secs(5), "the aborted turn is stored", async || {
        let body = session(&onyx, &id).await;
        (body["message_count"] == 2).then_some(body)
    })
    .await;
    let assistant = &body["messages"][1];
    assert_eq!(assistant["aborted"], true, "{body}");
    let text = assistant["content"].as_str().unwrap();
    assert!(text.starts_with("w0 w1"), "{text}");
    assert!(!text.contains("w99"), "only what was streamed: {text}");
}

#[tokio::test]
async fn bad_and_unknown_session_ids() {
    let (_fakes, onyx) = setup().await;
    let request = json!({"model": "openai/fake-echo", "messages": [{"role": "user", "content": "x"}]});
    let unknown = uuid::Uuid::now_v7().to_string();
    let in_session = |id: &str| {
        reply(
            onyx.post("/v1/chat/completions")
                .header("x-onyx-session-id", id)
                .json(&request),
        )
    };
    let (status, body) = in_session(&unknown).await;
    assert_eq!(status, 404);
    assert_eq!(body["error"]["code"], "session_not_found");
    let (status, body) = in_session("../../etc").await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["param"], "x-onyx-session-id");
    for path in [
        format!("/v1/sessions/{unknown}"),
        format!("/v1/sessions/{unknown}/export"),
    ] {
        assert_eq!(onyx.get(&path).send().await.unwrap().status(), 404, "{path}");
    }
    assert_eq!(
        onyx.get("/v1/sessions/not-a-uuid").send().await.unwrap().status(),
        400
    );
    for query in [
        "limit=abc",
        "limit=100000",
        "status=gone",
        "cursor=zzz",
        "updated_since=yesterday",
    ] {
        assert_eq!(
            reply(onyx.get(&format!("/v1/sessions?{query}"))).await.0,
            400,
            "{query}"
        );
    }
    let (status, _) = reply(
        onyx.patch(&format!("/v1/sessions/{unknown}"))
            .json(&json!({"status": "deleted"})),
    )
    .await;
    assert_eq!(status, 400, "bad status value");
}

#[tokio::test]
async fn list_filter_search_paginate_rename_archive_export_delete() {
    let (_fakes, onyx) = setup().await;
    let mut ids = Vec::new();
    for topic in [
        "gardening tips",
        "rust lifetimes",
        "sourdough bread",
        "rust traits",
        "tax forms",
    ] {
        ids.push(chat_in(&onyx, "new", "openai/fake-echo", topic).await.0);
    }
    let ui = onyx
        .post("/v1/chat/completions")
        .header("x-onyx-session-id", "new")
        .header("x-onyx-source", "ui")
        .json(&json!({"model": "openai/fake-echo", "messages": [{"role": "user", "content": "from the browser"}]}))
        .send()
        .await
        .unwrap();
    let ui_id = session_id(&ui);

    let list: Value = onyx.get_json("/v1/sessions").await;
    let titles = pluck(&list["data"], "/title");
    assert_eq!(
        titles,
        [
            "from the browser",
            "tax forms",
            "rust traits",
            "sourdough bread",
            "rust lifetimes",
            "gardening tips"
        ],
        "newest first"
    );

    let rust: Value = onyx.get_json("/v1/sessions?q=RUST").await;
    assert_eq!(rust["data"].as_array().unwrap().len(), 2);
    let content: Value = onyx.get_json("/v1/sessions?q=echo%3A%20tax").await;
    assert_eq!(
        content["data"].as_array().unwrap().len(),
        1,
        "content is searched too"
    );
    let from_ui: Value = onyx.get_json("/v1/sessions?source=ui").await;
    assert_eq!(from_ui["data"][0]["id"], ui_id.as_str());
    assert_eq!(from_ui["data"].as_array().unwrap().len(), 1);

    let future = onyx
        .get_json("/v1/sessions?updated_since=2999-01-01T00:00:00Z")
        .await;
    assert_eq!(future["data"].as_array().unwrap().len(), 0);
    let past = onyx
        .get_json("/v1/sessions?updated_since=2000-01-01T00:00:00Z")
        .await;
    assert_eq!(past["data"].as_array().unwrap().len(), 6);

    // Cursor pagination walks every session once.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/v1/sessions?limit=2&cursor={c}"),
            None => "/v1/sessions?limit=2".to_string(),
        };
        let page: Value = onyx.get_json(&path).await;
        seen.extend(crate::harness::ids(&page));
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    assert_eq!(seen.len(), 6);
    seen.dedup();
    assert_eq!(seen.len(), 6);

    let patch = |id: &str, body: Value| reply(onyx.patch(&format!("/v1/sessions/{id}")).json(&body));
    let (_, renamed) = patch(&ids[0], json!({"title": "Garden"})).await;
    assert_eq!(renamed["title"], "Garden");
    patch(&ids[1], json!({"status": "archived"})).await;
    let archived: Value = onyx.get_json("/v1/sessions?status=archived").await;
    assert_eq!(archived["data"].as_array().unwrap().len(), 1);
    assert_eq!(archived["data"][0]["id"], ids[1].as_str());

    let export = onyx
        .get(&format!("/v1/sessions/{}/export", ids[2]))
        .send()
        .await
        .unwrap();
    assert_eq!(export.headers()["content-type"], "application/x-ndjson");
    let lines: Vec<Value> = export
        .text()
        .await
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["content"], "sourdough bread");
    assert!(lines[0]["ts"].as_str().unwrap().ends_with('Z'));

    for _ in 0..2 {
        let (status, _) = reply(onyx.delete(&format!("/v1/sessions/{}", ids[3]))).await;
        assert_eq!(status, 200, "delete is idempotent");
    }
    assert_eq!(reply(onyx.get(&format!("/v1/sessions/{}", ids[3]))).await.0, 404);
    let objects = std::fs::read_dir(onyx.dir.path().join("data/objects/onyx-sessions/main"))
        .unwrap()
        .count();
    assert_eq!(objects, 5, "the deleted session's log is gone too");
}

#[tokio::test]
async fn fifty_concurrent_turns_on_one_session_are_all_kept_whole() {
    let (_fakes, onyx) = setup().await;
    let (id, _) = chat_in(&onyx, "new", "openai/fake-echo", "start").await;
    let requests = (0..50).map(|i| {
        let request = onyx
            .post("/v1/chat/completions")
            .header("x-onyx-session-id", &id)
            .json(&json!({"model": "openai/fake-echo", "messages": [{"role": "user", "content": format!("turn {i}")}]}));
        async move { request.send().await.unwrap().status() }
    });
    let statuses = futures::future::join_all(requests).await;
    assert!(statuses.iter().all(|s| s.as_u16() == 200), "{statuses:?}");
    // Each turn is recorded just after its answer is sent, so the last few may
    // still be on their way when every response has arrived.
    let body = wait_until(secs(30), "all 51 turns are recorded", async || {
        let body = onyx.get_json(&format!("/v1/sessions/{id}?limit=1000")).await;
        (body["message_count"] == 102).then_some(body)
    })
    .await;
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 102);
    let mut turns = std::collections::BTreeSet::new();
    for pair in messages.chunks(2) {
        let user = pair[0]["content"].as_str().unwrap();
        assert_eq!(
            pair[1]["content"].as_str().unwrap(),
            format!("echo: {user}"),
            "a turn was torn apart"
        );
        turns.insert(user.to_string());
    }
    assert_eq!(turns.len(), 51);
}

#[tokio::test]
async fn record_sessions_stores_plain_requests() {
    let fakes = Fakes::start().await;
    let config = TestConfig::new(&fakes)
        .set("gateway.recordSessions", json!(true))
        .build();
    let onyx = Onyx::start(Some(&config), &[]).await;
    let response = onyx
        .post("/v1/chat/completions")
        .json(&json!({"model": "openai/fake-echo", "messages": [{"role": "user", "content": "keep me"}]}))
        .send()
        .await
        .unwrap();
    let id = session_id(&response);
    assert_eq!(session(&onyx, &id).await["message_count"], 2);
}

fn snapshot(list: &Value) -> Vec<Value> {
    list["data"].as_array().unwrap().clone()
}

#[tokio::test]
async fn kill_9_mid_stream_loses_nothing_accepted_and_reindex_agrees() {
    let fakes = Fakes::start().await;
    let config = fakes.config();
    let onyx = Onyx::start(Some(&config), &[]).await;
    let (id, _) = chat_in(&onyx, "new", "openai/fake-echo", "first").await;
    chat_in(&onyx, &id, "openai/fake-echo", "second").await;
    let (other, _) = chat_in(&onyx, "new", "ollama/fake-echo", "another one").await;
    let (status, _) = reply(
        onyx.patch(&format!("/v1/sessions/{other}"))
            .json(&json!({"title": "Renamed", "status": "archived"})),
    )
    .await;
    assert_eq!(status, 200);
    let before: Value = onyx.get_json("/v1/sessions").await;

    let mut response = onyx
        .post("/v1/chat/completions")
        .header("x-onyx-session-id", &id)
        .json(&json!({"model": "openai/fake-slow", "stream": true, "messages": [{"role": "user", "content": "third"}]}))
        .send()
        .await
        .unwrap();
    response.chunk().await.unwrap();
    let dir = onyx.crash().await;

    // Every segment still parses, and the accepted turns are all there.
    let log_dir = dir.path().join(format!("data/objects/onyx-sessions/main/{id}"));
    let mut lines = Vec::new();
    let mut segments: Vec<_> = std::fs::read_dir(&log_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    segments.sort();
    for segment in segments {
        for line in std::fs::read_to_string(segment).unwrap().lines() {
            lines.push(serde_json::from_str::<Value>(line).unwrap()["content"].clone());
        }
    }
    assert_eq!(
        lines[..4],
        [
            json!("first"),
            json!("echo: first"),
            json!("second"),
            json!("echo: second")
        ]
    );

    let output = Onyx::cli(dir.path(), &["reindex"]).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("reindexed 2 session(s)"), "{stderr}");

    let onyx = Onyx::start_in(dir, Some(&config), &[]).await;
    let after: Value = onyx.get_json("/v1/sessions").await;
    let before = snapshot(&before);
    let mut after = snapshot(&after);
    // The interrupted turn may or may not have been recorded; everything else is identical.
    for session in after.iter_mut() {
        if session["id"] == id.as_str() && session["message_count"] != 4 {
            panic!("unexpected message count after the crash: {session}");
        }
    }
    assert_eq!(after, before);
}
