//! Retries with backoff, alias fallbacks, upstream error statuses, unreachable
//! and slow upstreams, and cancellation of the upstream when the client goes
//! away. (Unknown models: `bad_input`, in-process.)

use std::time::Duration;

use crate::harness::*;
use serde_json::{Value, json};

async fn setup() -> (Fakes, Onyx) {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&fakes.config()), &[]).await;
    (fakes, onyx)
}

fn user(text: &str) -> Value {
    json!([{"role": "user", "content": text}])
}

#[tokio::test]
async fn transient_failures_are_retried_then_succeed() {
    let (fakes, onyx) = setup().await;
    let (status, body) = onyx
        .chat(json!({"model": "openai/fake-flaky", "messages": user("again")}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "echo: again");
    assert_eq!(fakes.openai.state.requests().len(), 3, "two 503s then success");
}

#[tokio::test]
async fn upstream_errors_keep_their_status_after_retries() {
    let (fakes, onyx) = setup().await;
    let (status, body) = onyx
        .chat(json!({"model": "openai/fake-429", "messages": user("x")}))
        .await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["type"], "rate_limit_error");
    assert!(body["error"]["message"].as_str().unwrap().contains("slow down"));
    assert_eq!(fakes.openai.state.requests().len(), 3, "1 try + maxRetries 2");

    let (status, body) = onyx
        .chat(json!({"model": "anthropic/fake-429", "messages": user("x")}))
        .await;
    assert_eq!(status, 429, "{body}");
    let (status, body) = onyx
        .chat(json!({"model": "openai/fake-500", "messages": user("x")}))
        .await;
    assert_eq!(status, 500, "{body}");
    assert!(!body["error"]["message"].as_str().unwrap().is_empty());
}

#[tokio::test]
async fn answers_pass_through_byte_for_byte_and_a_garbled_one_is_a_502() {
    let (fakes, onyx) = setup().await;
    let direct = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", fakes.openai.url()))
        .bearer_auth(onyx_test_fakes::DEFAULT_KEY)
        .json(&json!({"model": "fake-echo", "messages": user("same bytes")}))
        .send()
        .await
        .unwrap();
    assert_eq!(direct.status(), 200);
    let direct = direct.bytes().await.unwrap();
    let through = onyx
        .post("/v1/chat/completions")
        .json(&json!({"model": "openai/fake-echo", "messages": user("same bytes")}))
        .send()
        .await
        .unwrap();
    assert_eq!(through.status(), 200);
    assert_eq!(through.headers()["content-type"], "application/json");
    assert_eq!(
        through.bytes().await.unwrap(),
        direct,
        "the upstream's answer, unchanged"
    );

    let (status, body) = onyx
        .chat(json!({"model": "openai/fake-garbled", "messages": user("x")}))
        .await;
    assert_eq!(status, 502, "{body}");
    assert_eq!(body["error"]["code"], "upstream_bad_response", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("could not read"),
        "{body}"
    );
}

#[tokio::test]
async fn aliases_fall_back_to_the_next_model() {
    let (fakes, onyx) = setup().await;
    let (status, body) = onyx
        .chat(json!({"model": "resilient", "messages": user("fallback please")}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "echo: fallback please");
    assert_eq!(
        fakes.openai.state.requests().len(),
        3,
        "openai tried with retries first"
    );
    assert_eq!(
        fakes.anthropic.state.requests().len(),
        1,
        "then anthropic answered"
    );
    let (status, _) = onyx.chat(json!({"model": "fast", "messages": user("x")})).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn unreachable_upstream_is_a_502_not_a_hang() {
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let config = TestConfig::empty()
        .set("gateway.auth.apiKeys", json!([ONYX_KEY]))
        .set(
            "providers.dead",
            json!({ "type": "openai", "baseUrl": format!("http://{dead}/v1"), "maxRetries": 1 }),
        )
        .build();
    let onyx = Onyx::start(Some(&config), &[]).await;
    let (status, body) = onyx.chat(json!({"model": "dead/m", "messages": user("x")})).await;
    assert_eq!(status, 502, "{body}");
    assert_eq!(body["error"]["code"], "upstream_unreachable");
    let health: Value = onyx.health().await;
    assert_eq!(health["status"], "degraded");
    let dead = dependency(&health, "dead");
    assert_eq!(dead["status"], "down", "{health}");
}

#[tokio::test]
async fn a_client_disconnect_cancels_the_upstream_stream() {
    let (fakes, onyx) = setup().await;
    for (model, fake) in [
        ("openai/fake-slow", &fakes.openai),
        ("anthropic/fake-slow", &fakes.anthropic),
        ("ollama/fake-slow", &fakes.ollama),
    ] {
        let mut response = onyx
            .post("/v1/chat/completions")
            .json(&json!({"model": model, "stream": true, "messages": user("go")}))
            .send()
            .await
            .unwrap();
        // Read a few chunks: they arrive one by one, long before the stream ends.
        let mut received = 0;
        while received < 3 {
            let chunk = response.chunk().await.unwrap().unwrap();
            received += chunk.windows(6).filter(|w| w == b"data: ").count();
        }
        drop(response);
        let cancelled = wait_until(
            secs(5),
            &format!("{model}: the upstream stream is cancelled"),
            async || {
                let cancelled = fake
                    .state
                    .streams_cancelled
                    .load(std::sync::atomic::Ordering::SeqCst);
                (cancelled > 0).then_some(cancelled)
            },
        )
        .await;
        assert_eq!(cancelled, 1, "{model}: upstream stream not cancelled");
        assert_eq!(
            fake.state
                .streams_completed
                .load(std::sync::atomic::Ordering::SeqCst),
            0,
            "{model}"
        );
    }
}

#[tokio::test]
async fn a_provider_timeout_is_a_504() {
    let fakes = Fakes::start().await;
    let config = TestConfig::empty()
        .set("gateway.auth.apiKeys", json!([ONYX_KEY]))
        .set(
            "providers.hasty",
            json!({ "type": "openai", "baseUrl": format!("{}/v1", fakes.openai.url()), "apiKey": "${FAKE_KEY}",
                    "timeoutSeconds": 1, "maxRetries": 0 }),
        )
        .build();
    let onyx = Onyx::start(Some(&config), &[]).await;
    let started = std::time::Instant::now();
    let (status, body) = onyx
        .chat(json!({"model": "hasty/fake-slow", "messages": user("x")}))
        .await;
    assert_eq!(status, 504, "{body}");
    assert_eq!(body["error"]["code"], "upstream_timeout");
    assert!(
        started.elapsed() < Duration::from_millis(2900),
        "gave up at the provider's limit, not the upstream's pace"
    );
}
