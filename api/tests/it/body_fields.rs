//! Onyx's request fields in the body (seed 003): `x-onyx-agent-id`,
//! `x-onyx-session-id` and `x-onyx-include-memory` work as body fields as
//! they do as headers, never reach an upstream, and a field given both ways
//! with different values is a 400 naming both. A key scoped to agents is
//! refused a body's agent exactly as a header's. The session's id comes back
//! in the body (`x_onyx.session_id`) as well as its header, on the first
//! chunk of a stream, and on `/v1/responses` and `/v1/messages`.

use serde_json::{Value, json};

use crate::harness::*;

async fn setup() -> (Fakes, Onyx) {
    let fakes = Fakes::start().await;
    let config = TestConfig::new(&fakes)
        .agent(json!({"id": "main", "default": true, "model": "openai/fake-echo"}))
        .agent(json!({"id": "ops", "model": "openai/fake-echo"}))
        .build();
    let onyx = Onyx::start(Some(&config), &[]).await;
    (fakes, onyx)
}

fn hello() -> Value {
    json!([{"role": "user", "content": "hello there"}])
}

/// The names of the Onyx fields an upstream request carried (there must be none).
fn onyx_fields_in(request: &Value) -> Vec<String> {
    request
        .as_object()
        .unwrap()
        .keys()
        .filter(|key| key.to_ascii_lowercase().contains("onyx"))
        .cloned()
        .collect()
}

async fn session_agent(onyx: &Onyx, session: &str) -> String {
    let (status, meta) = reply(onyx.get(&format!("/v1/sessions/{session}"))).await;
    assert_eq!(status, 200, "{meta}");
    meta["agent_id"]
        .as_str()
        .or(meta["agent"].as_str())
        .unwrap_or_else(|| panic!("no agent in {meta}"))
        .to_string()
}

#[tokio::test]
async fn body_fields_pick_the_agent_and_session_and_never_reach_the_upstream() {
    let (fakes, onyx) = setup().await;
    // The agent named in the body runs, whatever `model` says.
    let response = onyx
        .post("/v1/chat/completions")
        .json(&json!({"model": "openai/fake-echo", "x-onyx-agent-id": "ops", "messages": hello()}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let session = session_id(&response);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["model"], "onyx:ops", "{body}");
    assert_eq!(body["x_onyx"]["session_id"], session.as_str(), "{body}");
    assert!(
        body["x_onyx"]["iterations"].is_number(),
        "the agent's own x_onyx is kept: {body}"
    );
    assert_eq!(session_agent(&onyx, &session).await, "ops");
    assert_eq!(
        onyx_fields_in(&fakes.openai.state.last_request().unwrap()),
        Vec::<String>::new()
    );

    // A plain model's request continues the session named in the body: the
    // upstream gets its history, and none of the fields.
    let (status, first) = reply(onyx.post("/v1/chat/completions").json(&json!({
        "model": "openai/fake-echo", "x-onyx-session-id": "new", "x-onyx-include-memory": false,
        "messages": [{"role": "user", "content": "remember the word teal"}],
    })))
    .await;
    assert_eq!(status, 200, "{first}");
    let session = first["x_onyx"]["session_id"].as_str().unwrap().to_string();
    let (status, second) = reply(onyx.post("/v1/chat/completions").json(&json!({
        "model": "openai/fake-echo", "x-onyx-session-id": session, "messages": hello(),
    })))
    .await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["x_onyx"]["session_id"], session.as_str());
    let sent = fakes.openai.state.last_request().unwrap();
    assert_eq!(onyx_fields_in(&sent), Vec::<String>::new(), "{sent}");
    let contents = pluck(&sent["messages"], "/content");
    assert_eq!(
        contents.first().map(String::as_str),
        Some("remember the word teal"),
        "{sent}"
    );
    assert_eq!(
        contents.len(),
        3,
        "history, its answer, then the new message: {sent}"
    );

    // Without a session there is no x_onyx: the upstream's answer is passed on as it came.
    let (status, plain) = reply(
        onyx.post("/v1/chat/completions")
            .json(&json!({"model": "openai/fake-echo", "x-onyx-include-memory": false, "messages": hello()})),
    )
    .await;
    assert_eq!(status, 200, "{plain}");
    assert!(plain.get("x_onyx").is_none(), "{plain}");
    assert_eq!(
        onyx_fields_in(&fakes.openai.state.last_request().unwrap()),
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn a_stream_carries_the_session_id_on_its_first_chunk() {
    let (fakes, onyx) = setup().await;
    for (body, what) in [
        (
            json!({"model": "openai/fake-echo", "x-onyx-session-id": "new"}),
            "a plain model",
        ),
        (
            json!({"model": "openai/fake-echo", "x-onyx-agent-id": "main"}),
            "an agent",
        ),
    ] {
        let mut body = body;
        body["stream"] = json!(true);
        body["messages"] = hello();
        let response = onyx
            .post("/v1/chat/completions")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{what}");
        let session = session_id(&response);
        let chunks = chunks(&sse_events(response).await);
        assert!(chunks.len() > 1, "{what}: {chunks:?}");
        assert_eq!(
            chunks[0]["x_onyx"]["session_id"],
            session.as_str(),
            "{what}: {}",
            chunks[0]
        );
        assert!(
            chunks[1..]
                .iter()
                .all(|c| c["x_onyx"].get("session_id").is_none()),
            "{what}: only the first chunk: {chunks:?}"
        );
        assert!(!streamed_text(&chunks).is_empty(), "{what}");
    }
    let sent = fakes.openai.state.requests();
    assert!(sent.iter().all(|r| onyx_fields_in(r).is_empty()), "{sent:?}");
}

#[tokio::test]
async fn a_field_given_as_header_and_body_must_agree() {
    let (_fakes, onyx) = setup().await;
    let session = {
        let (status, body) = reply(onyx.post("/v1/chat/completions").json(&json!({
            "model": "onyx:main", "messages": hello(),
        })))
        .await;
        assert_eq!(status, 200, "{body}");
        body["x_onyx"]["session_id"].as_str().unwrap().to_string()
    };
    for (name, header, body_value) in [
        ("x-onyx-agent-id", "main", json!("ops")),
        ("x-onyx-session-id", session.as_str(), json!("new")),
        ("x-onyx-include-memory", "true", json!(false)),
    ] {
        let mut body = json!({"model": "onyx:main", "messages": hello()});
        body[name] = body_value.clone();
        for path in ["/v1/chat/completions", "/v1/responses"] {
            let mut body = body.clone();
            if path == "/v1/responses" {
                body.as_object_mut().unwrap().remove("messages");
                body["input"] = json!("hello there");
            }
            let (status, refused) = reply(onyx.post(path).header(name, header).json(&body)).await;
            assert_eq!(status, 400, "{name} on {path}: {refused}");
            let message = refused["error"]["message"].as_str().unwrap();
            assert!(
                message.contains("header") && message.contains("body") && message.contains(header),
                "{name} on {path}: names both: {message}"
            );
            assert_eq!(refused["error"]["param"], name);
        }
        // The same value both ways is fine.
        let same = match &body_value {
            Value::Bool(_) => "false",
            _ => body_value.as_str().unwrap(),
        };
        let (status, answer) = reply(onyx.post("/v1/chat/completions").header(name, same).json(&body)).await;
        assert_eq!(status, 200, "{name}: {answer}");
    }
    let messages_refused = reply(onyx.post("/v1/messages").header("x-onyx-agent-id", "main").json(
        &json!({"model": "onyx:main", "max_tokens": 20, "x-onyx-agent-id": "ops", "messages": hello()}),
    ))
    .await;
    assert_eq!(messages_refused.0, 400, "{}", messages_refused.1);
    assert!(messages_refused.1.to_string().contains("x-onyx-agent-id"));

    // A field of the wrong type is a 400 naming it.
    for (name, value) in [
        ("x-onyx-agent-id", json!(7)),
        ("x-onyx-session-id", json!({"id": "x"})),
        ("x-onyx-include-memory", json!("yes")),
    ] {
        let mut body = json!({"model": "onyx:main", "messages": hello()});
        body[name] = value;
        let (status, refused) = reply(onyx.post("/v1/chat/completions").json(&body)).await;
        assert_eq!(status, 400, "{name}: {refused}");
        assert_eq!(refused["error"]["param"], name, "{refused}");
    }
    let (status, refused) = reply(
        onyx.post("/v1/chat/completions")
            .header("x-onyx-include-memory", "maybe")
            .json(&json!({"model": "onyx:main", "messages": hello()})),
    )
    .await;
    assert_eq!(status, 400, "{refused}");
}

/// A chat key scoped to the agent `ops`.
async fn ops_key(onyx: &Onyx) -> String {
    let (status, created) = reply(
        onyx.post("/v1/keys")
            .json(&json!({"name": "ops bot", "agents": ["ops"]})),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    created["key"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_scoped_key_is_refused_another_agent_in_the_body_as_in_the_header() {
    let (fakes, onyx) = setup().await;
    let key = ops_key(&onyx).await;
    let chat = |body: String| {
        onyx.with_key("POST", "/v1/chat/completions", &key)
            .header("content-type", "application/json")
            .body(body)
    };
    let by_header = reply(
        onyx.with_key("POST", "/v1/chat/completions", &key)
            .header("x-onyx-agent-id", "main")
            .json(&json!({"model": "openai/fake-echo", "messages": hello()})),
    )
    .await;
    assert_eq!(by_header.0, 403, "{}", by_header.1);
    let asked_before = fakes.openai.state.requests().len();
    let messages = hello().to_string();
    for body in [
        format!(r#"{{"model":"openai/fake-echo","x-onyx-agent-id":"main","messages":{messages}}}"#),
        format!(r#"{{"model":"onyx:ops","x-onyx-agent-id":"main","messages":{messages}}}"#),
        // Escaped, the key is still the field: no way past the check.
        format!(r#"{{"model":"openai/fake-echo","x-onyx-agent\u002did":"main","messages":{messages}}}"#),
        // Given twice, the last value counts, as for every JSON field.
        format!(
            r#"{{"model":"onyx:ops","x-onyx-agent-id":"ops","x-onyx-agent-id":"main","messages":{messages}}}"#
        ),
    ] {
        let (status, refused) = reply(chat(body.clone())).await;
        assert_eq!((status, &refused), (by_header.0, &by_header.1), "{body}");
    }
    assert_eq!(
        fakes.openai.state.requests().len(),
        asked_before,
        "nothing reached the upstream"
    );

    let twice = format!(
        r#"{{"model":"openai/fake-echo","x-onyx-agent-id":"main","x-onyx-agent-id":"ops","messages":{messages}}}"#
    );
    let response = chat(twice).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let session = session_id(&response);
    assert_eq!(session_agent(&onyx, &session).await, "ops");

    // Nor may the key continue another agent's session named in the body.
    let (status, theirs) = reply(
        onyx.post("/v1/chat/completions")
            .json(&json!({"model": "onyx:main", "messages": hello()})),
    )
    .await;
    assert_eq!(status, 200, "{theirs}");
    let theirs = theirs["x_onyx"]["session_id"].as_str().unwrap();
    let (status, refused) = reply(
        onyx.with_key("POST", "/v1/chat/completions", &key)
            .json(&json!({"model": "onyx:ops", "x-onyx-session-id": theirs, "messages": hello()})),
    )
    .await;
    assert_eq!(status, 403, "{refused}");
}

#[tokio::test]
async fn include_memory_in_the_body_puts_relevant_memory_in_the_context() {
    let (fakes, onyx) = setup().await;
    let (status, body) = reply(
        onyx.put("/v1/memory/files/main/MEMORY.md")
            .body("# Memory\n\nLikes green tea in the morning.\n"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let last_user = |fakes: &Fakes| {
        let sent = fakes.openai.state.last_request().unwrap();
        let user = sent["messages"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .cloned()
            .unwrap();
        user["content"].as_str().unwrap().to_string()
    };
    for (include, expected) in [(false, false), (true, true)] {
        let (status, body) = reply(onyx.post("/v1/chat/completions").json(&json!({
            "model": "onyx:main", "x-onyx-include-memory": include,
            "messages": [{"role": "user", "content": "what do I like to drink? tea"}],
        })))
        .await;
        assert_eq!(status, 200, "{body}");
        let context = last_user(&fakes);
        assert_eq!(
            context.contains("## Relevant memory") && context.contains("main/MEMORY.md:"),
            expected,
            "include {include}: {context}"
        );
    }
}

#[tokio::test]
async fn responses_and_messages_take_the_fields_and_carry_the_session_id() {
    let (fakes, onyx) = setup().await;
    let (status, response) = reply(onyx.post("/v1/responses").json(&json!({
        "model": "openai/fake-echo", "x-onyx-agent-id": "ops", "input": "hello there",
    })))
    .await;
    assert_eq!(status, 200, "{response}");
    let session = response["x_onyx"]["session_id"].as_str().unwrap();
    assert_eq!(session_agent(&onyx, session).await, "ops");

    let streamed = onyx
        .post("/v1/responses")
        .json(
            &json!({"model": "openai/fake-echo", "x-onyx-session-id": "new", "input": "hi", "stream": true}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(streamed.status(), 200);
    let session = session_id(&streamed);
    let events = sse_events(streamed).await;
    let created: Value = serde_json::from_str(&events[0]).unwrap();
    assert_eq!(created["type"], "response.created", "{created}");
    assert_eq!(
        created["response"]["x_onyx"]["session_id"],
        session.as_str(),
        "{created}"
    );

    let anthropic = |body: Value| {
        onyx.anonymous("POST", "/v1/messages")
            .header("x-api-key", ONYX_KEY)
            .header("anthropic-version", "2023-06-01")
            .json(&body)
    };
    let (status, message) = reply(anthropic(json!({
        "model": "openai/fake-echo", "max_tokens": 20, "x-onyx-session-id": "new", "messages": hello(),
    })))
    .await;
    assert_eq!(status, 200, "{message}");
    assert_eq!(message["type"], "message", "{message}");
    assert!(
        message["x_onyx"]["session_id"]
            .as_str()
            .is_some_and(|s| !s.is_empty()),
        "{message}"
    );

    let streamed = anthropic(json!({
        "model": "onyx:main", "max_tokens": 20, "stream": true, "messages": hello(),
    }))
    .send()
    .await
    .unwrap();
    assert_eq!(streamed.status(), 200);
    let session = session_id(&streamed);
    let start: Value = serde_json::from_str(&sse_events(streamed).await[0]).unwrap();
    assert_eq!(start["type"], "message_start", "{start}");
    assert_eq!(
        start["message"]["x_onyx"]["session_id"],
        session.as_str(),
        "{start}"
    );

    // Passed through to an Anthropic upstream, the request has no Onyx field left.
    let (status, passed) = reply(anthropic(json!({
        "model": "anthropic/fake-echo", "max_tokens": 20, "x-onyx-include-memory": false, "messages": hello(),
    })))
    .await;
    assert_eq!(status, 200, "{passed}");
    assert!(passed.get("x_onyx").is_none(), "no session, no x_onyx: {passed}");
    let sent = fakes.anthropic.state.last_request().unwrap();
    assert_eq!(onyx_fields_in(&sent), Vec::<String>::new(), "{sent}");
    assert!(
        fakes
            .openai
            .state
            .requests()
            .iter()
            .all(|r| onyx_fields_in(r).is_empty())
    );
}
