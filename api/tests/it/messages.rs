//! The Anthropic Messages API (`/v1/messages`, `/v1/messages/count_tokens`)
//! against the fake upstreams: errors in Anthropic's shape whoever raises
//! them (auth, body limit, JSON, validation, routing), requests to Anthropic
//! providers passed through with prompt-caching marks, thinking and betas
//! intact (JSON and streams, usage counted), and requests for OpenAI-style
//! models translated both ways, streamed tool use included.

use crate::harness::*;
use serde_json::{Value, json};

async fn start() -> (Fakes, Onyx) {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&fakes.config()), &[]).await;
    (fakes, onyx)
}

/// `POST path` with the key as Anthropic clients send it.
fn anthropic(onyx: &Onyx, path: &str) -> reqwest::RequestBuilder {
    onyx.anonymous("POST", path)
        .header("x-api-key", ONYX_KEY)
        .header("anthropic-version", "2023-06-01")
}

fn user(text: &str) -> Value {
    json!([{"role": "user", "content": text}])
}

/// `(event name, data)` of each server-sent event.
async fn events(response: reqwest::Response) -> Vec<(String, Value)> {
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let text = response.text().await.unwrap();
    text.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|event| {
            let name = event.lines().find_map(|l| l.strip_prefix("event: ")).unwrap();
            let data = event.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
            let data: Value = serde_json::from_str(data).unwrap();
            assert_eq!(data["type"], name, "the event is named by its type");
            (name.to_string(), data)
        })
        .collect()
}

fn assert_error(status: u16, body: &Value, want_status: u16, kind: &str, mentions: &str) {
    assert_eq!(status, want_status, "{body}");
    assert_eq!(body["type"], "error", "{body}");
    assert_eq!(body["error"]["type"], kind, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(mentions),
        "{message:?} should mention {mentions:?}"
    );
    assert_eq!(
        body["error"].as_object().unwrap().len(),
        2,
        "only type and message: {body}"
    );
}

#[tokio::test]
async fn errors_are_in_anthropic_shape_whoever_raises_them() {
    let (_fakes, onyx) = start().await;
    let (status, body) = reply(
        anthropic(&onyx, "/v1/messages").json(&json!({"model": "openai/fake-echo", "messages": user("hi")})),
    )
    .await;
    assert_error(status, &body, 400, "invalid_request_error", "max_tokens");

    let malformed = json!({"model": "openai/fake-echo", "max_tokens": 10, "messages": [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": [{"text": "no type"}]}
    ]});
    let (status, body) = reply(anthropic(&onyx, "/v1/messages").json(&malformed)).await;
    assert_error(
        status,
        &body,
        400,
        "invalid_request_error",
        "messages.1.content.0.type",
    );

    let server_tool = json!({"model": "openai/fake-echo", "max_tokens": 10, "messages": user("hi"),
        "tools": [{"type": "web_search_20250305", "name": "web_search"}]});
    let (status, body) = reply(anthropic(&onyx, "/v1/messages").json(&server_tool)).await;
    assert_error(status, &body, 400, "invalid_request_error", "tools.0.type");

    let unknown = json!({"model": "nowhere/model", "max_tokens": 10, "messages": user("hi")});
    let (status, body) = reply(anthropic(&onyx, "/v1/messages").json(&unknown)).await;
    assert_error(status, &body, 404, "not_found_error", "nowhere");

    // The upstream's own 404 for a model it does not have, passed through.
    let missing = json!({"model": "anthropic/claude-none", "max_tokens": 10, "messages": user("hi")});
    let (status, body) = reply(anthropic(&onyx, "/v1/messages").json(&missing)).await;
    assert_error(status, &body, 404, "not_found_error", "claude-none");

    let bad_key = onyx
        .anonymous("POST", "/v1/messages")
        .header("x-api-key", "onyx_sk_wrong")
        .json(&json!({"model": "openai/fake-echo", "max_tokens": 10, "messages": user("hi")}));
    let (status, body) = reply(bad_key).await;
    assert_error(status, &body, 401, "authentication_error", "invalid API key");
    let (status, body) = reply(
        onyx.anonymous("POST", "/v1/messages/count_tokens")
            .json(&json!({})),
    )
    .await;
    assert_error(status, &body, 401, "authentication_error", "x-api-key");

    let big = "word ".repeat(20_000);
    let (status, body) = reply(
        anthropic(&onyx, "/v1/messages")
            .json(&json!({"model": "openai/fake-echo", "max_tokens": 10, "messages": user(&big)})),
    )
    .await;
    assert_error(status, &body, 413, "request_too_large", "65536");

    let (status, body) = reply(
        anthropic(&onyx, "/v1/messages")
            .header("content-type", "application/json")
            .body("{not json"),
    )
    .await;
    assert_error(status, &body, 400, "invalid_request_error", "not valid JSON");

    let (status, body) = reply(
        onyx.anonymous("GET", "/v1/messages")
            .header("x-api-key", ONYX_KEY),
    )
    .await;
    assert_error(status, &body, 405, "invalid_request_error", "method not allowed");

    // Other routes keep OpenAI's shape, and take x-api-key too.
    let (status, body) = reply(
        onyx.anonymous("GET", "/v1/sessions/none")
            .header("x-api-key", ONYX_KEY),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "invalid_session_id", "{body}");
}

#[tokio::test]
async fn anthropic_models_get_the_request_as_it_is() {
    let (fakes, onyx) = start().await;
    let request = json!({
        "model": "anthropic/fake-echo", "max_tokens": 50,
        "system": [{"type": "text", "text": "You are terse and precise.", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "remember this", "cache_control": {"type": "ephemeral", "ttl": "5m"}}]}],
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "metadata": {"user_id": "u-7"},
    });
    let response = anthropic(&onyx, "/v1/messages")
        .header("anthropic-beta", "prompt-caching-2024-07-31")
        .json(&request)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let message: Value = response.json().await.unwrap();
    assert_eq!(message["type"], "message");
    assert_eq!(message["content"][0]["type"], "thinking");
    assert_eq!(message["content"][0]["signature"], "sig_fake");
    assert_eq!(
        message["content"][1],
        json!({"type": "text", "text": "echo: remember this"})
    );
    assert_eq!(message["usage"]["cache_creation_input_tokens"], 7, "{message}");

    let sent = fakes.anthropic.state.last_request().unwrap();
    let mut expected = request.clone();
    expected["model"] = json!("fake-echo");
    expected["_fake_headers"] = json!({"anthropic-beta": "prompt-caching-2024-07-31"});
    assert_eq!(sent, expected, "only the model is rewritten");

    // The same prefix again: a cache read, counted in /metrics.
    let again = anthropic(&onyx, "/v1/messages")
        .json(&request)
        .send()
        .await
        .unwrap();
    let again: Value = again.json().await.unwrap();
    assert_eq!(again["usage"]["cache_read_input_tokens"], 7, "{again}");
    let metrics = onyx.get("/metrics").send().await.unwrap().text().await.unwrap();
    let cached = metrics
        .lines()
        .find(|l| l.starts_with("onyx_prompt_cached_tokens_total{") && l.contains("anthropic"))
        .unwrap_or_else(|| panic!("no cached-token counter:\n{metrics}"));
    assert!(cached.ends_with(" 7"), "{cached}");

    let (status, count) = reply(anthropic(&onyx, "/v1/messages/count_tokens").json(&json!({
        "model": "anthropic/fake-echo", "system": "be brief", "messages": user("three words here")
    })))
    .await;
    assert_eq!((status, count), (200, json!({"input_tokens": 5})));
}

#[tokio::test]
async fn anthropic_streams_are_passed_on_event_by_event() {
    let (_fakes, onyx) = start().await;
    let response = anthropic(&onyx, "/v1/messages")
        .json(&json!({"model": "anthropic/fake-tools", "max_tokens": 50, "stream": true, "messages": user("weather in Paris"),
            "tools": [{"name": "lookup", "description": "Looks up", "input_schema": {"type": "object"}}]}))
        .send()
        .await
        .unwrap();
    let events = events(response).await;
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"message_start"));
    assert_eq!(names.last(), Some(&"message_stop"));
    let tool_start = events
        .iter()
        .find(|(_, e)| e["content_block"]["type"] == "tool_use")
        .unwrap();
    assert_eq!(tool_start.1["content_block"]["name"], "lookup");
    let delta = events.iter().rev().find(|(n, _)| n == "message_delta").unwrap();
    assert_eq!(delta.1["delta"]["stop_reason"], "tool_use");
}

/// The tool_use blocks a translated stream carries: (id, name, input).
fn streamed_tool_uses(events: &[(String, Value)]) -> Vec<(String, String, Value)> {
    let mut uses: Vec<(usize, String, String, String)> = Vec::new();
    for (name, event) in events {
        let index = event["index"].as_u64().map(|i| i as usize);
        match name.as_str() {
            "content_block_start" if event["content_block"]["type"] == "tool_use" => uses.push((
                index.unwrap(),
                event["content_block"]["id"].as_str().unwrap().into(),
                event["content_block"]["name"].as_str().unwrap().into(),
                String::new(),
            )),
            "content_block_delta" if event["delta"]["type"] == "input_json_delta" => {
                let open = uses.iter_mut().find(|u| Some(u.0) == index).unwrap();
                open.3.push_str(event["delta"]["partial_json"].as_str().unwrap());
            }
            _ => {}
        }
    }
    uses.into_iter()
        .map(|(_, id, name, json)| (id, name, serde_json::from_str(&json).unwrap()))
        .collect()
}

#[tokio::test]
async fn openai_models_are_translated_streamed_tool_use_included() {
    let (fakes, onyx) = start().await;
    let tools = json!([{"name": "lookup", "description": "Looks up", "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}}}]);
    let response = anthropic(&onyx, "/v1/messages")
        .json(
            &json!({"model": "openai/fake-tools", "max_tokens": 50, "stream": true,
            "system": "Use tools.", "messages": user("weather in Paris"), "tools": tools,
            "tool_choice": {"type": "auto", "disable_parallel_tool_use": true}}),
        )
        .send()
        .await
        .unwrap();
    let events = events(response).await;
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        &names[..3],
        ["message_start", "content_block_start", "ping"],
        "{names:?}"
    );
    assert_eq!(&names[names.len() - 2..], ["message_delta", "message_stop"]);
    let starts = names.iter().filter(|n| **n == "content_block_start").count();
    let stops = names.iter().filter(|n| **n == "content_block_stop").count();
    assert_eq!(starts, stops, "every block is closed: {names:?}");
    let uses = streamed_tool_uses(&events);
    assert_eq!(uses.len(), 1, "{events:?}");
    let (id, name, input) = &uses[0];
    assert!(id.starts_with("toolu_"), "{id}");
    assert_eq!(
        (name.as_str(), input),
        ("lookup", &json!({"query": "weather in Paris"}))
    );
    let delta = &events[events.len() - 2].1;
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    assert!(delta["usage"]["output_tokens"].as_u64().unwrap() > 0, "{delta}");
    assert!(delta["usage"]["input_tokens"].as_u64().unwrap() > 0, "{delta}");

    let sent = fakes.openai.state.last_request().unwrap();
    assert_eq!(
        sent["messages"][0],
        json!({"role": "system", "content": "Use tools."})
    );
    assert_eq!(sent["tools"][0]["function"]["name"], "lookup");
    assert_eq!(sent["parallel_tool_calls"], false);
    assert_eq!(sent["max_tokens"], 50);

    // The result goes back as a tool_result; the answer is a JSON message.
    let round_trip = json!({"model": "openai/fake-tools", "max_tokens": 50, "tools": tools, "messages": [
        {"role": "user", "content": "weather in Paris"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "lookup", "input": input}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": "sunny, 21C"}]}
    ]});
    let (status, message) = reply(anthropic(&onyx, "/v1/messages").json(&round_trip)).await;
    assert_eq!(status, 200, "{message}");
    assert_eq!(
        message["content"],
        json!([{"type": "text", "text": "tool said: sunny, 21C"}])
    );
    assert_eq!(message["stop_reason"], "end_turn");
    assert_eq!(message["model"], "openai/fake-tools");
    assert!(message["id"].as_str().unwrap().starts_with("msg_"));
    let sent = fakes.openai.state.last_request().unwrap();
    assert_eq!(sent["messages"][1]["tool_calls"][0]["id"], *id);
    assert_eq!(
        sent["messages"][2],
        json!({"role": "tool", "tool_call_id": id, "content": "sunny, 21C"})
    );

    let (status, count) = reply(anthropic(&onyx, "/v1/messages/count_tokens").json(&json!({
        "model": "openai/fake-echo", "messages": user("count these few words please")
    })))
    .await;
    assert_eq!(status, 200, "{count}");
    let tokens = count["input_tokens"].as_u64().unwrap();
    assert!((5..=12).contains(&tokens), "{count}");
}

#[tokio::test]
async fn agents_answer_in_the_messages_shape_and_keep_the_session() {
    let fakes = Fakes::start().await;
    let config = TestConfig::new(&fakes)
        .agent(json!({"id": "main", "default": true, "model": "openai/fake-echo"}))
        .build();
    let onyx = Onyx::start(Some(&config), &[]).await;
    let response = anthropic(&onyx, "/v1/messages")
        .json(&json!({"model": "onyx:main", "max_tokens": 50, "messages": user("hello agent")}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let session = session_id(&response);
    assert!(response.headers().contains_key("x-onyx-run-id"));
    let message: Value = response.json().await.unwrap();
    assert_eq!(
        message["content"],
        json!([{"type": "text", "text": "echo: hello agent"}])
    );
    assert_eq!(message["model"], "onyx:main");

    let response = anthropic(&onyx, "/v1/messages")
        .header("x-onyx-session-id", &session)
        .json(&json!({"model": "onyx:main", "max_tokens": 50, "stream": true, "messages": user("and again")}))
        .send()
        .await
        .unwrap();
    assert_eq!(session_id(&response), session);
    let events = events(response).await;
    let text: String = events
        .iter()
        .filter_map(|(_, e)| e["delta"]["text"].as_str())
        .collect();
    assert_eq!(text, "echo: and again");
    assert_eq!(events.last().unwrap().0, "message_stop");
    // The second turn reached the model with the first one as history.
    let sent = fakes.openai.state.last_request().unwrap().to_string();
    assert!(
        sent.contains("echo: hello agent") && sent.contains("and again"),
        "{sent}"
    );
}

#[tokio::test]
async fn a_session_keeps_a_plain_anthropic_models_conversation() {
    let (fakes, onyx) = start().await;
    let response = anthropic(&onyx, "/v1/messages")
        .header("x-onyx-session-id", "new")
        .json(&json!({"model": "anthropic/fake-echo", "max_tokens": 50, "messages": user("my name is Ada")}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let session = session_id(&response);
    let message: Value = response.json().await.unwrap();
    assert_eq!(message["content"][0]["text"], "echo: my name is Ada");

    let response = anthropic(&onyx, "/v1/messages")
        .header("x-onyx-session-id", &session)
        .json(
            &json!({"model": "anthropic/fake-echo", "max_tokens": 50, "messages": user("what is my name?")}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(session_id(&response), session);
    // The Anthropic upstream got the first turn as history.
    let sent = fakes.anthropic.state.last_request().unwrap().to_string();
    assert!(
        sent.contains("my name is Ada")
            && sent.contains("echo: my name is Ada")
            && sent.contains("what is my name?"),
        "{sent}"
    );
    let kept = wait_until(secs(10), "the second turn kept", async || {
        let kept = onyx.get_json(&format!("/v1/sessions/{session}")).await;
        (kept["total_messages"] == 4).then_some(kept)
    })
    .await;
    assert!(
        kept["messages"].to_string().contains("what is my name?"),
        "{kept}"
    );
}
