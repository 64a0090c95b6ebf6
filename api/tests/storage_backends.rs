//! The gateway on its production topology: objects in a real S3 server and
//! metadata in a real SurrealDB server over ws://; and what happens when S3
//! goes away and comes back.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::services::{S3_ACCESS_KEY, S3_SECRET_KEY, Service};
use common::*;
use serde_json::{Value, json};

fn config(fakes: &Fakes, s3: &str, surreal: Option<&str>) -> String {
    let database = match surreal {
        Some(url) => format!(r#"surrealdb: {{ url: "{url}", user: "root", pass: "root" }},"#),
        None => String::new(),
    };
    fakes.config().replacen(
        "providers: {",
        &format!(
            r#"storage: {{
    objects: {{ type: "s3", endpoint: "{s3}", region: "us-east-1", accessKey: "{S3_ACCESS_KEY}", secretKey: "{S3_SECRET_KEY}" }},
    {database}
  }},
  providers: {{"#
        ),
        1,
    )
}

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

async fn dependency(onyx: &Onyx, name: &str) -> Value {
    let health: Value = onyx.health().await;
    health["dependencies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == name)
        .unwrap()
        .clone()
}

#[tokio::test]
async fn sessions_on_s3_and_a_surrealdb_server() {
    let fakes = Fakes::start().await;
    let s3 = Service::s3().await;
    let surreal = Service::surreal().await;
    let onyx = Onyx::start(
        Some(&config(
            &fakes,
            &s3.url(),
            Some(&format!("ws://{}", surreal.addr)),
        )),
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
    assert_eq!(dependency(&onyx, "objects").await["kind"], "objects:s3");
    assert_eq!(dependency(&onyx, "database").await["status"], "up");
}

#[tokio::test]
async fn turns_wait_out_an_s3_outage_and_nothing_is_lost() {
    let fakes = Fakes::start().await;
    let s3 = Service::s3().await;
    let onyx = Onyx::start(Some(&config(&fakes, &s3.url(), None)), &[]).await;
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
    let mut objects = Value::Null;
    for _ in 0..300 {
        objects = dependency(&onyx, "objects").await;
        if objects["status"] == "down" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(objects["status"], "down", "{objects}");

    let _s3 = Service::s3_at(dir, addr).await;
    let mut body = Value::Null;
    for _ in 0..300 {
        body = onyx.get_json(&format!("/v1/sessions/{id}")).await;
        if body["message_count"] == 6 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if body["message_count"] != 6 {
        let (_, logs) = onyx.stop_and_logs().await;
        panic!("parked turns were not written: {body}\n{logs}");
    }
    let contents: Vec<&str> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
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
