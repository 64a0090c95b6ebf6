//! Azure OpenAI against the fake resource (deployment URLs, `api-version`,
//! the `api-key` header): models mapped to deployments, streams with usage,
//! streamed tool calls, embeddings, the model list, and errors — Azure's
//! own 401 shape, upstream statuses, a model that is no deployment name, and
//! config that is refused naming its field. (The OpenAI SDK suites cover
//! chat, streaming and tool calls through the official clients.)

use onyx_test_fakes::DEFAULT_KEY;
use serde_json::{Value, json};

use crate::harness::*;

fn user(text: &str) -> Value {
    json!([{"role": "user", "content": text}])
}

fn azure(fakes: &Fakes, key: &str) -> Value {
    json!({
        "type": "azure", "baseUrl": fakes.openai.url(), "apiKey": key, "apiVersion": "2024-10-21",
        "maxRetries": 0, "deployments": {"gpt-4o-mini": "fake-echo", "embedder": "fake-embed"},
    })
}

#[tokio::test]
async fn azure_deployments_answer_chat_streams_tools_and_embeddings() {
    let fakes = Fakes::start().await;
    let config = TestConfig::new(&fakes)
        .set("providers.azure", azure(&fakes, DEFAULT_KEY))
        .build();
    let onyx = Onyx::start(Some(&config), &[("FAKE_KEY", DEFAULT_KEY)]).await;

    let (status, body) = onyx
        .chat(json!({"model": "azure/gpt-4o-mini", "messages": user("hello azure")}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "echo: hello azure");
    assert_eq!(body["usage"]["completion_tokens"], 3);
    let sent = fakes.openai.state.last_request().unwrap();
    assert_eq!(sent["model"], "fake-echo", "the mapped deployment was called");

    let response = onyx
        .post("/v1/chat/completions")
        .json(
            &json!({"model": "azure/gpt-4o-mini", "messages": user("stream me"), "stream": true,
            "stream_options": {"include_usage": true}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let chunks = chunks(&sse_events(response).await);
    assert_eq!(streamed_text(&chunks), "echo: stream me");
    assert_eq!(chunks.last().unwrap()["usage"]["completion_tokens"], 3);
    let sent = fakes.openai.state.last_request().unwrap();
    assert_eq!(sent["stream_options"]["include_usage"], true);

    // Unmapped: the deployment of the same name.
    let response = onyx
        .post("/v1/chat/completions")
        .json(
            &json!({"model": "azure/fake-tools", "messages": user("lisbon"), "tools": weather_tool(),
            "tool_choice": "auto", "stream": true}),
        )
        .send()
        .await
        .unwrap();
    let calls = streamed_tool_calls(&chunks_of(response).await);
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].1, "lookup");
    assert_eq!(
        serde_json::from_str::<Value>(&calls[0].2).unwrap(),
        json!({"query": "lisbon"})
    );

    let (status, body) = reply(
        onyx.post("/v1/embeddings")
            .json(&json!({"model": "azure/embedder", "input": ["a b", "c"]})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"][1]["embedding"].as_array().unwrap().len(), 16);

    let models = ids(&onyx.get_json("/v1/models").await);
    for id in ["azure/gpt-4o-mini", "azure/embedder", "azure/fake-echo"] {
        assert!(models.iter().any(|m| m == id), "{id} in {models:?}");
    }
    let health = onyx.health().await;
    assert_eq!(dependency(&health, "azure")["status"], "up", "{health}");
    assert_eq!(dependency(&health, "azure")["kind"], "provider:azure");
}

async fn chunks_of(response: reqwest::Response) -> Vec<Value> {
    assert_eq!(response.status(), 200);
    chunks(&sse_events(response).await)
}

#[tokio::test]
async fn azure_errors_keep_their_status_and_bad_config_names_the_field() {
    let fakes = Fakes::start().await;
    let config = TestConfig::new(&fakes)
        .set("providers.azure", azure(&fakes, DEFAULT_KEY))
        .set("providers.wrongkey", azure(&fakes, "not-the-key"))
        .build();
    let onyx = Onyx::start(Some(&config), &[("FAKE_KEY", DEFAULT_KEY)]).await;

    let (status, body) = onyx
        .chat(json!({"model": "wrongkey/gpt-4o-mini", "messages": user("x")}))
        .await;
    assert_eq!(status, 401, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Access denied"),
        "{body}"
    );
    let (status, body) = onyx
        .chat(json!({"model": "azure/fake-429", "messages": user("x")}))
        .await;
    assert_eq!(status, 429, "{body}");
    let (status, body) = onyx
        .chat(json!({"model": "azure/nope", "messages": user("x")}))
        .await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["code"], "model_not_found");
    let (status, body) = onyx
        .chat(json!({"model": "azure/a$b", "messages": user("x")}))
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"].as_str().unwrap().starts_with("model: "),
        "{body}"
    );

    for (spec, param) in [
        (json!({"type": "azure"}), "baseUrl"),
        (
            json!({"type": "openai", "deployments": {"a": "b"}}),
            "deployments",
        ),
        (
            json!({"type": "azure", "baseUrl": "https://r.openai.azure.com", "deployments": {"a": "b/c"}}),
            "deployments.a",
        ),
    ] {
        let mut spec = spec;
        spec["name"] = json!("az2");
        let (status, body) = reply(onyx.post("/v1/providers").json(&spec)).await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(body["error"]["param"], param, "{body}");
    }
    let mut spec = azure(&fakes, DEFAULT_KEY);
    spec["name"] = json!("az2");
    let (status, body) = reply(onyx.post("/v1/providers").json(&spec)).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["deployments"]["gpt-4o-mini"], "fake-echo", "{body}");
    let (status, body) = onyx
        .chat(json!({"model": "az2/gpt-4o-mini", "messages": user("live")}))
        .await;
    assert_eq!(status, 200, "{body}");
}
