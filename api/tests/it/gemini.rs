//! Gemini (API key) and Vertex AI (static token, or a service account's
//! key exchanged for a token at a fake OAuth2 endpoint that checks the JWT's
//! RS256 signature) against the fake Google upstream: translation of system
//! prompts, images and settings, tool calls whose thought signatures make the
//! round trip, streams with usage, and errors with their status. (The OpenAI
//! SDK suites cover chat, streaming and tool calls through the official clients.)

use onyx_test_fakes::DEFAULT_KEY;
use serde_json::{Value, json};

use crate::harness::*;

fn user(text: &str) -> Value {
    json!([{"role": "user", "content": text}])
}

async fn stream(onyx: &Onyx, body: Value) -> Vec<Value> {
    let response = onyx
        .post("/v1/chat/completions")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    chunks(&sse_events(response).await)
}

#[tokio::test]
async fn gemini_translates_chat_tools_images_and_streams() {
    let fakes = Fakes::start().await;
    let google = onyx_test_fakes::gemini::start(Some(DEFAULT_KEY.into()), 0)
        .await
        .unwrap();
    let config = TestConfig::new(&fakes)
        .set(
            "providers.gemini",
            json!({"type": "gemini", "baseUrl": google.url(), "apiKey": DEFAULT_KEY, "maxRetries": 0}),
        )
        .set(
            "providers.badkey",
            json!({"type": "gemini", "baseUrl": google.url(), "apiKey": "wrong", "maxRetries": 0}),
        )
        .build();
    let onyx = Onyx::start(Some(&config), &[("FAKE_KEY", DEFAULT_KEY)]).await;

    let (status, body) = onyx
        .chat(
            json!({"model": "gemini/fake-echo", "max_tokens": 20, "temperature": 0.5, "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": [
                    {"type": "text", "text": "hello gemini"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
                ]}
            ]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "echo: hello gemini");
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    assert_eq!(body["usage"]["completion_tokens"], 3);
    assert_eq!(body["usage"]["prompt_tokens"], 4);
    let sent = google.state.last_request().unwrap();
    assert_eq!(sent["systemInstruction"]["parts"][0]["text"], "Be brief.");
    assert_eq!(
        sent["contents"][0]["parts"][1]["inlineData"],
        json!({"mimeType": "image/png", "data": "iVBORw0KGgo="})
    );
    assert_eq!(
        sent["generationConfig"],
        json!({"temperature": 0.5, "maxOutputTokens": 20})
    );

    let chunks = stream(
        &onyx,
        json!({"model": "gemini/fake-echo", "messages": user("stream gemini"), "stream": true,
            "stream_options": {"include_usage": true}}),
    )
    .await;
    assert_eq!(streamed_text(&chunks), "echo: stream gemini");
    assert_eq!(chunks.last().unwrap()["usage"]["completion_tokens"], 3);

    // A tool call and its result: the thought signature goes back with the call.
    let mut messages = user("kyoto");
    let (status, first) = onyx
        .chat(json!({"model": "gemini/fake-tools", "messages": messages, "tools": weather_tool(), "tool_choice": "auto"}))
        .await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["choices"][0]["finish_reason"], "tool_calls");
    let call = first["choices"][0]["message"]["tool_calls"][0].clone();
    assert_eq!(call["function"]["name"], "lookup");
    assert_eq!(
        serde_json::from_str::<Value>(call["function"]["arguments"].as_str().unwrap()).unwrap(),
        json!({"query": "kyoto"})
    );
    assert_eq!(
        google.state.last_request().unwrap()["toolConfig"],
        json!({"functionCallingConfig": {"mode": "AUTO"}})
    );
    let messages_array = messages.as_array_mut().unwrap();
    messages_array.push(first["choices"][0]["message"].clone());
    messages_array.push(json!({"role": "tool", "tool_call_id": call["id"], "content": "snow"}));
    let (status, second) = onyx
        .chat(json!({"model": "gemini/fake-tools", "messages": messages, "tools": weather_tool()}))
        .await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["choices"][0]["message"]["content"], "tool said: snow");
    let sent = google.state.last_request().unwrap();
    assert_eq!(
        sent["contents"][2]["parts"][0]["functionResponse"]["name"],
        "lookup"
    );

    let chunks = stream(
        &onyx,
        json!({"model": "gemini/fake-tools", "messages": user("oslo"), "tools": weather_tool(), "stream": true}),
    )
    .await;
    let calls = streamed_tool_calls(&chunks);
    assert_eq!(calls.len(), 1, "{chunks:?}");
    assert_eq!(
        serde_json::from_str::<Value>(&calls[0].2).unwrap(),
        json!({"query": "oslo"})
    );
    assert!(
        chunks
            .iter()
            .any(|c| c["choices"][0]["finish_reason"] == "tool_calls")
    );

    // Errors keep their status; the key never travels in the URL (the fake refuses it there).
    let (status, body) = onyx
        .chat(json!({"model": "gemini/fake-429", "messages": user("x")}))
        .await;
    assert_eq!(status, 429, "{body}");
    let (status, body) = onyx
        .chat(json!({"model": "gemini/nope", "messages": user("x")}))
        .await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["code"], "model_not_found");
    let (status, body) = onyx
        .chat(json!({"model": "badkey/fake-echo", "messages": user("x")}))
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("API key not valid"),
        "{body}"
    );
    let (status, body) = onyx
        .chat(
            json!({"model": "gemini/fake-echo", "messages": [{"role": "user", "content": "x"},
            {"role": "tool", "tool_call_id": "nope", "content": "r"}]}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("messages[1].tool_call_id"),
        "{body}"
    );

    let models = ids(&onyx.get_json("/v1/models").await);
    assert!(models.iter().any(|m| m == "gemini/fake-echo"), "{models:?}");
    assert!(
        !models.iter().any(|m| m == "gemini/fake-embed"),
        "embedding-only models are not chat models"
    );
    assert_eq!(
        dependency(&onyx.health().await, "gemini")["kind"],
        "provider:gemini"
    );
}

/// A fresh RSA key in PKCS#8 PEM, as a service account key file holds it.
fn rsa_key() -> String {
    let out = std::process::Command::new("openssl")
        .args(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"])
        .output()
        .expect("openssl");
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test]
async fn vertex_takes_a_static_token_or_a_service_account_key() {
    let fakes = Fakes::start().await;
    let google = onyx_test_fakes::gemini::start(Some(DEFAULT_KEY.into()), 0)
        .await
        .unwrap();
    let key = rsa_key();
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("sa.json");
    let account = json!({
        "type": "service_account", "project_id": "demo", "private_key_id": "k1", "private_key": key,
        "client_email": "onyx@demo.iam.gserviceaccount.com", "token_uri": format!("{}/token", google.url()),
    });
    std::fs::write(&key_file, account.to_string()).unwrap();
    let vertex = |extra: Value| {
        let mut spec = json!({"type": "vertex", "baseUrl": google.url(), "project": "demo", "location": "europe-west4", "maxRetries": 0});
        spec.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        spec
    };
    let config = TestConfig::new(&fakes)
        .set("providers.vstatic", vertex(json!({"apiKey": DEFAULT_KEY})))
        .set(
            "providers.vsa",
            vertex(json!({"credentialsFile": key_file.to_str().unwrap(), "models": ["fake-echo"]})),
        )
        .build();
    let onyx = Onyx::start(Some(&config), &[("FAKE_KEY", DEFAULT_KEY)]).await;

    let (status, body) = onyx
        .chat(json!({"model": "vstatic/fake-echo", "messages": user("static")}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "echo: static");

    // No key registered with the fake token endpoint yet: the grant is refused.
    let (status, body) = onyx
        .chat(json!({"model": "vsa/fake-echo", "messages": user("x")}))
        .await;
    assert_eq!(status, 401, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("token request was refused"),
        "{body}"
    );

    *google.state.service_account_pem.lock().unwrap() = Some(key);
    let (status, body) = onyx
        .chat(json!({"model": "vsa/fake-echo", "messages": user("signed")}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "echo: signed");
    let chunks = stream(
        &onyx,
        json!({"model": "vsa/fake-echo", "messages": user("again"), "stream": true}),
    )
    .await;
    assert_eq!(streamed_text(&chunks), "echo: again");
    assert_eq!(
        google.state.issued_tokens.lock().unwrap().len(),
        1,
        "the token is reused until it expires"
    );

    let health = onyx.health().await;
    assert_eq!(dependency(&health, "vsa")["status"], "up", "{health}");
    let models = ids(&onyx.get_json("/v1/models").await);
    assert!(models.iter().any(|m| m == "vsa/fake-echo"), "{models:?}");

    for (spec, param) in [
        (json!({"type": "vertex", "apiKey": "t"}), "project"),
        (json!({"type": "vertex", "project": "demo"}), "credentialsFile"),
        (
            json!({"type": "vertex", "project": "de mo", "apiKey": "t"}),
            "project",
        ),
        (json!({"type": "gemini", "project": "demo"}), "project"),
    ] {
        let mut spec = spec;
        spec["name"] = json!("v2");
        let (status, body) = reply(onyx.post("/v1/providers").json(&spec)).await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(body["error"]["param"], param, "{body}");
    }
}
