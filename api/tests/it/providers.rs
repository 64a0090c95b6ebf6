//! Chat, streaming, tools and embeddings through the real binary to each fake
//! upstream protocol: OpenAI-compatible, Anthropic and Ollama.

use crate::harness::*;
use serde_json::{Value, json};

async fn setup() -> (Fakes, Onyx) {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&fakes.config()), &[]).await;
    (fakes, onyx)
}

const PROVIDERS: [&str; 3] = ["openai/fake-echo", "anthropic/fake-echo", "ollama/fake-echo"];

#[tokio::test]
async fn plain_chat_reaches_every_provider() {
    let (_fakes, onyx) = setup().await;
    for model in PROVIDERS {
        let (status, body) = onyx
            .chat(json!({"model": model, "messages": [
                {"role": "system", "content": "be terse"},
                {"role": "user", "content": "hello there"}
            ]}))
            .await;
        assert_eq!(status, 200, "{model}: {body}");
        assert_eq!(body["object"], "chat.completion", "{model}");
        assert_eq!(body["choices"][0]["message"]["role"], "assistant", "{model}");
        assert_eq!(
            body["choices"][0]["message"]["content"], "echo: hello there",
            "{model}"
        );
        assert_eq!(body["choices"][0]["finish_reason"], "stop", "{model}");
        assert!(
            body["usage"]["prompt_tokens"].as_u64().unwrap() >= 2,
            "{model}: {body}"
        );
        assert_eq!(body["usage"]["completion_tokens"], 3, "{model}: {body}");
    }
}

#[tokio::test]
async fn streaming_from_every_provider_yields_openai_chunks_and_usage() {
    let (_fakes, onyx) = setup().await;
    for model in PROVIDERS {
        let response = onyx
            .post("/v1/chat/completions")
            .json(
                &json!({"model": model, "stream": true, "stream_options": {"include_usage": true},
                "messages": [{"role": "user", "content": "stream me please"}]}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{model}");
        assert_eq!(response.headers()["content-type"], "text/event-stream", "{model}");
        let events = sse_events(response).await;
        assert_eq!(
            events.last().map(String::as_str),
            Some("[DONE]"),
            "{model}: {events:?}"
        );
        let chunks = chunks(&events);
        assert!(
            chunks.iter().all(|c| c["object"] == "chat.completion.chunk"),
            "{model}"
        );
        assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant", "{model}");
        assert_eq!(streamed_text(&chunks), "echo: stream me please", "{model}");
        let finish: Vec<&Value> = chunks
            .iter()
            .map(|c| &c["choices"][0]["finish_reason"])
            .filter(|f| !f.is_null())
            .collect();
        assert_eq!(finish, vec![&json!("stop")], "{model}");
        let usage = &chunks.last().unwrap()["usage"];
        assert_eq!(usage["completion_tokens"], 4, "{model}: {usage}");
        assert_eq!(chunks.last().unwrap()["choices"], json!([]), "{model}");
    }
}

#[tokio::test]
async fn tool_calls_round_trip_through_every_provider() {
    let (_fakes, onyx) = setup().await;
    for model in ["openai/fake-tools", "anthropic/fake-tools", "ollama/fake-tools"] {
        let (status, first) = onyx
            .chat(
                json!({"model": model, "tools": weather_tool(), "tool_choice": "auto",
                "messages": [{"role": "user", "content": "paris weather"}]}),
            )
            .await;
        assert_eq!(status, 200, "{model}: {first}");
        assert_eq!(
            first["choices"][0]["finish_reason"], "tool_calls",
            "{model}: {first}"
        );
        let call = &first["choices"][0]["message"]["tool_calls"][0];
        assert_eq!(call["type"], "function");
        assert_eq!(call["function"]["name"], "lookup");
        let args: Value = serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(args, json!({"query": "paris weather"}), "{model}");
        let id = call["id"].as_str().unwrap();
        assert!(!id.is_empty());

        let (status, second) = onyx
            .chat(json!({"model": model, "tools": weather_tool(), "messages": [
                {"role": "user", "content": "paris weather"},
                {"role": "assistant", "content": null, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": id, "content": "sunny 21C"}
            ]}))
            .await;
        assert_eq!(status, 200, "{model}: {second}");
        assert_eq!(
            second["choices"][0]["message"]["content"], "tool said: sunny 21C",
            "{model}"
        );
    }
}

#[tokio::test]
async fn streamed_tool_calls_arrive_as_deltas() {
    let (_fakes, onyx) = setup().await;
    for model in ["openai/fake-tools", "anthropic/fake-tools", "ollama/fake-tools"] {
        let response = onyx
            .post("/v1/chat/completions")
            .json(&json!({"model": model, "stream": true, "tools": weather_tool(),
                "messages": [{"role": "user", "content": "rome"}]}))
            .send()
            .await
            .unwrap();
        let chunks = chunks(&sse_events(response).await);
        let calls = streamed_tool_calls(&chunks);
        assert_eq!(calls.len(), 1, "{model}: {chunks:?}");
        assert!(!calls[0].0.is_empty(), "{model}: tool call id");
        assert_eq!(calls[0].1, "lookup");
        assert_eq!(
            serde_json::from_str::<Value>(&calls[0].2).unwrap(),
            json!({"query": "rome"}),
            "{model}"
        );
        let finish = chunks
            .iter()
            .find_map(|c| c["choices"][0]["finish_reason"].as_str());
        assert_eq!(finish, Some("tool_calls"), "{model}");
    }
}

#[tokio::test]
async fn anthropic_receives_a_faithful_translation() {
    let (fakes, onyx) = setup().await;
    let (status, _) = onyx
        .chat(json!({"model": "anthropic/fake-echo", "max_tokens": 77, "temperature": 1.6, "stop": ["END"], "user": "u-1",
            "messages": [
                {"role": "system", "content": "You are helpful."},
                {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
            ]}))
        .await;
    assert_eq!(status, 200);
    let sent = fakes.anthropic.state.last_request().unwrap();
    assert_eq!(sent["model"], "fake-echo");
    assert_eq!(sent["system"], "You are helpful.");
    assert_eq!(sent["max_tokens"], 77);
    assert_eq!(sent["temperature"], 1.0);
    assert_eq!(sent["stop_sequences"], json!(["END"]));
    assert_eq!(sent["metadata"]["user_id"], "u-1");
    assert_eq!(
        sent["messages"][0]["content"][1]["source"],
        json!({"type": "base64", "media_type": "image/png", "data": "AAAA"})
    );
}

#[tokio::test]
async fn openai_compatible_upstreams_get_unknown_fields_untouched() {
    let (fakes, onyx) = setup().await;
    let request = json!({
        "model": "openai/fake-echo",
        "messages": [{"role": "user", "content": "hi"}],
        "n": 1, "stop": ["x"], "logprobs": true, "top_logprobs": 2,
        "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": {"type": "object"}}},
        "reasoning_effort": "low",
        "x_vendor_extension": {"nested": [1, 2.5, "three", null]},
        "seed": 42
    });
    let (status, _) = onyx.chat(request.clone()).await;
    assert_eq!(status, 200);
    let mut expected = request;
    expected["model"] = json!("fake-echo");
    assert_eq!(fakes.openai.state.last_request().unwrap(), expected);
}

#[tokio::test]
async fn embeddings_work_for_openai_and_ollama_in_both_encodings() {
    let (_fakes, onyx) = setup().await;
    for model in ["openai/fake-embed", "ollama/fake-embed"] {
        let (status, body) = reply(
            onyx.post("/v1/embeddings")
                .json(&json!({"model": model, "input": ["red apple", "green apple"]})),
        )
        .await;
        assert_eq!(status, 200, "{model}");
        assert_eq!(body["object"], "list");
        let first = body["data"][0]["embedding"].as_array().unwrap();
        assert_eq!(first.len(), 16, "{model}");
        assert_eq!(body["data"][1]["index"], 1);

        let (_, body) = reply(
            onyx.post("/v1/embeddings")
                .json(&json!({"model": model, "input": "red apple", "encoding_format": "base64"})),
        )
        .await;
        let encoded = body["data"][0]["embedding"]
            .as_str()
            .unwrap_or_else(|| panic!("{model}: {body}"));
        use base64::Engine;
        let bytes = base64::engine::general_purpose::STANDARD.decode(encoded).unwrap();
        let floats: Vec<f32> = bytes
            .chunks(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let expected: Vec<f32> = first.iter().map(|v| v.as_f64().unwrap() as f32).collect();
        assert_eq!(floats, expected, "{model}");
    }
    let (status, _) = reply(
        onyx.post("/v1/embeddings")
            .json(&json!({"model": "anthropic/x", "input": "a"})),
    )
    .await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn models_list_every_provider_and_alias() {
    let (_fakes, onyx) = setup().await;
    let body: Value = onyx.get_json("/v1/models").await;
    assert_eq!(body["object"], "list");
    let ids = ids(&body);
    for id in [
        "openai/fake-echo",
        "openai/fake-embed",
        "anthropic/fake-tools",
        "ollama/fake-echo:latest",
        "resilient",
        "fast",
    ] {
        assert!(ids.iter().any(|listed| listed == id), "{id} missing from {ids:?}");
    }
    assert!(
        body["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["object"] == "model")
    );
}
