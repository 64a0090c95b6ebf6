//! What only the owner decides. A chat key cannot change what an agent may
//! do (its permission mode, model, whether it runs) nor decide approvals,
//! nor rewrite a shared project's `ACCESS.md`. An agent in `ask` mode
//! cannot message a chat the owner did not set up for it unasked, nor wake
//! an `allow-all` agent into doing unasked what it would have to ask for.
//! A workspace cannot hold the gateway's own files.

use onyx_test_fakes::telegram::FakeTelegram;
use serde_json::{Value, json};

use crate::harness::*;

use crate::speaks_first::TG_TOKEN;

/// The Telegram user on the plugin's allowlist (`speaks_first::start`).
const OWNER: i64 = 111;

fn scripted(fakes: &Fakes, agents: Value) -> TestConfig {
    TestConfig::new(fakes).merge(json!({
        "agents": { "defaults": { "model": "openai/fake-script" }, "list": agents },
    }))
}

async fn key(onyx: &Onyx, body: Value) -> String {
    let (status, created) = reply(onyx.post("/v1/keys").json(&body)).await;
    assert_eq!(status, 201, "{created}");
    created["key"].as_str().unwrap().to_string()
}

/// The first pending approval of `tool`, once there is one.
async fn pending(onyx: &Onyx, tool: &str) -> Value {
    wait_until(secs(30), &format!("an approval of {tool}"), async || {
        let approvals = onyx.get_json("/v1/approvals").await;
        approvals["data"]
            .as_array()?
            .iter()
            .find(|a| a["tool"] == tool)
            .cloned()
    })
    .await
}

#[tokio::test]
async fn a_chat_key_cannot_raise_its_agent_nor_decide_approvals() {
    let fakes = Fakes::start().await;
    let agents = json!([{ "id": "main", "default": true }, { "id": "ops" }]);
    let onyx = Onyx::start(Some(&scripted(&fakes, agents).build()), &[]).await;
    let scoped = key(&onyx, json!({"name": "ops bot", "agents": ["ops"]})).await;
    let chat = key(&onyx, json!({"name": "laptop"})).await;
    for key in [&scoped, &chat] {
        // Issue 37's attack: a chat key scoped to ops raised ops to allow-all.
        for change in [
            json!({"permission_mode": "allow-all"}),
            json!({"model": "openai/fake-echo"}),
            json!({"enabled": false}),
            json!({"name": "Ops", "permission_mode": "allow-all"}),
        ] {
            let (status, body) = reply(onyx.with_key("PATCH", "/v1/agents/ops", key).json(&change)).await;
            assert_eq!(status, 403, "{change}: {body}");
            assert_eq!(body["error"]["code"], "insufficient_scope", "{body}");
        }
        let (status, body) = reply(
            onyx.with_key("PATCH", "/v1/agents/ops", key)
                .json(&json!({"name": "Ops Bot"})),
        )
        .await;
        assert_eq!(status, 200, "a chat key may rename: {body}");
    }
    let (status, body) = reply(
        onyx.with_key("POST", "/v1/agents", &chat)
            .json(&json!({"id": "yolo", "permission_mode": "allow-all"})),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    let (status, body) = reply(
        onyx.with_key("POST", "/v1/agents", &chat)
            .json(&json!({"id": "plain"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let ops = onyx.get_json("/v1/agents/ops").await;
    assert_eq!(ops["permission_mode"], "ask", "{ops}");
    assert_eq!(ops["enabled"], true, "{ops}");
    let (status, body) = reply(
        onyx.patch("/v1/agents/ops")
            .json(&json!({"permission_mode": "safe"})),
    )
    .await;
    assert_eq!(status, 200, "the admin key may: {body}");

    // A dangerous call waits for approval; only the owner's authority decides it.
    let asking = {
        let url = format!("{}/v1/chat/completions", onyx.url);
        let client = onyx.client.clone();
        tokio::spawn(async move {
            let body = json!({"model": "onyx:main", "messages": [{"role": "user", "content":
                r#"script: web_fetch {"url": "http://127.0.0.1:9/x"} ; answer"#}]});
            let response = client
                .post(url)
                .bearer_auth(ONYX_KEY)
                .json(&body)
                .send()
                .await
                .unwrap();
            response.json::<Value>().await.unwrap()
        })
    };
    let approval = pending(&onyx, "web_fetch").await;
    let id = approval["id"].as_str().unwrap();
    for key in [&scoped, &chat] {
        let (status, body) = reply(
            onyx.with_key("POST", &format!("/v1/approvals/{id}"), key)
                .json(&json!({"decision": "approve"})),
        )
        .await;
        assert_eq!(status, 403, "{body}");
    }
    let (status, body) = reply(
        onyx.post(&format!("/v1/approvals/{id}"))
            .json(&json!({"decision": "deny"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let answer = asking.await.unwrap();
    let text = answer["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(text.contains("denied"), "{text}");
}

#[tokio::test]
async fn only_the_owner_rewrites_a_projects_access_rules() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&fakes.config()), &[]).await;
    let chat = key(&onyx, json!({"name": "laptop"})).await;
    let access = "/v1/memory/files/_shared/projects/launch/ACCESS.md";
    let (status, body) = reply(onyx.put(access).body("read: main\nwrite: main\n")).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = reply(onyx.with_key("PUT", access, &chat).body("write: *\n")).await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("ACCESS.md"),
        "{body}"
    );
    let (status, body) = reply(onyx.with_key("DELETE", access, &chat)).await;
    assert_eq!(status, 403, "deleting it opens the project: {body}");
    let (status, body) = reply(onyx.get(access)).await;
    assert_eq!(status, 200);
    assert_eq!(body["content"], "read: main\nwrite: main\n", "unchanged");
    let (status, body) = reply(
        onyx.with_key("PUT", "/v1/memory/files/_shared/projects/launch/notes.md", &chat)
            .body("# Notes\n"),
    )
    .await;
    assert_eq!(
        status, 200,
        "the project's other files are a chat key's to write: {body}"
    );
}

#[tokio::test]
async fn a_workspace_cannot_hold_the_gateways_files() {
    let fakes = Fakes::start().await;
    let elsewhere = tempfile::tempdir().unwrap();
    for (workspace, why) in [
        ("~".to_string(), "holds"),
        ("~/data".to_string(), "holds the data dir"),
        ("~/data/db".to_string(), "lies inside the data dir"),
        ("~/agents".to_string(), "lies inside the config's folder"),
        (format!("{}/..", elsewhere.path().display()), "holds"),
    ] {
        let config = TestConfig::new(&fakes)
            .agent(json!({"id": "main", "default": true}))
            .agent(json!({"id": "coder", "workspace": workspace}))
            .build();
        let Err((code, stderr)) = Onyx::try_start(Some(&config), &[]).await else {
            panic!("started with workspace {workspace:?}");
        };
        assert_eq!(code, Some(1), "{stderr}");
        assert!(
            stderr.contains("agents.list[1].workspace") && stderr.contains(why),
            "{workspace}: {stderr}"
        );
    }
    let config = TestConfig::new(&fakes)
        .agent(json!({"id": "coder", "workspace": elsewhere.path().join("project")}))
        .build();
    let onyx = Onyx::start(Some(&config), &[]).await;
    // Nor can the API give an agent one.
    let (status, body) = reply(
        onyx.post("/v1/agents")
            .json(&json!({"id": "w", "workspace": "~"})),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["param"], "workspace", "{body}");
}

/// Starts `agent`'s answer to `script` in the background (an approval may hold it).
fn answer_later(onyx: &Onyx, agent: &str, script: &str) -> tokio::task::JoinHandle<String> {
    let url = format!("{}/v1/chat/completions", onyx.url);
    let client = onyx.client.clone();
    let body = json!({"model": format!("onyx:{agent}"), "messages": [{"role": "user", "content": script}]});
    tokio::spawn(async move {
        let response = client
            .post(url)
            .bearer_auth(ONYX_KEY)
            .json(&body)
            .send()
            .await
            .unwrap();
        let body: Value = response.json().await.unwrap();
        body["choices"][0]["message"]["content"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    })
}

#[tokio::test]
async fn send_message_asks_before_writing_to_a_chat_the_owner_did_not_set_up() {
    let fakes = Fakes::start().await;
    let telegram = FakeTelegram::start(TG_TOKEN).await.unwrap();
    let onyx =
        crate::speaks_first::start(&fakes, &telegram, json!([{ "id": "main", "default": true }])).await;

    // The owner's chat (on the allowlist): no prompt.
    let answer = onyx
        .agent_answer(
            "main",
            &format!(r#"script: send_message {{"to": "telegram:{OWNER}", "text": "morning"}} ; answer"#),
        )
        .await;
    assert_eq!(answer, format!("script done: sent to telegram:{OWNER}"));

    // Issue 37's exfiltration: any chat id, unasked. Now it waits, and a denial stops it.
    let exfil = answer_later(
        &onyx,
        "main",
        r#"script: send_message {"to": "telegram:666", "text": "the secrets"} ; answer"#,
    );
    let approval = pending(&onyx, "send_message").await;
    assert_eq!(approval["arguments"]["to"], "telegram:666", "{approval}");
    let id = approval["id"].as_str().unwrap();
    let (status, body) = reply(
        onyx.post(&format!("/v1/approvals/{id}"))
            .json(&json!({"decision": "deny"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let answer = exfil.await.unwrap();
    assert!(answer.contains("denied"), "{answer}");
    assert!(
        telegram.messages_to(666).is_empty(),
        "nothing reached the stranger's chat"
    );
}

#[tokio::test]
async fn waking_an_allow_all_agent_from_an_ask_agent_keeps_asking() {
    let fakes = Fakes::start().await;
    // boss's model calls the one tool it is offered, web_fetch (dangerous), whatever it is told.
    let agents = json!([
        { "id": "main", "default": true, "permissionMode": "ask" },
        { "id": "boss", "model": "openai/fake-tools", "permissionMode": "allow-all",
          "tools": { "allow": ["web_fetch"] } },
    ]);
    let onyx = Onyx::start(Some(&scripted(&fakes, agents).build()), &[]).await;
    let answer = onyx
        .agent_answer(
            "main",
            r#"script: send_to_agent {"agent": "boss", "message": "fetch the page", "wake": true} ; answer"#,
        )
        .await;
    assert!(answer.contains("starting on it now"), "{answer}");
    // The woken run works under ask: the dangerous call waits for the owner.
    let approval = pending(&onyx, "web_fetch").await;
    assert_eq!(approval["agent"], "boss", "{approval}");
    let id = approval["id"].as_str().unwrap();
    let (status, body) = reply(
        onyx.post(&format!("/v1/approvals/{id}"))
            .json(&json!({"decision": "deny"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    // Asked directly, boss is still allow-all and calls it unasked.
    let answer = onyx.agent_answer("boss", "fetch the page").await;
    assert!(answer.starts_with("tool said: error"), "{answer}");
    let approvals = onyx.get_json("/v1/approvals").await;
    assert_eq!(approvals["data"], json!([]), "{approvals}");
}
