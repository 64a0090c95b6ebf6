//! Durable agent runs through the real binary: a run outlives the client that
//! started it, can be cancelled and re-attached to, and a run whose replica
//! is killed is marked interrupted by another replica; inbox claims are
//! settled exactly once either way.

use futures::StreamExt;
use serde_json::{Value, json};

use crate::harness::services::Service;
use crate::harness::*;

fn config(fakes: &Fakes) -> TestConfig {
    TestConfig::new(fakes).merge(json!({
        "memory": { "embedder": { "type": "ollama", "model": "all-minilm", "dimensions": 64 } },
        "agents": {
            "defaults": { "model": "openai/fake-script", "permissionMode": "allow-all", "runLeaseSeconds": 2 },
            "list": [
                { "id": "main", "default": true },
                { "id": "slow", "model": "openai/fake-slow" },
            ],
        },
    }))
}

type Body = futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>;

async fn setup() -> (Fakes, Onyx) {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes).build()), &[]).await;
    (fakes, onyx)
}

/// Starts a streaming turn with the slow agent (a hundred words, 30 ms
/// apart) and reads until the fourth word: the run id, its session and the
/// rest of the stream.
async fn slow_turn_under_way(onyx: &Onyx) -> (String, String, Body) {
    let response = onyx
        .post("/v1/chat/completions")
        .json(&json!({"model": "onyx:slow", "stream": true, "messages": [{"role": "user", "content": "tell me a long story"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let header = |name: &str| response.headers()[name].to_str().unwrap().to_string();
    let (run, session) = (header("x-onyx-run-id"), header("x-onyx-session-id"));
    let mut body = response.bytes_stream().boxed();
    read_until(&mut body, "w3").await;
    (run, session, body)
}

/// Reads a stream until `needle` has arrived; what was read.
async fn read_until(body: &mut Body, needle: &str) -> String {
    let mut text = String::new();
    while !text.contains(needle) {
        let chunk = body.next().await.expect("the stream ended early").unwrap();
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    text
}

async fn wait_for_status(onyx: &Onyx, run: &str, status: &str) -> Value {
    wait_until(secs(20), &format!("run {run} is {status}"), async || {
        let record = onyx.get_json(&format!("/v1/runs/{run}")).await;
        (record["status"] == status).then_some(record)
    })
    .await
}

/// Leaves one message in the slow agent's inbox (main sends it).
async fn message_for_slow(onyx: &Onyx) {
    let (status, body) = onyx
        .chat(
            json!({"model": "onyx:main", "messages": [{"role": "user", "content":
            r#"script: send_to_agent {"agent": "slow", "message": "the plants need water"} ; answer"#}]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
}

async fn inbox(onyx: &Onyx, status: &str) -> Vec<Value> {
    onyx.get_json(&format!("/v1/inbox?agent=slow&status={status}"))
        .await["data"]
        .as_array()
        .unwrap()
        .clone()
}

#[tokio::test]
async fn a_client_that_hangs_up_leaves_the_run_to_finish_and_record_its_turn() {
    let (fakes, onyx) = setup().await;
    message_for_slow(&onyx).await;
    let (run, session, body) = slow_turn_under_way(&onyx).await;
    drop(body);

    let record = wait_for_status(&onyx, &run, "succeeded").await;
    assert_eq!(record["agent"], "slow");
    assert_eq!(record["session"], session.as_str());
    assert!(record["finished_at"].is_string(), "{record}");
    let session = onyx.get_json(&format!("/v1/sessions/{session}")).await;
    let messages = session["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2, "{session}");
    let answer = messages[1]["content"].as_str().unwrap();
    assert!(answer.starts_with("w0 w1") && answer.ends_with("w99"), "{answer}");
    assert!(messages[1].get("aborted").is_none(), "{session}");
    // The inbox message went into that run's prompt and is read, once.
    assert_eq!(inbox(&onyx, "pending").await, Vec::<Value>::new());
    assert_eq!(inbox(&onyx, "read").await.len(), 1);
    assert_eq!(fakes.openai.state.stats()["streamsCancelled"], 0);
    // The daily log has the turn's line.
    wait_until(secs(10), "the daily log line", async || {
        let files = onyx.get_json("/v1/memory/files?agent=slow").await;
        let daily = pluck(&files["data"], "/path")
            .into_iter()
            .find(|p| p.starts_with("memory/") && p.ends_with(".md"))?;
        let file = onyx.get_json(&format!("/v1/memory/files/slow/{daily}")).await;
        file["content"]
            .as_str()?
            .contains("tell me a long story")
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn cancelling_a_run_stops_it_records_the_turn_as_cancelled_and_hands_back_the_inbox() {
    let (_fakes, onyx) = setup().await;
    message_for_slow(&onyx).await;
    let (run, session, mut body) = slow_turn_under_way(&onyx).await;

    let (status, cancelled) = reply(onyx.post(&format!("/v1/runs/{run}/cancel"))).await;
    assert_eq!(status, 200, "{cancelled}");
    // The client's stream ends with the cancellation, long before the hundredth word.
    let mut rest = String::new();
    while let Some(chunk) = body.next().await {
        rest.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    assert!(rest.contains("run_cancelled"), "{rest}");
    assert!(!rest.contains("w99"), "the run went on after the cancel");
    assert!(rest.ends_with("data: [DONE]\n\n"), "{rest}");

    let record = wait_for_status(&onyx, &run, "cancelled").await;
    assert_eq!(record["error"], "the run was cancelled");
    let session = onyx.get_json(&format!("/v1/sessions/{session}")).await;
    let messages = session["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2, "{session}");
    assert_eq!(messages[0]["content"], "tell me a long story");
    assert_eq!(messages[1]["aborted"], true, "{session}");
    let partial = messages[1]["content"].as_str().unwrap();
    assert!(
        partial.starts_with("w0 w1 w2 w3") && !partial.contains("w99"),
        "{partial}"
    );
    // The claimed message is pending again, for the next run.
    assert_eq!(inbox(&onyx, "pending").await.len(), 1);

    // Cancelling again changes nothing; unknown and malformed ids are refused.
    let (status, again) = reply(onyx.post(&format!("/v1/runs/{run}/cancel"))).await;
    assert_eq!((status, again["status"].as_str()), (200, Some("cancelled")));
    let unknown = uuid::Uuid::now_v7();
    let (status, body) = reply(onyx.post(&format!("/v1/runs/{unknown}/cancel"))).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("run_not_found"))
    );
    let (status, body) = reply(onyx.get("/v1/runs/..%2F..%2Fetc")).await;
    assert_eq!(status, 400, "{body}");
}

#[tokio::test]
async fn a_client_reattaches_to_a_live_run_and_gets_the_whole_answer() {
    let (_fakes, onyx) = setup().await;
    let (run, session, body) = slow_turn_under_way(&onyx).await;
    drop(body);

    let listed = onyx
        .get_json(&format!("/v1/runs?session={session}&status=running"))
        .await;
    assert_eq!(ids(&listed), vec![run.clone()], "{listed}");
    let attached = onyx.get(&format!("/v1/runs/{run}/events")).send().await.unwrap();
    assert_eq!(attached.status(), 200);
    let chunks = chunks(&sse_events(attached).await);
    let text = streamed_text(&chunks);
    let words: Vec<String> = (0..100).map(|i| format!("w{i}")).collect();
    assert_eq!(
        text,
        words.join(" "),
        "the re-attached stream has every word, once"
    );
    assert!(chunks.iter().any(|c| c["choices"][0]["finish_reason"] == "stop"));

    let done = onyx.get_json("/v1/runs?agent=slow&status=succeeded").await;
    assert_eq!(ids(&done), vec![run]);
    let (status, body) = reply(onyx.get("/v1/runs?status=sleeping")).await;
    assert_eq!((status, body["error"]["param"].as_str()), (400, Some("status")));
}

#[tokio::test]
async fn a_run_whose_replica_is_killed_is_marked_interrupted_by_another() {
    let fakes = Fakes::start().await;
    let (s3, surreal) = (Service::s3().await, Service::surreal().await);
    let config = config(&fakes).s3(&s3).surreal(&surreal).build();
    let (doomed, survivor) = (
        Onyx::start(Some(&config), &[]).await,
        Onyx::start(Some(&config), &[]).await,
    );
    message_for_slow(&survivor).await;
    let (run, session, _body) = slow_turn_under_way(&doomed).await;
    assert_eq!(
        survivor.get_json(&format!("/v1/runs/{run}")).await["status"],
        "running"
    );
    doomed.crash().await;

    let record = wait_for_status(&survivor, &run, "interrupted").await;
    assert!(record["error"].as_str().unwrap().contains("stopped"), "{record}");
    // The session shows it, and the inbox message is pending again.
    // (The session is told just after the run is marked.)
    let session = wait_until(secs(10), "the session shows the interruption", async || {
        let session = survivor.get_json(&format!("/v1/sessions/{session}")).await;
        (session["message_count"] == 2).then_some(session)
    })
    .await;
    let messages = session["messages"].as_array().unwrap();
    assert_eq!(messages[0]["content"], "tell me a long story");
    assert_eq!(messages[1]["aborted"], true);
    assert!(messages[1]["content"].as_str().unwrap().contains("interrupted"));
    assert_eq!(inbox(&survivor, "pending").await.len(), 1);
    assert_eq!(
        survivor.get_json("/v1/runs?status=running").await["data"],
        json!([]),
        "nothing hangs as running"
    );
}
