//! Per-session settings through the real binary: a session's model and
//! reasoning effort reach the upstream on its next turn (HTTP agent chat and
//! a scheduled task continuing the session), a `safe` session of an
//! `allow-all` agent is not offered dangerous tools, the settings survive a
//! restart, and what the PATCH refuses: a mode above the agent's, a model
//! that does not route, a key of another agent.

use crate::harness::*;
use serde_json::{Value, json};

fn config(fakes: &Fakes) -> String {
    TestConfig::new(fakes)
        .merge(json!({
            "agents": {
                "defaults": { "model": "openai/fake-script", "permissionMode": "allow-all" },
                "list": [
                    { "id": "main", "default": true },
                    { "id": "ops" },
                    { "id": "careful", "permissionMode": "ask" },
                ],
            },
        }))
        .build()
}

/// One agent turn in `session` (`new` starts one); the session id and the answer.
async fn turn(onyx: &Onyx, agent: &str, session: &str, text: &str) -> (String, String) {
    let response = onyx
        .post("/v1/chat/completions")
        .header("x-onyx-session-id", session)
        .json(&json!({"model": format!("onyx:{agent}"), "messages": [{"role": "user", "content": text}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let id = session_id(&response);
    let body: Value = response.json().await.unwrap();
    let answer = body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    (id, answer)
}

async fn patch(onyx: &Onyx, session: &str, body: Value) -> (u16, Value) {
    reply(onyx.patch(&format!("/v1/sessions/{session}")).json(&body)).await
}

/// The last chat request the fake OpenAI upstream received.
fn last_upstream(fakes: &Fakes) -> Value {
    fakes
        .openai
        .state
        .requests()
        .into_iter()
        .rev()
        .find(|r| r["messages"].is_array())
        .expect("the fake upstream received a chat request")
}

/// The task's runs once `count` of them have finished.
async fn finished_runs(onyx: &Onyx, task: &str, count: usize) -> Vec<Value> {
    wait_until(
        secs(30),
        &format!("{count} finished runs of {task}"),
        async || {
            let runs = onyx.get_json(&format!("/v1/tasks/{task}/runs")).await;
            let runs = runs["data"].as_array()?.clone();
            let finished = runs.iter().filter(|r| r["status"] != "running").count();
            (finished >= count).then_some(runs)
        },
    )
    .await
}

#[tokio::test]
async fn the_session_model_and_effort_reach_the_upstream_and_survive_a_restart() {
    let fakes = Fakes::start().await;
    let config = config(&fakes);
    let onyx = Onyx::start(Some(&config), &[]).await;
    let (id, _) = turn(&onyx, "main", "new", "first").await;
    let before = last_upstream(&fakes);
    assert_eq!(
        before["model"], "fake-script",
        "the agent's own model first: {before}"
    );
    assert!(before.get("reasoning_effort").is_none(), "{before}");

    let (status, patched) = patch(
        &onyx,
        &id,
        json!({"settings": {"model": "openai/fake-echo", "reasoning_effort": "high"}}),
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(
        patched["settings"],
        json!({"model": "openai/fake-echo", "reasoning_effort": "high"})
    );
    let detail = onyx.get_json(&format!("/v1/sessions/{id}")).await;
    assert_eq!(detail["settings"], patched["settings"], "{detail}");

    let (same, answer) = turn(&onyx, "main", &id, "second").await;
    assert_eq!(same, id);
    assert_eq!(answer, "echo: second");
    let sent = last_upstream(&fakes);
    assert_eq!(sent["model"], "fake-echo", "{sent}");
    assert_eq!(sent["reasoning_effort"], "high", "{sent}");
    // Another session of the same agent keeps the agent's settings.
    turn(&onyx, "main", "new", "elsewhere").await;
    let other = last_upstream(&fakes);
    assert_eq!(other["model"], "fake-script", "{other}");
    assert!(other.get("reasoning_effort").is_none(), "{other}");

    let (dir, _) = onyx.stop().await;
    let onyx = Onyx::start_in(dir, Some(&config), &[]).await;
    let detail = onyx.get_json(&format!("/v1/sessions/{id}")).await;
    assert_eq!(
        detail["settings"],
        json!({"model": "openai/fake-echo", "reasoning_effort": "high"}),
        "{detail}"
    );
    turn(&onyx, "main", &id, "after the restart").await;
    let sent = last_upstream(&fakes);
    assert_eq!(
        (&sent["model"], &sent["reasoning_effort"]),
        (&json!("fake-echo"), &json!("high")),
        "{sent}"
    );

    // `null` clears one setting; the others stay.
    let (status, cleared) = patch(&onyx, &id, json!({"settings": {"model": null}})).await;
    assert_eq!(status, 200, "{cleared}");
    assert_eq!(cleared["settings"], json!({"reasoning_effort": "high"}));
    turn(&onyx, "main", &id, "third").await;
    let sent = last_upstream(&fakes);
    assert_eq!(sent["model"], "fake-script", "{sent}");
    assert_eq!(sent["reasoning_effort"], "high", "{sent}");
}

#[tokio::test]
async fn a_safe_session_of_an_allow_all_agent_is_not_offered_dangerous_tools() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes)), &[]).await;
    let (id, _) = turn(&onyx, "main", "new", "hello").await;
    let offered = pluck(&last_upstream(&fakes)["tools"], "/function/name");
    for dangerous in ["exec", "fs_write"] {
        assert!(
            offered.contains(&dangerous.to_string()),
            "{dangerous} is offered in allow-all: {offered:?}"
        );
    }

    let (status, body) = patch(&onyx, &id, json!({"settings": {"permission_mode": "safe"}})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["settings"]["permission_mode"], "safe");
    let (_, answer) = turn(
        &onyx,
        "main",
        &id,
        r#"script: exec {"command": "echo raised"} ; answer"#,
    )
    .await;
    assert!(answer.contains("not available to you"), "{answer}");
    let offered = pluck(&last_upstream(&fakes)["tools"], "/function/name");
    assert!(offered.contains(&"fs_read".to_string()), "{offered:?}");
    for dangerous in ["exec", "fs_write", "fs_edit", "memory_write"] {
        assert!(
            !offered.contains(&dangerous.to_string()),
            "{dangerous} offered to a safe session: {offered:?}"
        );
    }
}

#[tokio::test]
async fn a_patch_cannot_raise_the_mode_route_nowhere_or_reach_another_agent() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes)), &[]).await;
    let (careful, _) = turn(&onyx, "careful", "new", "hi").await;
    let (main, _) = turn(&onyx, "main", "new", "hi").await;

    // Above the agent's own mode: refused, nothing changes (the title neither).
    let (status, body) = patch(
        &onyx,
        &careful,
        json!({"title": "renamed", "settings": {"permission_mode": "allow-all"}}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["param"], "settings.permission_mode", "{body}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("\"ask\""),
        "{body}"
    );
    let detail = onyx.get_json(&format!("/v1/sessions/{careful}")).await;
    assert_eq!(detail["title"], "hi");
    assert_eq!(detail["settings"], json!({}));
    let (status, body) = patch(&onyx, &careful, json!({"settings": {"permission_mode": "ask"}})).await;
    assert_eq!(status, 200, "the agent's own mode is allowed: {body}");

    for (bad, param) in [
        (json!({"model": "nowhere/fake-echo"}), "settings.model"),
        (json!({"model": "not-a-model"}), "settings.model"),
        (json!({"permission_mode": "root"}), "settings.permission_mode"),
        (
            json!({"reasoning_effort": "extreme"}),
            "settings.reasoning_effort",
        ),
        (json!({"temperature": 2}), "settings"),
    ] {
        let (status, body) = patch(&onyx, &main, json!({"settings": bad})).await;
        assert_eq!(status, 400, "{bad}: {body}");
        let named = body["error"]["param"].as_str().unwrap_or_default();
        assert!(named.starts_with(param), "{bad}: {body}");
    }
    assert_eq!(
        onyx.get_json(&format!("/v1/sessions/{main}")).await["settings"],
        json!({})
    );

    // A key scoped to ops cannot touch a session of main.
    let (status, created) = reply(
        onyx.post("/v1/keys")
            .json(&json!({"name": "ops bot", "agents": ["ops"]})),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let ops_key = created["key"].as_str().unwrap().to_string();
    let (status, body) = reply(
        onyx.with_key("PATCH", &format!("/v1/sessions/{main}"), &ops_key)
            .json(&json!({"settings": {"model": "openai/fake-echo"}})),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(
        onyx.get_json(&format!("/v1/sessions/{main}")).await["settings"],
        json!({})
    );
    // On its own agent's session it may lower the mode, never raise it.
    let (ops, _) = turn(&onyx, "ops", "new", "hi").await;
    let (status, body) = reply(
        onyx.with_key("PATCH", &format!("/v1/sessions/{ops}"), &ops_key)
            .json(&json!({"settings": {"permission_mode": "safe", "reasoning_effort": "low"}})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["settings"]["permission_mode"], "safe");
    let careful_key = {
        let (status, created) = reply(
            onyx.post("/v1/keys")
                .json(&json!({"name": "careful bot", "agents": ["careful"]})),
        )
        .await;
        assert_eq!(status, 201, "{created}");
        created["key"].as_str().unwrap().to_string()
    };
    let (status, body) = reply(
        onyx.with_key("PATCH", &format!("/v1/sessions/{careful}"), &careful_key)
            .json(&json!({"settings": {"permission_mode": "allow-all"}})),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["param"], "settings.permission_mode", "{body}");
}

#[tokio::test]
async fn a_scheduled_task_continuing_the_session_uses_its_settings() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes)), &[]).await;
    let (status, task) = reply(onyx.post("/v1/tasks").json(&json!({
        "agent": "main", "prompt": "nightly check", "schedule_type": "cron",
        "schedule_value": "@daily", "context_mode": "main"})))
    .await;
    assert_eq!(status, 201, "{task}");
    let task_id = task["id"].as_str().unwrap();
    let (status, run) = reply(onyx.post(&format!("/v1/tasks/{task_id}/run"))).await;
    assert_eq!(status, 202, "{run}");
    let runs = finished_runs(&onyx, task_id, 1).await;
    let session = runs[0]["session_id"].as_str().unwrap().to_string();
    assert_eq!(last_upstream(&fakes)["model"], "fake-script");

    let (status, body) = patch(
        &onyx,
        &session,
        json!({"settings": {"model": "openai/fake-echo", "reasoning_effort": "low"}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, run) = reply(onyx.post(&format!("/v1/tasks/{task_id}/run"))).await;
    assert_eq!(status, 202, "{run}");
    let runs = finished_runs(&onyx, task_id, 2).await;
    assert!(
        runs.iter().all(|r| r["session_id"] == session.as_str()),
        "{runs:?}"
    );
    let sent = last_upstream(&fakes);
    assert_eq!(sent["model"], "fake-echo", "{sent}");
    assert_eq!(sent["reasoning_effort"], "low", "{sent}");
}
