//! MCP servers added, edited, restarted and removed through
//! `/v1/mcp/servers` while Onyx runs, on two replicas sharing the SurrealDB
//! server, with the real reference servers (`@modelcontextprotocol/server-everything`,
//! PyPI `mcp-server-time`): a server added on one replica runs on the other
//! with its env opened there (never answered in plain text), an edit swaps
//! its process, a restart replaces it, the config file's servers stay
//! read-only, bad input is named, and a gateway started later finds it.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::harness::services::{Service, binary};
use crate::harness::*;

const MASTER_KEY: &str = "9a1c0b6a9e8d7c6b5a4938271605f4e3d2c1b0a99887766554433221100ffe01";
const TOKEN: &str = "mcp-env-token-sealed-5e2d9b71c04a";
const NEW_TOKEN: &str = "mcp-env-token-rotated-0b8f3c6a2e19";

async fn servers(onyx: &Onyx) -> HashMap<String, Value> {
    let list = onyx.get_json("/v1/mcp/servers").await;
    list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap().to_string(), s.clone()))
        .collect()
}

/// Waits until `name` is ready on `onyx` and `holds` of it; returns it.
async fn ready(onyx: &Onyx, name: &str, what: &str, holds: impl Fn(&Value) -> bool) -> Value {
    wait_until(secs(60), what, async || {
        let server = servers(onyx).await.remove(name)?;
        (server["state"] == "ready" && holds(&server)).then_some(server)
    })
    .await
}

fn alive(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| !stat.contains(") Z "))
}

#[tokio::test]
async fn an_mcp_server_added_on_one_replica_runs_on_another_and_changes_apply_live() {
    let (fakes, surreal) = (Fakes::start().await, Service::surreal().await);
    let config = TestConfig::new(&fakes)
        .surreal(&surreal)
        .merge(json!({
            "agents": { "defaults": { "model": "openai/fake-script", "permissionMode": "allow-all" },
                        "list": [ { "id": "main", "default": true } ] },
            "mcp": { "servers": { "time": {
                "command": binary("MCP_TIME_BIN"), "args": ["--local-timezone=UTC"], "trust": "read" } } },
        }))
        .build();
    let env = [("ONYX_MASTER_KEY", MASTER_KEY)];
    let (a, b) = (
        Onyx::start(Some(&config), &env).await,
        Onyx::start(Some(&config), &env).await,
    );

    let everything = json!({"name": "everything", "command": binary("MCP_EVERYTHING_BIN"),
        "args": ["stdio"], "env": {"SERVICE_TOKEN": TOKEN}, "trust": "read"});
    let (status, created) = reply(a.post("/v1/mcp/servers").json(&everything)).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["source"], "api", "{created}");
    assert_eq!(created["env"], json!(["SERVICE_TOKEN"]), "{created}");
    assert!(!created.to_string().contains(TOKEN), "{created}");

    // The other replica runs it too, with the env opened there.
    let on_b = ready(&b, "everything", "the other replica runs the added server", |s| {
        pluck(&s["tools"], "/exposedAs").contains(&"mcp__everything__get-env".to_string())
    })
    .await;
    assert!(!b.get_json("/v1/mcp/servers").await.to_string().contains(TOKEN));
    let answer = b
        .agent_answer("main", r#"script: mcp__everything__get-env {} ; answer"#)
        .await;
    assert!(answer.contains(TOKEN), "{answer}");

    // An edit swaps its process on every replica; a value not named is kept.
    let old_pid = on_b["pid"].as_u64().unwrap();
    let (status, edited) = reply(
        a.patch("/v1/mcp/servers/everything")
            .json(&json!({"env": {"SERVICE_TOKEN": NEW_TOKEN, "EXTRA": "1"}})),
    )
    .await;
    assert_eq!(status, 200, "{edited}");
    assert_eq!(edited["env"], json!(["EXTRA", "SERVICE_TOKEN"]), "{edited}");
    let on_b = ready(
        &b,
        "everything",
        "the other replica restarts it with the edit",
        |s| s["pid"].as_u64().is_some_and(|pid| pid != old_pid),
    )
    .await;
    wait_until(secs(10), "the old process is gone", async || {
        (!alive(old_pid)).then_some(())
    })
    .await;
    let answer = b
        .agent_answer("main", r#"script: mcp__everything__get-env {} ; answer"#)
        .await;
    assert!(answer.contains(NEW_TOKEN) && !answer.contains(TOKEN), "{answer}");

    // A restart replaces this replica's client, the config file's servers too.
    let pid = on_b["pid"].as_u64().unwrap();
    let (status, restarted) = reply(b.post("/v1/mcp/servers/everything/restart")).await;
    assert_eq!(status, 200, "{restarted}");
    ready(&b, "everything", "the restarted server", |s| {
        s["pid"].as_u64().is_some_and(|p| p != pid)
    })
    .await;
    let time_pid = servers(&a).await["time"]["pid"].as_u64();
    assert_eq!(reply(a.post("/v1/mcp/servers/time/restart")).await.0, 200);
    ready(&a, "time", "the restarted config-file server", |s| {
        s["pid"].as_u64() != time_pid
    })
    .await;

    // The config file's servers cannot be changed here; bad input is named.
    let (status, body) = reply(a.patch("/v1/mcp/servers/time").json(&json!({"trust": "write"}))).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("config file"),
        "{body}"
    );
    let (status, body) = reply(a.delete("/v1/mcp/servers/time")).await;
    assert_eq!(status, 409, "{body}");
    let (status, body) = reply(
        a.post("/v1/mcp/servers")
            .json(&json!({"name": "time", "command": "x"})),
    )
    .await;
    assert_eq!(status, 409, "{body}");
    for (spec, param) in [
        (
            json!({"name": "bad", "command": "x", "trust": "sometimes"}),
            Some("trust"),
        ),
        (json!({"name": "a__b", "command": "x"}), Some("name")),
        (
            json!({"name": "bad", "url": "ftp://example.com/mcp"}),
            Some("url"),
        ),
        (
            json!({"name": "bad", "command": "x", "headers": {"A": "b"}}),
            None,
        ),
        (json!({"name": "bad", "command": "x", "colour": "red"}), None),
        (json!({"command": "x"}), Some("name")),
    ] {
        let (status, body) = reply(a.post("/v1/mcp/servers").json(&spec)).await;
        assert_eq!(status, 400, "{spec}: {body}");
        if let Some(param) = param {
            assert_eq!(body["error"]["param"], param, "{spec}: {body}");
        }
    }
    assert!(!servers(&a).await.contains_key("bad"));
    let (status, _) = reply(a.patch("/v1/mcp/servers/nobody").json(&json!({}))).await;
    assert_eq!(status, 404);

    // Only admins change servers.
    let chat_key = a.create_key("chatty", "chat").await["key"]
        .as_str()
        .unwrap()
        .to_string();
    let status = a
        .with_key("POST", "/v1/mcp/servers", &chat_key)
        .json(&json!({"name": "sneaky", "command": "/bin/sh"}))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 403);

    // A gateway started now finds it stored.
    let c = Onyx::start(Some(&config), &env).await;
    ready(&c, "everything", "a gateway started later runs it", |_| true).await;

    // Removed: gone from every replica, its processes stopped.
    let b_pid = servers(&b).await["everything"]["pid"].as_u64().unwrap();
    let (status, body) = reply(a.delete("/v1/mcp/servers/everything")).await;
    assert_eq!(status, 200, "{body}");
    wait_until(
        secs(10),
        "every replica drops it and stops its process",
        async || {
            let gone = !servers(&b).await.contains_key("everything")
                && !servers(&c).await.contains_key("everything");
            (gone && !alive(b_pid)).then_some(())
        },
    )
    .await;
    let answer = b
        .agent_answer(
            "main",
            r#"script: mcp__everything__echo {"message": "x"} ; answer"#,
        )
        .await;
    assert!(
        answer.contains("\"mcp__everything__echo\" is not available"),
        "{answer}"
    );

    let audit = a.get_json("/v1/audit?limit=50").await;
    let actions = pluck(&audit["data"], "/action");
    assert_eq!(
        actions.iter().filter(|a| *a == "mcp_server.changed").count(),
        5,
        "added, edited, two restarts, removed: {audit}"
    );
    assert!(!audit.to_string().contains(NEW_TOKEN), "{audit}");
}
