//! Every bad input gets a clear OpenAI-shaped 4xx: malformed JSON, wrong types,
//! missing fields, oversized bodies, bad keys, unknown routes and methods.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use serde_json::{Value, json};

async fn setup() -> (Fakes, Onyx) {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&fakes.config()), &[]).await;
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

async fn raw_chat(onyx: &Onyx, body: &'static str) -> (u16, Value) {
    let response = onyx
        .post("/v1/chat/completions")
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

#[tokio::test]
async fn malformed_json_is_a_400_that_says_where() {
    let (_fakes, onyx) = setup().await;
    let (status, body) = raw_chat(&onyx, r#"{"model": "openai/fake-echo", "messages": [}"#).await;
    assert_eq!(status, 400);
    assert_openai_error(&body);
    assert_eq!(body["error"]["code"], "invalid_json");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("line 1"),
        "{body}"
    );
    for (payload, why) in [("", "empty"), ("[1,2]", "array"), ("\"text\"", "string")] {
        let response = onyx
            .post("/v1/chat/completions")
            .body(payload)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{why}");
        assert_openai_error(&response.json().await.unwrap());
    }
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
        let (status, body) = onyx.chat(request.clone()).await;
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
    let response = onyx
        .post("/v1/embeddings")
        .json(&json!({"model": "openai/fake-embed", "input": 5}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["param"], "input");
}

#[tokio::test]
async fn translation_errors_are_400s_naming_the_field() {
    let (_fakes, onyx) = setup().await;
    let (status, body) = onyx
        .chat(json!({"model": "anthropic/fake-echo", "messages": [
            {"role": "user", "content": "x"},
            {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{broken"}}]},
        ]}))
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("messages[1].tool_calls[0].function.arguments"),
        "{body}"
    );
    let (status, _) = onyx
        .chat(json!({"model": "ollama/fake-echo", "n": 3, "messages": [{"role": "user", "content": "x"}]}))
        .await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn bodies_over_the_limit_are_413() {
    let (fakes, onyx) = setup().await;
    let big = "a".repeat(70_000);
    let (status, body) = onyx
        .chat(json!({"model": "openai/fake-echo", "messages": [{"role": "user", "content": big}]}))
        .await;
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
    let url = &onyx.url;
    let client = &onyx.client;
    let health = client.get(format!("{url}/health")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    for (method, path) in [
        ("POST", "/v1/chat/completions"),
        ("GET", "/v1/models"),
        ("POST", "/v1/embeddings"),
        ("GET", "/metrics"),
    ] {
        let request = client
            .request(method.parse().unwrap(), format!("{url}{path}"))
            .json(&json!({}));
        let response = request.try_clone().unwrap().send().await.unwrap();
        assert_eq!(response.status(), 401, "{path} without key");
        let body: Value = response.json().await.unwrap();
        assert_openai_error(&body);
        assert_eq!(body["error"]["code"], "invalid_api_key");
        let response = request
            .bearer_auth("onyx_sk_wrong_key_0000000000")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 401, "{path} with a wrong key");
    }
    assert!(fakes.openai.state.requests().is_empty());
}

#[tokio::test]
async fn unknown_routes_and_methods_answer_in_openai_shape() {
    let (_fakes, onyx) = setup().await;
    let response = onyx.get("/v1/nope").send().await.unwrap();
    assert_eq!(response.status(), 404);
    assert_openai_error(&response.json().await.unwrap());
    let response = onyx.get("/v1/chat/completions").send().await.unwrap();
    assert_eq!(response.status(), 405);
    assert_openai_error(&response.json().await.unwrap());
}
