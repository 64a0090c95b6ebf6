//! AWS Bedrock against the fake Bedrock Runtime, which checks each request's
//! SigV4 signature by hand: a system prompt, an image and the settings reach
//! it in Converse's shape (the model id percent-encoded in the path), tool
//! calls make the round trip JSON and streamed (AWS's binary event stream),
//! usage comes back, a Bedrock API key works as a bearer token, a wrong
//! secret is a 403 that names the signature, and throttling is a 429. (The
//! OpenAI SDK suites cover chat, streaming and tool calls through the
//! official clients.)

use onyx_test_fakes::DEFAULT_KEY;
use onyx_test_fakes::bedrock::{ACCESS_KEY_ID, SECRET_ACCESS_KEY};
use serde_json::{Value, json};

use crate::harness::*;

fn user(text: &str) -> Value {
    json!([{"role": "user", "content": text}])
}

fn aws_env(secret: &'static str) -> [(&'static str, &'static str); 4] {
    [
        ("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID),
        ("AWS_SECRET_ACCESS_KEY", secret),
        ("AWS_EC2_METADATA_DISABLED", "true"),
        ("AWS_CONFIG_FILE", "/nonexistent/aws-config"),
    ]
}

fn config(fakes: &Fakes, url: &str) -> String {
    TestConfig::new(fakes)
        .set(
            "providers.bedrock",
            json!({"type": "bedrock", "baseUrl": url, "region": "eu-west-1", "maxRetries": 0, "models": ["fake-echo"]}),
        )
        .set(
            "providers.bedrockkey",
            json!({"type": "bedrock", "baseUrl": url, "region": "eu-west-1", "apiKey": DEFAULT_KEY, "maxRetries": 0}),
        )
        .build()
}

#[tokio::test]
async fn bedrock_signs_translates_and_streams() {
    let fakes = Fakes::start().await;
    let aws = onyx_test_fakes::bedrock::start(Some(DEFAULT_KEY.into()), 0)
        .await
        .unwrap();
    let onyx = Onyx::start(Some(&config(&fakes, &aws.url())), &aws_env(SECRET_ACCESS_KEY)).await;

    let (status, body) = onyx
        .chat(
            json!({"model": "bedrock/us.anthropic.fake-echo:0", "max_tokens": 20, "temperature": 0.5, "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": [
                    {"type": "text", "text": "hello bedrock"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
                ]}
            ]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "echo: hello bedrock");
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    assert_eq!(body["usage"]["completion_tokens"], 3);
    assert_eq!(body["usage"]["prompt_tokens"], 4);
    let sent = aws.state.last_request().unwrap();
    assert_eq!(sent["modelId"], "us.anthropic.fake-echo:0");
    assert_eq!(sent["system"], json!([{"text": "Be brief."}]));
    assert_eq!(
        sent["messages"],
        json!([{"role": "user", "content": [
            {"text": "hello bedrock"},
            {"image": {"format": "png", "source": {"bytes": "iVBORw0KGgo="}}}
        ]}])
    );
    assert_eq!(
        sent["inferenceConfig"],
        json!({"maxTokens": 20, "temperature": 0.5})
    );

    let response = onyx
        .post("/v1/chat/completions")
        .json(
            &json!({"model": "bedrock/fake-echo", "messages": user("stream bedrock"), "stream": true,
            "stream_options": {"include_usage": true}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let streamed = chunks(&sse_events(response).await);
    assert_eq!(streamed_text(&streamed), "echo: stream bedrock");
    assert_eq!(streamed.last().unwrap()["usage"]["completion_tokens"], 3);

    // A tool call and its result, then the same call streamed.
    let mut messages = user("kyoto");
    let (status, first) = onyx
        .chat(json!({"model": "bedrock/fake-tools", "messages": messages, "tools": weather_tool(), "tool_choice": "required"}))
        .await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["choices"][0]["finish_reason"], "tool_calls");
    let call = first["choices"][0]["message"]["tool_calls"][0].clone();
    assert_eq!(call["function"]["name"], "lookup");
    assert_eq!(
        aws.state.last_request().unwrap()["toolConfig"]["toolChoice"],
        json!({"any": {}})
    );
    let list = messages.as_array_mut().unwrap();
    list.push(first["choices"][0]["message"].clone());
    list.push(json!({"role": "tool", "tool_call_id": call["id"], "content": "snow"}));
    let (status, second) = onyx
        .chat(json!({"model": "bedrock/fake-tools", "messages": messages, "tools": weather_tool()}))
        .await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["choices"][0]["message"]["content"], "tool said: snow");
    assert_eq!(
        aws.state.last_request().unwrap()["messages"][2]["content"][0]["toolResult"],
        json!({"toolUseId": call["id"], "content": [{"text": "snow"}]})
    );
    let response = onyx
        .post("/v1/chat/completions")
        .json(&json!({"model": "bedrock/fake-tools", "messages": user("oslo"), "tools": weather_tool(), "stream": true}))
        .send()
        .await
        .unwrap();
    let chunks = chunks(&sse_events(response).await);
    let calls = streamed_tool_calls(&chunks);
    assert_eq!(calls.len(), 1, "{chunks:?}");
    assert_eq!(
        serde_json::from_str::<Value>(&calls[0].2).unwrap(),
        json!({"query": "oslo"})
    );

    // A Bedrock API key instead of SigV4.
    let (status, body) = onyx
        .chat(json!({"model": "bedrockkey/fake-echo", "messages": user("with a key")}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "echo: with a key");

    // Added through the API: the API key is sealed, shown as a hint only.
    let (status, created) = reply(onyx.post("/v1/providers").json(&json!({"name": "stored",
        "type": "bedrock", "baseUrl": aws.url(), "region": "eu-west-1", "apiKey": DEFAULT_KEY, "maxRetries": 0})))
    .await;
    assert_eq!(status, 201, "{created}");
    assert!(!created.to_string().contains(DEFAULT_KEY), "{created}");
    let (status, body) = onyx
        .chat(json!({"model": "stored/fake-echo", "messages": user("stored")}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "echo: stored");
    let (status, body) = reply(onyx.post("/v1/providers").json(&json!({"name": "bad",
        "type": "bedrock", "region": "us east"})))
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["param"], "region", "{body}");

    let models = ids(&onyx.get_json("/v1/models").await);
    assert!(models.iter().any(|m| m == "bedrock/fake-echo"), "{models:?}");
    assert!(
        !onyx.stderr.lock().unwrap().contains(SECRET_ACCESS_KEY),
        "the secret key was logged"
    );
}

#[tokio::test]
async fn bedrock_errors_keep_their_meaning() {
    let fakes = Fakes::start().await;
    let aws = onyx_test_fakes::bedrock::start(Some(DEFAULT_KEY.into()), 0)
        .await
        .unwrap();
    let config = config(&fakes, &aws.url());

    let onyx = Onyx::start(Some(&config), &aws_env(SECRET_ACCESS_KEY)).await;
    let (status, body) = onyx
        .chat(json!({"model": "bedrock/fake-429", "messages": user("x")}))
        .await;
    assert_eq!(status, 429, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ThrottlingException"),
        "{body}"
    );
    let (status, body) = onyx
        .chat(json!({"model": "bedrock/nope", "messages": user("x")}))
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("model identifier is invalid"),
        "{body}"
    );

    // An exception event in the middle of a stream ends it with an error chunk.
    let response = onyx
        .post("/v1/chat/completions")
        .json(
            &json!({"model": format!("bedrock/{}", onyx_test_fakes::bedrock::MIDSTREAM_THROTTLE),
            "messages": user("x"), "stream": true}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let events = sse_events(response).await;
    assert!(events.iter().any(|e| e.contains("partial")), "{events:?}");
    let error = events
        .iter()
        .find(|e| e.contains("\"error\""))
        .unwrap_or_else(|| panic!("no error event: {events:?}"));
    assert!(error.contains("ThrottlingException"), "{error}");
    assert!(error.contains("Too many tokens"), "{error}");

    // The wrong secret: the fake's signature check refuses it, and says so.
    let wrong = Onyx::start(Some(&config), &aws_env("not-the-secret-access-key")).await;
    let (status, body) = wrong
        .chat(json!({"model": "bedrock/fake-echo", "messages": user("x")}))
        .await;
    assert_eq!(status, 403, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("InvalidSignatureException"), "{body}");
    assert!(message.contains("signature"), "{body}");
    assert_eq!(body["error"]["code"], "InvalidSignatureException", "{body}");
    let response = wrong
        .post("/v1/chat/completions")
        .json(&json!({"model": "bedrock/fake-echo", "messages": user("x"), "stream": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
}
