//! Every bad input gets a clear OpenAI-shaped 4xx: malformed JSON, wrong types,
//! missing fields, oversized bodies, bad keys, unknown models, routes and
//! methods. In-process: the real router, no `onyx` process.

use axum::body::Body;
use http::Method;
use serde_json::{Value, json};

use crate::harness::inprocess::{InProcess, Reply, request};
use crate::harness::*;

async fn setup() -> (Fakes, InProcess) {
    let fakes = Fakes::start().await;
    let onyx = InProcess::start(TestConfig::new(&fakes)).await;
    (fakes, onyx)
}

fn assert_openai_error(body: &Value) {
    let error = &body["error"];
    assert!(error["message"].is_string(), "{body}");
    assert!(error["type"].is_string(), "{body}");
    assert!(
        error.get("param").is_some() && error.get("code").is_some(),
        "{body}"
    );
}

/// `POST /v1/chat/completions` with this body, and a JSON content type if `json`.
async fn raw_chat(onyx: &InProcess, body: &'static str, json: bool) -> (u16, Value) {
    let mut builder = request(Method::POST, "/v1/chat/completions", Some(ONYX_KEY));
    if json {
        builder = builder.header("content-type", "application/json");
    }
    let reply = onyx.send(builder.body(Body::from(body)).unwrap()).await;
    (reply.status, reply.body)
}

#[tokio::test]
async fn malformed_json_is_a_400_that_says_where() {
    let (_fakes, onyx) = setup().await;
    let (status, body) = raw_chat(&onyx, r#"{"model": "openai/fake-echo", "messages": [}"#, true).await;
    assert_eq!(status, 400);
    assert_openai_error(&body);
    assert_eq!(body["error"]["code"], "invalid_json");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("line 1"),
        "{body}"
    );
    for (payload, json, why) in [
        ("", false, "empty"),
        ("[1,2]", true, "array"),
        ("\"text\"", true, "string"),
    ] {
        let (status, body) = raw_chat(&onyx, payload, json).await;
        assert_eq!(status, 400, "{why}");
        assert_openai_error(&body);
    }
    // A body not sent as JSON (a form post, text/plain) is a 415.
    let (status, body) = raw_chat(&onyx, r#"{"model": "openai/fake-echo", "messages": []}"#, false).await;
    assert_eq!(status, 415);
    assert_openai_error(&body);
    assert_eq!(body["error"]["code"], "unsupported_media_type");
}

#[tokio::test]
async fn wrong_types_and_missing_fields_name_the_field() {
    let (_fakes, onyx) = setup().await;
    let cases = [
        (json!({"messages": [{"role": "user", "content": "x"}]}), "model"),
        (json!({"model": 7, "messages": []}), "model"),
        (json!({"model": "openai/fake-echo"}), "messages"),
        (json!({"model": "openai/fake-echo", "messages": "hi"}), "messages"),
        (
            json!({"model": "openai/fake-echo", "messages": [{"role": "wizard", "content": "x"}]}),
            "messages[0].role",
        ),
        (
            json!({"model": "openai/fake-echo", "messages": [{"role": "user", "content": "x"}], "temperature": "hot"}),
            "temperature",
        ),
        (
            json!({"model": "openai/fake-echo", "messages": [{"role": "user", "content": "x"}], "stream": "yes"}),
            "stream",
        ),
        (json!({"model": "openai/fake-echo", "messages": []}), "messages"),
    ];
    for (request, field) in cases {
        let reply = onyx.chat(request.clone()).await;
        let (status, body) = (reply.status, reply.body);
        assert_eq!(status, 400, "{request}: {body}");
        assert_openai_error(&body);
        assert_eq!(body["error"]["param"], field, "{request}: {body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains(field.split('[').next().unwrap()),
            "{body}"
        );
    }
    let reply = onyx
        .call(
            Method::POST,
            "/v1/embeddings",
            &json!({"model": "openai/fake-embed", "input": 5}),
        )
        .await;
    assert_eq!(reply.status, 400);
    assert_eq!(reply.body["error"]["param"], "input");
}

#[tokio::test]
async fn translation_errors_are_400s_naming_the_field() {
    let (_fakes, onyx) = setup().await;
    let reply = onyx
        .chat(json!({"model": "anthropic/fake-echo", "messages": [
            {"role": "user", "content": "x"},
            {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{broken"}}]},
        ]}))
        .await;
    let (status, body) = (reply.status, reply.body);
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("messages[1].tool_calls[0].function.arguments"),
        "{body}"
    );
    let reply = onyx
        .chat(json!({"model": "ollama/fake-echo", "n": 3, "messages": [{"role": "user", "content": "x"}]}))
        .await;
    assert_eq!(reply.status, 400);
}

#[tokio::test]
async fn bodies_over_the_limit_are_413() {
    let (fakes, onyx) = setup().await;
    let big = "a".repeat(70_000);
    let reply = onyx
        .chat(json!({"model": "openai/fake-echo", "messages": [{"role": "user", "content": big}]}))
        .await;
    let (status, body) = (reply.status, reply.body);
    assert_eq!(status, 413, "{body}");
    assert_openai_error(&body);
    assert_eq!(body["error"]["code"], "request_too_large");
    assert!(body["error"]["message"].as_str().unwrap().contains("65536"));
    assert!(
        fakes.openai.state.requests().is_empty(),
        "nothing reached the upstream"
    );
}

#[tokio::test]
async fn every_route_but_health_needs_a_valid_key() {
    let (fakes, onyx) = setup().await;
    let health = onyx
        .send(request(Method::GET, "/health", None).body(Body::empty()).unwrap())
        .await;
    assert_eq!(health.status, 200);
    for (method, path) in [
        (Method::POST, "/v1/chat/completions"),
        (Method::GET, "/v1/models"),
        (Method::POST, "/v1/embeddings"),
        (Method::GET, "/metrics"),
    ] {
        let with_key = |key: Option<&str>| {
            request(method.clone(), path, key)
                .header("content-type", "application/json")
                .body(Body::from("{}"))
                .unwrap()
        };
        let reply = onyx.send(with_key(None)).await;
        assert_eq!(reply.status, 401, "{path} without key");
        assert_openai_error(&reply.body);
        assert_eq!(reply.body["error"]["code"], "invalid_api_key");
        let reply = onyx.send(with_key(Some("onyx_sk_wrong_key_0000000000"))).await;
        assert_eq!(reply.status, 401, "{path} with a wrong key");
    }
    assert!(fakes.openai.state.requests().is_empty());
}

#[tokio::test]
async fn unknown_routes_and_methods_answer_in_openai_shape() {
    let (_fakes, onyx) = setup().await;
    let get = |path: &str| {
        request(Method::GET, path, Some(ONYX_KEY))
            .body(Body::empty())
            .unwrap()
    };
    let reply = onyx.send(get("/v1/nope")).await;
    assert_eq!(reply.status, 404);
    assert_openai_error(&reply.body);
    let reply = onyx.send(get("/v1/chat/completions")).await;
    assert_eq!(reply.status, 405);
    assert_openai_error(&reply.body);
}

#[tokio::test]
async fn unknown_providers_and_models_are_404_model_not_found() {
    let (_fakes, onyx) = setup().await;
    let user = json!([{"role": "user", "content": "x"}]);
    for model in [
        "nope/gpt-4o",
        "gpt-4o",
        "openai/",
        "openai/does-not-exist",
        "anthropic/does-not-exist",
        "ollama/does-not-exist",
    ] {
        let Reply { status, body } = onyx.chat(json!({"model": model, "messages": user})).await;
        assert_eq!(status, 404, "{model}: {body}");
        assert_eq!(body["error"]["code"], "model_not_found", "{model}: {body}");
        assert!(body["error"]["message"].is_string());
    }
    let body = onyx
        .chat(json!({"model": "nope/gpt-4o", "messages": user}))
        .await
        .body;
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("openai, anthropic, ollama")
            || body["error"]["message"].as_str().unwrap().contains("anthropic")
    );
}

/// Found by the fuzzer (`fuzz`): each was a 5xx or an error mid-stream.
#[tokio::test]
async fn fuzz_findings_are_clean_4xx() {
    let fakes = Fakes::start().await;
    let config =
        TestConfig::new(&fakes).agent(json!({"id": "main", "default": true, "model": "anthropic/fake-echo"}));
    let onyx = InProcess::start(config).await;
    // An agent's turn ending with an assistant message: refused before the
    // run starts (streaming, it used to fail inside a 200 stream).
    for stream in [false, true] {
        let reply = onyx
            .chat(json!({"model": "onyx:main", "stream": stream, "messages": [{"role": "assistant", "content": " "}]}))
            .await;
        assert_eq!(reply.status, 400, "{}", reply.body);
        assert_openai_error(&reply.body);
        assert_eq!(reply.body["error"]["param"], "messages");
    }
    // An empty previous_response_id was a database error (503).
    let reply = onyx
        .call(
            Method::POST,
            "/v1/responses",
            &json!({"model": "openai/fake-echo", "input": "hi", "previous_response_id": ""}),
        )
        .await;
    assert!(
        (400..500).contains(&reply.status),
        "{}: {}",
        reply.status,
        reply.body
    );
    assert_openai_error(&reply.body);
    // Changing a configured agent left a row that broke every agent lookup (503).
    let reply = onyx
        .call(Method::PATCH, "/v1/agents/main", &json!({"name": "Renamed"}))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let reply = onyx.call(Method::GET, "/v1/agents", &Value::Null).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
}
