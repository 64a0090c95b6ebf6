//! The gateway on its production topology: objects in a real S3 server and
//! metadata in a real SurrealDB server over ws://; and what happens when S3
//! goes away and comes back.

use crate::harness::services::Service;
use crate::harness::*;
use serde_json::{Value, json};

async fn turn(onyx: &Onyx, session: &str, text: &str) -> String {
    let response = onyx
        .post("/v1/chat/completions")
        .header("x-onyx-session-id", session)
        .json(&json!({"model": "openai/fake-echo", "messages": [{"role": "user", "content": text}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.status(),
        200,
        "the chat answers whatever the object store does"
    );
    session_id(&response)
}

#[tokio::test]
async fn sessions_on_s3_and_a_surrealdb_server() {
    let fakes = Fakes::start().await;
    let s3 = Service::s3().await;
    let surreal = Service::surreal().await;
    let onyx = Onyx::start(
        Some(&TestConfig::new(&fakes).s3(&s3).surreal(&surreal).build()),
        &[],
    )
    .await;
    let id = turn(&onyx, "new", "hello s3").await;
    turn(&onyx, &id, "again").await;
    let body: Value = onyx.get_json(&format!("/v1/sessions/{id}")).await;
    assert_eq!(body["message_count"], 4);
    assert_eq!(body["messages"][3]["content"], "echo: again");
    let segments = std::fs::read_dir(s3.dir.path().join(format!("onyx-sessions/main/{id}")))
        .unwrap()
        .count();
    assert_eq!(segments, 2, "one object per turn in the bucket");
    assert_eq!(dependency(&onyx.health().await, "objects")["kind"], "objects:s3");
    assert_eq!(dependency(&onyx.health().await, "database")["status"], "up");
}

#[tokio::test]
async fn turns_wait_out_an_s3_outage_and_nothing_is_lost() {
    let fakes = Fakes::start().await;
    let s3 = Service::s3().await;
    let onyx = Onyx::start(Some(&TestConfig::new(&fakes).s3(&s3).build()), &[]).await;
    let id = turn(&onyx, "new", "before the outage").await;

    let (dir, addr) = s3.stop().await;
    let during = onyx
        .post("/v1/chat/completions")
        .header("x-onyx-session-id", &id)
        .json(&json!({"model": "openai/fake-echo", "messages": [{"role": "user", "content": "during the outage"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(during.status(), 200);
    assert_eq!(during.headers()["x-onyx-session-history"], "unavailable");
    turn(&onyx, &id, "still down").await;
    // The health cache may hold the last "up" for a few seconds.
    let objects = wait_until(secs(15), "health shows the object store down", async || {
        let objects = dependency(&onyx.health().await, "objects");
        (objects["status"] == "down").then_some(objects)
    })
    .await;
    assert_eq!(objects["status"], "down", "{objects}");

    let _s3 = Service::s3_at(dir, addr).await;
    let written = poll_until(secs(15), async || {
        let body = onyx.get_json(&format!("/v1/sessions/{id}")).await;
        (body["message_count"] == 6).then_some(body)
    })
    .await;
    let Some(body) = written else {
        let body = onyx.get_json(&format!("/v1/sessions/{id}")).await;
        let (_, logs) = onyx.stop_and_logs().await;
        panic!("parked turns were not written: {body}\n{logs}");
    };
    let contents = pluck(&body["messages"], "/content");
    assert_eq!(
        contents,
        [
            "before the outage",
            "echo: before the outage",
            "during the outage",
            "echo: during the outage",
            "still down",
            "echo: still down"
        ],
        "parked turns are written in order once S3 is back"
    );
}
