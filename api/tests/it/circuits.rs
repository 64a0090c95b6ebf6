//! Circuit breakers: a provider that keeps failing is opened, so an alias's
//! fallback answers at once and a direct request gets a 503 with
//! `Retry-After`; after the cooling period one probe closes it again once the
//! upstream heals. State in `/health`, `/metrics` and `/v1/providers`; a live
//! provider reload keeps the circuit of a provider that did not change.

use std::time::{Duration, Instant};

use onyx_test_fakes::DEFAULT_KEY;
use serde_json::{Value, json};

use crate::harness::*;

fn user(text: &str) -> Value {
    json!([{"role": "user", "content": text}])
}

/// A port nothing listens on (yet).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn circuit(health: &Value, provider: &str) -> Value {
    health["circuits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["provider"] == provider)
        .cloned()
        .unwrap_or_else(|| panic!("no circuit for {provider}: {health}"))
}

async fn metric_line(onyx: &Onyx, prefix: &str) -> String {
    let text = onyx.get("/metrics").send().await.unwrap().text().await.unwrap();
    text.lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix} in /metrics"))
        .to_string()
}

#[tokio::test]
async fn an_open_circuit_sends_the_alias_to_its_fallback_at_once_and_a_probe_closes_it() {
    let fakes = Fakes::start().await;
    let port = free_port();
    let config = TestConfig::new(&fakes)
        .set(
            "providers.flaky",
            json!({
                "type": "openai", "baseUrl": format!("http://127.0.0.1:{port}/v1"), "apiKey": "${FAKE_KEY}",
                "maxRetries": 2, "circuitBreaker": {"failures": 3, "coolSeconds": 1, "maxCoolSeconds": 4},
            }),
        )
        .set(
            "models.aliases.guarded",
            json!(["flaky/fake-echo", "anthropic/fake-echo"]),
        )
        .build();
    let onyx = Onyx::start(Some(&config), &[("FAKE_KEY", DEFAULT_KEY)]).await;

    // Closed: the request waits out flaky's retries (three failed attempts,
    // which open the circuit) before the fallback answers.
    let started = Instant::now();
    let (status, body) = onyx
        .chat(json!({"model": "guarded", "messages": user("closed")}))
        .await;
    let closed = started.elapsed();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "echo: closed");
    let health = onyx.health().await;
    let open = circuit(&health, "flaky");
    assert_eq!(open["state"], "open", "{health}");
    assert_eq!(open["openings"], 1);
    assert!(
        open["nextProbeAt"].is_string() && open["openedAt"].is_string(),
        "{open}"
    );
    assert_eq!(circuit(&health, "anthropic")["state"], "closed");

    // Open: the fallback answers without flaky being tried.
    let started = Instant::now();
    let (status, body) = onyx
        .chat(json!({"model": "guarded", "messages": user("open")}))
        .await;
    let skipped = started.elapsed();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "echo: open");
    eprintln!("fallback latency: circuit closed (retries) {closed:?}, circuit open {skipped:?}");
    assert!(skipped < Duration::from_secs(1), "{skipped:?}");
    assert!(skipped < closed, "{skipped:?} vs {closed:?}");
    assert_eq!(fakes.anthropic.state.requests().len(), 2);

    // A direct request is told at once, in OpenAI's shape, when to come back.
    let response = onyx
        .post("/v1/chat/completions")
        .json(&json!({"model": "flaky/fake-echo", "messages": user("x")}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    let retry_after: u64 = response.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=1).contains(&retry_after), "{retry_after}");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "circuit_open", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("flaky") && message.contains("tried again in 1s"),
        "{message}"
    );

    assert_eq!(
        metric_line(&onyx, "onyx_circuit_state{provider=\"flaky\"}").await,
        "onyx_circuit_state{provider=\"flaky\"} 2"
    );
    assert_eq!(
        metric_line(&onyx, "onyx_circuit_openings_total{provider=\"flaky\"}").await,
        "onyx_circuit_openings_total{provider=\"flaky\"} 1"
    );
    let providers = onyx.get_json("/v1/providers").await;
    let listed = providers["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "flaky")
        .cloned()
        .unwrap();
    assert_eq!(listed["circuit"]["state"], "open", "{listed}");
    assert_eq!(listed["circuitBreaker"]["failures"], 3);

    // Healed: after the cooling period one probe goes to flaky and closes the circuit.
    let healed = onyx_test_fakes::openai::start(Some(DEFAULT_KEY.into()), port)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(circuit(&onyx.health().await, "flaky")["state"], "half_open");
    let (status, body) = onyx
        .chat(json!({"model": "guarded", "messages": user("probe")}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(healed.state.requests().len(), 1, "the probe went to flaky");
    assert_eq!(fakes.anthropic.state.requests().len(), 2, "not to the fallback");
    let closed = circuit(&onyx.health().await, "flaky");
    assert_eq!(closed["state"], "closed", "{closed}");
    assert_eq!(closed["consecutiveFailures"], 0);
    assert_eq!(
        metric_line(&onyx, "onyx_circuit_state{provider=\"flaky\"}").await,
        "onyx_circuit_state{provider=\"flaky\"} 0"
    );
}

#[tokio::test]
async fn stored_providers_take_breaker_settings_and_a_reload_keeps_an_unchanged_circuit() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&fakes.config()), &[("FAKE_KEY", DEFAULT_KEY)]).await;
    let dead = format!("http://127.0.0.1:{}/v1", free_port());

    let (status, body) = reply(onyx.post("/v1/providers").json(&json!({
        "name": "flaky", "type": "openai", "baseUrl": dead, "circuitBreaker": {"failures": 0},
    })))
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["param"], "circuitBreaker.failures", "{body}");
    let (status, body) = reply(onyx.post("/v1/providers").json(&json!({
        "name": "flaky", "type": "openai", "baseUrl": dead, "circuitBreaker": {"coolSeconds": 5, "sometimes": 1},
    })))
    .await;
    assert_eq!(status, 400, "{body}");

    let (status, body) = reply(onyx.post("/v1/providers").json(&json!({
        "name": "flaky", "type": "openai", "baseUrl": dead, "maxRetries": 0,
        "circuitBreaker": {"failures": 1, "coolSeconds": 60},
    })))
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["circuitBreaker"]["maxCoolSeconds"], 300, "{body}");
    let (status, body) = onyx
        .chat(json!({"model": "flaky/m", "messages": user("x")}))
        .await;
    assert_eq!(status, 502, "{body}");
    let (status, body) = onyx
        .chat(json!({"model": "flaky/m", "messages": user("x")}))
        .await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "circuit_open");

    // Another provider added: the routes are rebuilt, flaky's circuit stays open.
    let (status, body) = reply(onyx.post("/v1/providers").json(&json!({
        "name": "other", "type": "openai", "baseUrl": dead, "circuitBreaker": false,
    })))
    .await;
    assert_eq!(status, 201, "{body}");
    assert!(
        body["circuitBreaker"].is_null() && body["circuit"].is_null(),
        "{body}"
    );
    let (status, _) = onyx
        .chat(json!({"model": "flaky/m", "messages": user("x")}))
        .await;
    assert_eq!(status, 503);

    // flaky itself changed: a new provider, a closed circuit.
    let (status, body) = reply(
        onyx.patch("/v1/providers/flaky")
            .json(&json!({"timeoutSeconds": 30})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["circuit"]["state"], "closed", "{body}");
    let (status, _) = onyx
        .chat(json!({"model": "flaky/m", "messages": user("x")}))
        .await;
    assert_eq!(status, 502);
}
