//! An agent that speaks first: `send_message` reaches the chat where the owner
//! last talked to it (or a named one, once approved in `ask` mode when the
//! owner did not set it up), and a heartbeat's result reaches its
//! `deliverTo`, unless it is `HEARTBEAT_OK` (recorded, not delivered).

use onyx_test_fakes::telegram::FakeTelegram;
use serde_json::{Value, json};

use crate::harness::*;

pub(crate) const TG_TOKEN: &str = "123456:fake-telegram-token";

/// Onyx with the scripted model, `agents`, and Telegram (the owner, 111, on its allowlist), up.
pub(crate) async fn start(fakes: &Fakes, telegram: &FakeTelegram, agents: Value) -> Onyx {
    let config = TestConfig::new(fakes)
        .merge(json!({
            "agents": { "defaults": { "model": "openai/fake-script" }, "list": agents },
            "plugins": { "enabled": ["telegram"], "telegram": {
                "token": TG_TOKEN, "apiUrl": telegram.url(), "allowFrom": ["111"], "pollTimeoutSeconds": 1,
            } },
        }))
        .build();
    let onyx = Onyx::start(Some(&config), &[]).await;
    wait_until(secs(20), "telegram up", async || {
        (dependency(&onyx.health().await, "telegram")["status"] == "up").then_some(())
    })
    .await;
    onyx
}

async fn said_in(telegram: &FakeTelegram, chat: i64, text: &str) {
    wait_until(secs(30), &format!("{text:?} in chat {chat}"), async || {
        telegram.messages_to(chat).iter().any(|m| m == text).then_some(())
    })
    .await
}

/// The agent's answer to `script`, approving the one call it asks approval for.
async fn approved_answer(onyx: &Onyx, agent: &str, script: &str) -> String {
    let url = format!("{}/v1/chat/completions", onyx.url);
    let body = json!({"model": format!("onyx:{agent}"), "messages": [{"role": "user", "content": script}]});
    let asking = tokio::spawn(onyx.client.post(url).bearer_auth(ONYX_KEY).json(&body).send());
    let id = wait_until(secs(30), "an approval request", async || {
        let approvals = onyx.get_json("/v1/approvals").await;
        approvals["data"][0]["id"].as_str().map(String::from)
    })
    .await;
    let (status, decided) = reply(
        onyx.post(&format!("/v1/approvals/{id}"))
            .json(&json!({"decision": "approve"})),
    )
    .await;
    assert_eq!(status, 200, "{decided}");
    let answer: Value = asking.await.unwrap().unwrap().json().await.unwrap();
    answer["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn send_message_reaches_where_the_owner_last_talked_or_a_named_chat() {
    let fakes = Fakes::start().await;
    let telegram = FakeTelegram::start(TG_TOKEN).await.unwrap();
    let agents = json!([{ "id": "main", "default": true }, { "id": "loner" }]);
    let onyx = start(&fakes, &telegram, agents).await;

    // Nobody has talked to it yet: the model is told to name a target.
    let answer = onyx
        .agent_answer("main", r#"script: send_message {"text": "too early"} ; answer"#)
        .await;
    assert!(answer.contains("nobody has talked to you"), "{answer}");

    telegram.user_says(111, 111, "Ann", "hi");
    said_in(&telegram, 111, "echo: hi").await;

    // From a run elsewhere (the API here), in the default `ask` mode, no prompt.
    let answer = onyx
        .agent_answer(
            "main",
            r#"script: send_message {"text": "ping from the agent"} ; answer"#,
        )
        .await;
    assert_eq!(answer, "script done: sent to telegram:111");
    said_in(&telegram, 111, "ping from the agent").await;

    // A chat the owner did not set up asks first in `ask` mode (approved here).
    let answer = approved_answer(
        &onyx,
        "main",
        r#"script: send_message {"to": "telegram:555", "text": "to another chat"} ; answer"#,
    )
    .await;
    assert_eq!(answer, "script done: sent to telegram:555");
    said_in(&telegram, 555, "to another chat").await;

    // The last chat is per agent.
    let answer = onyx
        .agent_answer("loner", r#"script: send_message {"text": "hello?"} ; answer"#)
        .await;
    assert!(answer.contains("nobody has talked to you"), "{answer}");
    let answer = approved_answer(
        &onyx,
        "main",
        r#"script: send_message {"to": "pigeon:1", "text": "coo"} ; answer"#,
    )
    .await;
    assert!(answer.contains("error") && answer.contains("pigeon"), "{answer}");
}

#[tokio::test]
async fn heartbeat_results_reach_deliver_to_but_heartbeat_ok_does_not() {
    let fakes = Fakes::start().await;
    let telegram = FakeTelegram::start(TG_TOKEN).await.unwrap();
    let agents = json!([
        { "id": "watcher", "default": true, "heartbeat": { "every": "2s", "deliverTo": "telegram:111" } },
        { "id": "quiet", "heartbeat": { "every": "2s", "deliverTo": "telegram:222" } },
    ]);
    let onyx = start(&fakes, &telegram, agents).await;
    for (agent, line) in [
        ("watcher", "- script: say Water the plants"),
        ("quiet", "- script: say HEARTBEAT_OK"),
    ] {
        let (status, body) = reply(
            onyx.put(&format!("/v1/agents/{agent}/files/HEARTBEAT.md"))
                .body(format!("# HEARTBEAT.md\n\n{line}\n")),
        )
        .await;
        assert_eq!(status, 200, "{body}");
    }
    let task = onyx.get_json("/v1/tasks/heartbeat-watcher").await;
    assert_eq!(task["deliver_to"], "telegram:111", "{task}");

    said_in(&telegram, 111, "Water the plants").await;
    // The message goes out before the run that sent it is written down as finished.
    let delivered = wait_until(secs(30), "the delivering run recorded", async || {
        let runs = onyx.get_json("/v1/tasks/heartbeat-watcher/runs").await;
        runs["data"]
            .as_array()?
            .iter()
            .find(|r| r["status"] == "succeeded" && r["result"] == "Water the plants")
            .cloned()
    })
    .await;
    assert_eq!(delivered["delivered_to"], "telegram:111", "{delivered}");

    let quiet_run = wait_until(secs(30), "a HEARTBEAT_OK heartbeat", async || {
        let runs = onyx.get_json("/v1/tasks/heartbeat-quiet/runs").await;
        runs["data"]
            .as_array()?
            .iter()
            .find(|r| r["status"] == "succeeded" && r["result"] == "HEARTBEAT_OK")
            .cloned()
    })
    .await;
    assert!(quiet_run["delivered_to"].is_null(), "{quiet_run}");
    // (A heartbeat on the default checklist, before the PUT, may have sent its echo.)
    assert!(
        !telegram.messages_to(222).iter().any(|m| m == "HEARTBEAT_OK"),
        "{:?}",
        telegram.messages_to(222)
    );
}
