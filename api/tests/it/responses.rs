//! `/v1/responses`: bad input answered in OpenAI's shape (in-process),
//! `previous_response_id` continued on another replica sharing the SurrealDB
//! server, the passthrough keeping the upstream's own ids, and an agent
//! answering through `onyx:main`. (The official SDKs' view of the same API is
//! in `tests/sdk`.)

use http::Method;
use serde_json::{Value, json};

use crate::harness::inprocess::InProcess;
use crate::harness::services::Service;
use crate::harness::*;

fn param_and_code(body: &Value) -> (String, String) {
    let error = &body["error"];
    assert!(
        error["message"].is_string() && error["type"].is_string(),
        "{body}"
    );
    (
        error["param"].as_str().unwrap_or_default().to_string(),
        error["code"].as_str().unwrap_or_default().to_string(),
    )
}

#[tokio::test]
async fn bad_input_names_the_field_in_openai_shape() {
    let fakes = Fakes::start().await;
    let onyx = InProcess::start(TestConfig::new(&fakes)).await;
    let model = "openai/fake-echo";
    let cases = [
        (json!({"input": "x"}), "model"),
        (json!({"model": model}), "input"),
        (json!({"model": model, "input": 5}), "input"),
        (json!({"model": model, "input": "x", "stream": "yes"}), "stream"),
        (
            json!({"model": model, "input": [{"role": "user", "content": "a"},
            {"type": "function_call", "name": "f", "arguments": "{}"}]}),
            "input[1].call_id",
        ),
        (
            json!({"model": model, "input": [{"type": "function_call_output", "call_id": "c", "output": 5}]}),
            "input[0].output",
        ),
        (
            json!({"model": model, "input": [{"role": "robot", "content": "a"}]}),
            "input[0].role",
        ),
        (
            json!({"model": model, "input": [{"role": "user", "content": [{"type": "input_image", "file_id": "file_1"}]}]}),
            "input[0].content[0].file_id",
        ),
        (
            json!({"model": model, "input": [{"type": "web_search_call", "id": "ws_1"}]}),
            "input[0].type",
        ),
        (
            json!({"model": model, "input": "x", "tools": [{"type": "namespace", "name": "n"}]}),
            "tools[0].tools",
        ),
        (
            json!({"model": model, "input": "x", "tools": [{"type": "function"}]}),
            "tools[0].name",
        ),
        (
            json!({"model": model, "input": "x", "background": true}),
            "background",
        ),
        (
            json!({"model": model, "input": "x", "text": {"format": {"type": "yaml"}}}),
            "text.format.type",
        ),
    ];
    for (body, param) in cases {
        let reply = onyx.call(Method::POST, "/v1/responses", &body).await;
        assert_eq!(reply.status, 400, "{body} -> {}", reply.body);
        assert_eq!(param_and_code(&reply.body).0, param, "{body}");
    }

    let reply = onyx
        .call(
            Method::POST,
            "/v1/responses",
            &json!({"model": model, "input": "x", "previous_response_id": "resp_nope"}),
        )
        .await;
    assert_eq!(reply.status, 404, "{}", reply.body);
    assert_eq!(
        param_and_code(&reply.body),
        (
            "previous_response_id".into(),
            "previous_response_not_found".into()
        )
    );
    assert_eq!(
        reply.body["error"]["message"],
        "Previous response with id 'resp_nope' not found."
    );

    // Not stored: answered, but not there afterwards.
    let reply = onyx
        .call(
            Method::POST,
            "/v1/responses",
            &json!({"model": model, "input": "hello", "store": false}),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["output"][0]["content"][0]["text"], "echo: hello");
    assert_eq!(reply.body["store"], false);
    let id = reply.body["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("resp_"), "{id}");
    for method in [Method::GET, Method::DELETE] {
        let reply = onyx
            .call(method.clone(), &format!("/v1/responses/{id}"), &Value::Null)
            .await;
        assert_eq!(reply.status, 404, "{method} {}", reply.body);
        param_and_code(&reply.body);
    }
    let reply = onyx
        .call(
            Method::GET,
            &format!("/v1/responses/{id}/input_items"),
            &Value::Null,
        )
        .await;
    assert_eq!(reply.status, 404, "{}", reply.body);
}

async fn create(onyx: &Onyx, body: Value) -> Value {
    let (status, body) = reply(onyx.post("/v1/responses").json(&body)).await;
    assert_eq!(status, 200, "{body}");
    body
}

fn output_text(response: &Value) -> String {
    response["output"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "message")
        .flat_map(|i| i["content"].as_array().unwrap().iter())
        .filter_map(|p| p["text"].as_str())
        .collect()
}

#[tokio::test]
async fn a_conversation_continues_on_another_replica() {
    let fakes = Fakes::start().await;
    let surreal = Service::surreal().await;
    let config = TestConfig::new(&fakes)
        .set(
            "providers.openai_resp",
            json!({"type": "openai", "baseUrl": format!("{}/v1", fakes.openai.url()),
            "apiKey": "${FAKE_KEY}", "responses": true}),
        )
        .surreal(&surreal)
        .build();
    let (a, b) = (
        Onyx::start(Some(&config), &[]).await,
        Onyx::start(Some(&config), &[]).await,
    );
    let first = create(
        &a,
        json!({"model": "openai/fake-echo", "input": "the word is apple",
        "instructions": "answer briefly"}),
    )
    .await;
    assert_eq!(output_text(&first), "echo: the word is apple");
    let second = create(
        &b,
        json!({"model": "openai/fake-echo", "input": "which word?",
        "previous_response_id": first["id"]}),
    )
    .await;
    assert_eq!(output_text(&second), "echo: which word?");
    assert_eq!(second["previous_response_id"], first["id"]);
    // What the upstream got on replica b: the first turn, without its instructions.
    let sent = fakes.openai.state.last_request().unwrap();
    let roles: Vec<&str> = sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user"], "{sent}");
    assert_eq!(sent["messages"][1]["content"], "echo: the word is apple");

    // Either replica reads it; the input items are the whole conversation, newest first.
    let got = a
        .get_json(&format!("/v1/responses/{}", second["id"].as_str().unwrap()))
        .await;
    assert_eq!(got, second);
    let items = b
        .get_json(&format!(
            "/v1/responses/{}/input_items?limit=2",
            second["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(items["object"], "list");
    assert_eq!(items["has_more"], true, "{items}");
    assert_eq!(items["data"][0]["content"][0]["text"], "which word?");
    assert_eq!(items["data"][1]["role"], "assistant");
    let rest = b
        .get_json(&format!(
            "/v1/responses/{}/input_items?after={}",
            second["id"].as_str().unwrap(),
            items["last_id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(
        rest["data"][0]["content"][0]["text"], "the word is apple",
        "{rest}"
    );
    assert_eq!(rest["has_more"], false);

    // Passthrough: the upstream's own id, kept by Onyx, continued as is upstream.
    let upstream = create(&a, json!({"model": "openai_resp/fake-echo", "input": "pass one"})).await;
    let upstream_id = upstream["id"].as_str().unwrap().to_string();
    assert!(upstream_id.starts_with("resp_fake_"), "{upstream}");
    let next = create(
        &b,
        json!({"model": "openai_resp/fake-echo", "input": "pass two",
        "previous_response_id": upstream_id}),
    )
    .await;
    assert_eq!(output_text(&next), "echo: pass two");
    let sent = fakes.openai.state.last_request().unwrap();
    assert_eq!(sent["previous_response_id"], upstream_id.as_str(), "{sent}");
    assert_eq!(sent["model"], "fake-echo");
    // A translated response continued through the passthrough: expanded from Onyx's store.
    create(
        &b,
        json!({"model": "openai_resp/fake-echo", "input": "and now?",
        "previous_response_id": second["id"]}),
    )
    .await;
    let sent = fakes.openai.state.last_request().unwrap();
    assert!(sent.get("previous_response_id").is_none(), "{sent}");
    assert_eq!(sent["input"].as_array().unwrap().len(), 5, "{sent}");

    let (status, deleted) = reply(b.delete(&format!("/v1/responses/{upstream_id}"))).await;
    assert_eq!(
        (status, deleted),
        (
            200,
            json!({"id": upstream_id, "object": "response", "deleted": true})
        )
    );
    let (status, _) = reply(a.get(&format!("/v1/responses/{upstream_id}"))).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn an_agent_answers_through_onyx_main() {
    let fakes = Fakes::start().await;
    let config = TestConfig::new(&fakes)
        .agent(json!({"id": "main", "default": true, "model": "openai/fake-echo"}))
        .build();
    let onyx = Onyx::start(Some(&config), &[]).await;
    let response = onyx
        .post("/v1/responses")
        .json(&json!({"model": "onyx:main", "input": "hello agent"}));
    let response = response.send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers().contains_key("x-onyx-session-id"));
    let body: Value = response.json().await.unwrap();
    assert_eq!(output_text(&body), "echo: hello agent", "{body}");
    assert_eq!(body["model"], "onyx:main");
    assert_eq!(body["status"], "completed");

    let streamed = onyx
        .post("/v1/responses")
        .json(&json!({"model": "onyx:main", "input": "stream it", "stream": true}))
        .send()
        .await
        .unwrap();
    let events: Vec<Value> = sse_events(streamed)
        .await
        .iter()
        .filter_map(|e| serde_json::from_str(e).ok())
        .collect();
    assert_eq!(events.first().unwrap()["type"], "response.created");
    let last = events.last().unwrap();
    assert_eq!(last["type"], "response.completed", "{last}");
    assert_eq!(output_text(&last["response"]), "echo: stream it");
}

#[tokio::test]
async fn a_session_keeps_the_conversation_even_for_a_provider_that_speaks_responses() {
    let fakes = Fakes::start().await;
    let config = TestConfig::new(&fakes)
        .set(
            "providers.openai_resp",
            json!({"type": "openai", "baseUrl": format!("{}/v1", fakes.openai.url()),
            "apiKey": "${FAKE_KEY}", "responses": true}),
        )
        .build();
    let onyx = Onyx::start(Some(&config), &[]).await;
    let ask = |session: &str, input: &str| {
        onyx.post("/v1/responses")
            .header("x-onyx-session-id", session)
            .json(&json!({"model": "openai_resp/fake-echo", "input": input}))
    };
    let first = ask("new", "the colour is teal").send().await.unwrap();
    assert_eq!(first.status(), 200);
    let session = session_id(&first);
    let second = ask(&session, "which colour?").send().await.unwrap();
    assert_eq!(session_id(&second), session);
    let second: Value = second.json().await.unwrap();
    assert_eq!(output_text(&second), "echo: which colour?");
    // Answered through chat completions, with the first turn as history.
    let sent = fakes.openai.state.last_request().unwrap();
    assert!(sent.get("messages").is_some(), "{sent}");
    assert!(sent.to_string().contains("echo: the colour is teal"), "{sent}");
}
