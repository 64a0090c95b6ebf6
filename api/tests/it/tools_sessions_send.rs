//! `sessions_send` through the real binary and the fake model: a message
//! written into another agent's conversation wakes that agent there (its
//! answer lands in the same session); a conversation the sender may not
//! reach (its agent turned off, or none at all) is refused with why.

use crate::harness::*;
use serde_json::{Value, json};

fn config(fakes: &Fakes) -> String {
    TestConfig::new(fakes)
        .merge(json!({
            "agents": {
                "defaults": { "model": "openai/fake-script", "permissionMode": "allow-all", "maxIterations": 4 },
                "list": [
                    { "id": "main", "default": true },
                    { "id": "helper", "model": "openai/fake-echo" },
                ],
            },
        }))
        .build()
}

/// One agent turn; its answer and its session.
async fn chat(onyx: &Onyx, agent: &str, text: &str) -> (String, String) {
    let response = onyx
        .post("/v1/chat/completions")
        .json(&json!({"model": format!("onyx:{agent}"), "messages": [{"role": "user", "content": text}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let session = response.headers()["x-onyx-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    let body: Value = response.json().await.unwrap();
    (
        body["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .to_string(),
        session,
    )
}

fn contents(session: &Value) -> Vec<String> {
    session["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test]
async fn sessions_send_wakes_the_other_agent_in_its_session_and_refuses_what_it_cannot_reach() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes)), &[]).await;
    let (_, helper_session) = chat(&onyx, "helper", "hello helper").await;

    let send = |session: &str, message: &str| {
        format!(r#"script: sessions_send {{"session_id": "{session}", "message": "{message}"}} ; answer"#)
    };
    let (answer, _) = chat(&onyx, "main", &send(&helper_session, "please water the plants")).await;
    assert_eq!(
        answer,
        format!("script done: written into conversation {helper_session}; helper is starting on it now")
    );
    let woken = wait_until(secs(10), "helper answered in its own session", async || {
        let session = onyx.get_json(&format!("/v1/sessions/{helper_session}")).await;
        let contents = contents(&session);
        contents
            .iter()
            .any(|c| c.starts_with("echo:") && c.contains("please water the plants"))
            .then_some(contents)
    })
    .await;
    assert!(woken[0].contains("hello helper"), "{woken:?}");
    assert!(
        woken
            .iter()
            .any(|c| c == "main wrote into this conversation:\nplease water the plants"),
        "{woken:?}"
    );

    // Refused: a conversation that does not exist, and one whose agent is turned off.
    let (answer, _) = chat(&onyx, "main", &send("0190f5c2-0000-7000-8000-000000000000", "x")).await;
    assert!(answer.contains("error: there is no conversation"), "{answer}");
    let (status, body) = reply(onyx.patch("/v1/agents/helper").json(&json!({"enabled": false}))).await;
    assert_eq!(status, 200, "{body}");
    let before = contents(&onyx.get_json(&format!("/v1/sessions/{helper_session}")).await).len();
    let (answer, _) = chat(&onyx, "main", &send(&helper_session, "are you there?")).await;
    assert_eq!(
        answer,
        format!(
            "script done: error: conversation {helper_session} belongs to \"helper\", which is turned off"
        )
    );
    let after = contents(&onyx.get_json(&format!("/v1/sessions/{helper_session}")).await);
    assert_eq!(after.len(), before, "nothing written: {after:?}");
}
