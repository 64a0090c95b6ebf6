//! Request ids, `/health`, `/metrics`, and graceful shutdown under SIGTERM.

use crate::harness::*;
use serde_json::{Value, json};

#[tokio::test]
async fn request_ids_are_echoed_or_generated() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&fakes.config()), &[]).await;
    let traced = |path: &str, id: &str| onyx.get(path).header("x-request-id", id).send();
    let response = traced("/v1/models", "trace-abc-123").await.unwrap();
    assert_eq!(response.headers()["x-request-id"], "trace-abc-123");
    let response = onyx.get("/v1/models").send().await.unwrap();
    let generated = response.headers()["x-request-id"].to_str().unwrap().to_string();
    assert_eq!(uuid::Uuid::parse_str(&generated).unwrap().get_version_num(), 7);
    let response = traced("/v1/nope", "bad id with spaces").await.unwrap();
    assert_ne!(response.headers()["x-request-id"], "bad id with spaces");
}

#[tokio::test]
async fn health_lists_each_dependency() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&fakes.config()), &[]).await;
    let body: Value = onyx.health().await;
    assert_eq!(body["status"], "ok", "{body}");
    let names = pluck(&body["dependencies"], "/name");
    assert_eq!(
        names,
        [
            "database",
            "objects",
            "anthropic",
            "ollama",
            "openai",
            "embedder",
            "search-index"
        ]
    );
    let deps = body["dependencies"].as_array().unwrap();
    assert!(deps.iter().all(|d| d["status"] == "up"), "{body}");
    assert_eq!(deps[0]["kind"], "surrealdb");
    assert_eq!(deps[1]["kind"], "objects:local");
    assert_eq!(deps[2]["kind"], "provider:anthropic");
    // With no embedder configured, the Ollama provider's nomic-embed-text is used.
    assert_eq!(deps[5]["kind"], "embedder:ollama");
    assert!(
        deps[5]["detail"].as_str().unwrap().contains("nomic-embed-text"),
        "{body}"
    );
}

#[tokio::test]
async fn metrics_count_requests_latency_upstreams_and_tokens() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&fakes.config()), &[]).await;
    let (status, _) = onyx
        .chat(json!({"model": "openai/fake-echo", "messages": [{"role": "user", "content": "one two"}]}))
        .await;
    assert_eq!(status, 200);
    let (status, _) = onyx
        .chat(json!({"model": "openai/fake-500", "messages": [{"role": "user", "content": "x"}]}))
        .await;
    assert_eq!(status, 500);
    let text = onyx.get("/metrics").send().await.unwrap().text().await.unwrap();
    assert!(
        text.contains(
            r#"onyx_http_requests_total{route="/v1/chat/completions",method="POST",status="200"} 1"#
        ),
        "{text}"
    );
    assert!(
        text.contains(
            r#"onyx_http_requests_total{route="/v1/chat/completions",method="POST",status="500"} 1"#
        ),
        "{text}"
    );
    assert!(
        text.contains(r#"onyx_http_request_duration_seconds_count{route="/v1/chat/completions"} 2"#),
        "{text}"
    );
    assert!(
        text.contains(r#"onyx_upstream_request_duration_seconds_count{provider="openai"} 4"#),
        "{text}"
    );
    assert!(
        text.contains(r#"onyx_upstream_errors_total{provider="openai",reason="server_error"} 3"#),
        "{text}"
    );
    assert!(
        text.contains(r#"onyx_tokens_total{provider="openai",model="fake-echo",kind="prompt"} 2"#),
        "{text}"
    );
    assert!(
        text.contains(r#"onyx_tokens_total{provider="openai",model="fake-echo",kind="completion"} 3"#),
        "{text}"
    );
}

#[tokio::test]
async fn sigterm_lets_an_in_flight_stream_finish() {
    let fakes = Fakes::start().await;
    let mut onyx = Onyx::start(Some(&fakes.config()), &[]).await;
    let mut response = onyx
        .post("/v1/chat/completions")
        .json(&json!({"model": "openai/fake-slow", "stream": true, "messages": [{"role": "user", "content": "go"}]}))
        .send()
        .await
        .unwrap();
    let first = response.chunk().await.unwrap().unwrap();
    assert!(first.starts_with(b"data: "));
    let status = std::process::Command::new("kill")
        .arg("-TERM")
        .arg(onyx.pid().to_string())
        .status()
        .unwrap();
    assert!(status.success());
    let mut rest = Vec::new();
    while let Some(chunk) = response.chunk().await.unwrap() {
        rest.extend_from_slice(&chunk);
    }
    let rest = String::from_utf8(rest).unwrap();
    assert!(
        rest.trim_end().ends_with("data: [DONE]"),
        "stream was cut: {}",
        &rest[rest.len().saturating_sub(200)..]
    );
    assert!(rest.contains("w99"), "every word arrived");
    let exit = tokio::time::timeout(std::time::Duration::from_secs(20), onyx.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(exit.success(), "{exit:?}");
    // New connections are refused once it stopped.
    assert!(onyx.anonymous("GET", "/health").send().await.is_err());
}

/// The debug log of a gateway that answered one unknown path (a 404) to a
/// request carrying `request_id`, in `format`.
async fn logs_of_one_traced_404(format: &str, request_id: &str) -> String {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(
        Some(&fakes.config()),
        &[("ONYX_LOG_FORMAT", format), ("ONYX_LOG", "debug")],
    )
    .await;
    let response = onyx
        .get("/v1/nope")
        .header("x-request-id", request_id)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    onyx.stop_and_logs().await.1
}

#[tokio::test]
async fn json_logs_carry_the_request_id() {
    let stderr = logs_of_one_traced_404("json", "trace-json-42").await;
    let line = stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| l["span"]["request_id"] == "trace-json-42")
        .unwrap_or_else(|| panic!("no JSON log line with the request id in:\n{stderr}"));
    assert!(
        line["timestamp"].is_string() && line["level"].is_string(),
        "{line}"
    );
    assert_eq!(line["span"]["path"], "/v1/nope", "{line}");
    assert!(!stderr.contains(ONYX_KEY), "the API key never reaches the logs");
}

#[tokio::test]
async fn human_logs_are_plain_text_and_name_the_request() {
    let stderr = logs_of_one_traced_404("human", "trace-human-7").await;
    // stderr is a pipe here, not a terminal: no colour codes.
    assert!(!stderr.contains('\u{1b}'), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.contains("request finished") && l.contains("trace-human-7"))
        .unwrap_or_else(|| panic!("no request line in:\n{stderr}"));
    assert!(
        line.contains("request{request_id=trace-human-7 method=GET path=/v1/nope}"),
        "{line}"
    );
    assert!(line.contains("status=404"), "{line}");
}
