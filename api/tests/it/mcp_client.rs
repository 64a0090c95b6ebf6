//! Onyx as an MCP client, against real MCP servers nobody on this project
//! wrote (installed by `tests/run`): the reference server
//! `@modelcontextprotocol/server-everything` over stdio, streamable HTTP and
//! the older HTTP+SSE, and the PyPI `mcp-server-time` over stdio. Agent runs
//! through the scripted fake model call their tools; servers that will not
//! start or hang give clear errors without holding anything up; dangerous
//! tools wait for approval in `ask` mode; a killed server comes back; and
//! scheduled runs start no processes.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::harness::services::{Service, binary};
use crate::harness::*;

fn everything_stdio() -> Value {
    json!({"command": binary("MCP_EVERYTHING_BIN"), "args": ["stdio"]})
}

fn time_stdio() -> Value {
    json!({"command": binary("MCP_TIME_BIN"), "args": ["--local-timezone=UTC"], "trust": "read"})
}

async fn servers(onyx: &Onyx) -> HashMap<String, Value> {
    let list = onyx.get_json("/v1/mcp/servers").await;
    list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap().to_string(), s.clone()))
        .collect()
}

/// Waits until every named server is in `state`; returns them all.
async fn wait_for_state(onyx: &Onyx, names: &[&str], state: &str) -> HashMap<String, Value> {
    wait_until(
        secs(60),
        &format!("MCP servers {names:?} are {state}"),
        async || {
            let all = servers(onyx).await;
            names.iter().all(|n| all[*n]["state"] == state).then_some(all)
        },
    )
    .await
}

/// Every process below `pid` (children, grandchildren, …), from /proc.
fn descendants(pid: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // The parent is the second field after the command, which may hold spaces.
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let parent: u32 = after.split(' ').nth(1).unwrap().parse().unwrap();
        children.entry(parent).or_default().push(child);
    }
    let mut out = Vec::new();
    let mut queue = vec![pid];
    while let Some(next) = queue.pop() {
        for child in children.get(&next).into_iter().flatten() {
            out.push(*child);
            queue.push(*child);
        }
    }
    out.sort_unstable();
    out
}

#[tokio::test]
async fn agents_call_real_mcp_servers_over_stdio_http_and_sse_and_bad_servers_stay_contained() {
    let fakes = Fakes::start().await;
    let http = Service::mcp_everything("streamableHttp").await;
    let sse = Service::mcp_everything("sse").await;
    let mut slow = everything_stdio();
    slow["callTimeoutSeconds"] = json!(2);
    // A variable its config names reaches it (the rest of the gateway's
    // environment does not), long enough for get-env's answer to be cut.
    let mut everything = everything_stdio();
    everything["env"] = json!({ "NAMED_IN_CONFIG": "x".repeat(400) });
    let config = TestConfig::new(&fakes)
        .merge(json!({
            "agents": {
                "defaults": { "model": "openai/fake-script", "permissionMode": "allow-all" },
                "list": [
                    { "id": "main", "default": true },
                    { "id": "timekeeper", "mcp": ["time"] },
                    { "id": "no-time", "tools": { "deny": ["mcp__time"] } },
                ],
            },
            "mcp": {
                "startTimeoutSeconds": 10,
                "maxOutputChars": 300,
                "servers": {
                    "everything": everything,
                    "slow": slow,
                    "time": time_stdio(),
                    "remote": { "url": format!("http://{}/mcp", http.addr) },
                    "legacy": { "type": "sse", "url": format!("http://{}/sse", sse.addr) },
                    "missing": { "command": "/nonexistent/mcp-server" },
                    "hangs": { "command": "sleep", "args": ["600"] },
                    "later": { "command": binary("MCP_TIME_BIN"), "startup": "lazy" },
                },
            },
        }))
        .build();
    let onyx = Onyx::start(Some(&config), &[]).await;

    let all = wait_for_state(
        &onyx,
        &["everything", "slow", "time", "remote", "legacy"],
        "ready",
    )
    .await;
    let tools = |server: &str| pluck(&all[server]["tools"], "/exposedAs");
    assert!(
        tools("everything").contains(&"mcp__everything__get-sum".to_string()),
        "{all:?}"
    );
    assert!(
        tools("time").contains(&"mcp__time__get_current_time".to_string()),
        "{all:?}"
    );
    assert!(
        tools("remote").contains(&"mcp__remote__echo".to_string()),
        "{all:?}"
    );
    assert!(
        tools("legacy").contains(&"mcp__legacy__echo".to_string()),
        "{all:?}"
    );
    assert_eq!(all["everything"]["transport"], "stdio");
    assert_eq!(all["legacy"]["transport"], "sse");
    assert!(
        all["everything"]["pid"]
            .as_u64()
            .and_then(|pid| u32::try_from(pid).ok())
            .is_some_and(alive),
        "{all:?}"
    );
    assert_eq!(
        all["later"]["state"], "idle",
        "lazy: not started before a run needs it"
    );

    // A server that cannot start, and one that never answers the handshake,
    // fail with a reason and are retried; nothing waits on them.
    let all = wait_for_state(&onyx, &["missing", "hangs"], "failed").await;
    let error = |server: &str| all[server]["lastError"].as_str().unwrap_or_default().to_string();
    assert!(error("missing").contains("cannot start"), "{all:?}");
    assert!(
        error("hangs").contains("did not start and answer the MCP handshake within 10 s"),
        "{all:?}"
    );
    let health = onyx.health().await;
    assert_eq!(health["status"], "degraded", "{health}");
    let hangs = health["mcp"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "hangs")
        .unwrap();
    assert_eq!(hangs["state"], "failed", "{health}");

    // One run calls every kind of server, and gets their real answers.
    let answer = onyx
        .agent_answer(
            "main",
            r#"script: mcp__everything__get-sum {"a": 2, "b": 3} & mcp__time__get_current_time {"timezone": "Europe/Berlin"} & mcp__remote__echo {"message": "over streamable http"} & mcp__legacy__echo {"message": "over the old sse"} ; answer"#,
        )
        .await;
    assert!(answer.contains("The sum of 2 and 3 is 5"), "{answer}");
    assert!(answer.contains("Europe/Berlin"), "{answer}");
    assert!(answer.contains("over streamable http"), "{answer}");
    assert!(answer.contains("over the old sse"), "{answer}");

    // Images are described, long output is cut, a tool error reaches the
    // model as an error, and a call that outlasts its timeout is cancelled.
    let answer = onyx
        .agent_answer(
            "main",
            r#"script: mcp__everything__get-tiny-image {} & mcp__everything__get-env {} & mcp__everything__get-sum {"a": "two"} & mcp__slow__trigger-long-running-operation {"duration": 20, "steps": 2} ; answer"#,
        )
        .await;
    assert!(answer.contains("[image: image/png"), "{answer}");
    assert!(answer.contains("more characters cut]"), "{answer}");
    assert!(answer.contains("error:"), "{answer}");
    assert!(
        answer.contains("the MCP server slow did not answer trigger-long-running-operation within 2 s"),
        "{answer}"
    );
    // The server that timed out still works.
    let answer = onyx
        .agent_answer(
            "main",
            r#"script: mcp__slow__echo {"message": "still here"} ; answer"#,
        )
        .await;
    assert!(answer.contains("still here"), "{answer}");

    // An agent's `mcp` list and deny list decide which servers it sees;
    // the lazy server starts when a run of an agent that may use it needs it.
    let answer = onyx
        .agent_answer(
            "timekeeper",
            r#"script: mcp__everything__echo {"message": "x"} ; answer"#,
        )
        .await;
    assert!(answer.contains("is not available to you"), "{answer}");
    let answer = onyx
        .agent_answer("no-time", r#"script: mcp__time__get_current_time {"timezone": "UTC"} ; mcp__later__get_current_time {"timezone": "UTC"} ; answer"#)
        .await;
    assert!(
        answer.contains("mcp__time__get_current_time\" is not available to you"),
        "{answer}"
    );
    assert!(
        answer.contains("\"timezone\": \"UTC\""),
        "the lazy server answered: {answer}"
    );
    assert_eq!(servers(&onyx).await["later"]["state"], "ready");

    // Stopping the gateway stops every server it started.
    let pids: Vec<u32> = servers(&onyx)
        .await
        .values()
        .filter_map(|s| s["pid"].as_u64().and_then(|pid| u32::try_from(pid).ok()))
        .collect();
    assert!(pids.len() >= 4, "{pids:?}");
    let onyx_pid = onyx.pid();
    let (status, logs) = onyx.stop_and_logs().await;
    assert!(status.success(), "{logs}");
    for pid in pids {
        assert!(!alive(pid), "MCP server {pid} outlived the gateway");
    }
    assert!(descendants(onyx_pid).is_empty());
}

#[tokio::test]
async fn dangerous_mcp_tools_wait_for_approval_in_ask_mode() {
    let fakes = Fakes::start().await;
    let config = TestConfig::new(&fakes)
        .merge(json!({
            "agents": { "defaults": { "model": "openai/fake-script", "permissionMode": "ask" },
                        "list": [ { "id": "main", "default": true } ] },
            "mcp": { "servers": { "everything": everything_stdio(), "time": time_stdio() } },
        }))
        .build();
    let onyx = Onyx::start(Some(&config), &[]).await;
    wait_for_state(&onyx, &["everything", "time"], "ready").await;

    // `trust: "read"` runs at once; the default (dangerous) waits.
    let chat = onyx
        .post("/v1/chat/completions")
        .json(&json!({"model": "onyx:main", "messages": [{"role": "user", "content":
            r#"script: mcp__time__get_current_time {"timezone": "UTC"} ; mcp__everything__echo {"message": "approved echo"} ; answer"#}]}))
        .send();
    let chat = tokio::spawn(chat);
    let approval = wait_until(secs(30), "an approval request", async || {
        onyx.get_json("/v1/approvals").await["data"]
            .as_array()
            .and_then(|a| a.first().cloned())
    })
    .await;
    assert_eq!(approval["tool"], "mcp__everything__echo", "{approval}");
    assert_eq!(approval["arguments"]["message"], "approved echo");
    let id = approval["id"].as_str().unwrap();
    let (status, _) = reply(
        onyx.post(&format!("/v1/approvals/{id}"))
            .json(&json!({"decision": "approve"})),
    )
    .await;
    assert_eq!(status, 200);
    let response = chat.await.unwrap().unwrap();
    let body: Value = response.json().await.unwrap();
    let answer = body["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(answer.contains("Echo: approved echo"), "{answer}");
    assert!(answer.contains("\"timezone\": \"UTC\""), "{answer}");
}

#[tokio::test]
async fn a_killed_mcp_server_restarts_and_fifty_scheduled_runs_start_no_processes() {
    let fakes = Fakes::start().await;
    let config = TestConfig::new(&fakes)
        .merge(json!({
            "agents": { "defaults": { "model": "openai/fake-script", "permissionMode": "allow-all" },
                        "list": [ { "id": "main", "default": true } ] },
            "mcp": { "servers": { "time": time_stdio() } },
        }))
        .build();
    let onyx = Onyx::start(Some(&config), &[]).await;
    let first = wait_for_state(&onyx, &["time"], "ready").await["time"].clone();
    let first_pid = first["pid"].as_u64().unwrap();

    // Killed from outside: the supervisor notices and starts it again.
    let killed = std::process::Command::new("kill")
        .args(["-9", &first_pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let again = wait_until(secs(30), "the killed server is back", async || {
        let time = servers(&onyx).await["time"].clone();
        (time["state"] == "ready" && time["pid"].as_u64() != Some(first_pid)).then_some(time)
    })
    .await;
    assert_eq!(again["restarts"], 1, "{again}");
    assert!(
        again["lastError"]
            .as_str()
            .unwrap()
            .contains("the connection ended"),
        "{again}"
    );
    let answer = onyx
        .agent_answer(
            "main",
            r#"script: mcp__time__get_current_time {"timezone": "Asia/Tokyo"} ; answer"#,
        )
        .await;
    assert!(answer.contains("Asia/Tokyo"), "{answer}");

    // Fifty scheduled runs, each calling the server, share its one process.
    let before = descendants(onyx.pid());
    assert_eq!(before.len(), 1, "only the MCP server: {before:?}");
    let mut ids = Vec::new();
    for i in 0..50 {
        let (status, task) = reply(onyx.post("/v1/tasks").json(&json!({
            "name": format!("clock {i}"), "schedule_type": "once", "schedule_value": "+1s",
            "prompt": r#"script: mcp__time__get_current_time {"timezone": "Europe/Paris"} ; answer"#,
        })))
        .await;
        assert_eq!(status, 201, "{task}");
        ids.push(task["id"].as_str().unwrap().to_string());
    }
    let mut peak = before.len();
    for id in &ids {
        let run = wait_until(secs(120), &format!("task {id} ran"), async || {
            peak = peak.max(descendants(onyx.pid()).len());
            let runs = onyx.get_json(&format!("/v1/tasks/{id}/runs")).await;
            runs["data"]
                .as_array()
                .and_then(|r| r.first().cloned())
                .filter(|r| r["status"] != "running")
        })
        .await;
        assert_eq!(run["status"], "succeeded", "{run}");
        assert!(run["result"].as_str().unwrap().contains("Europe/Paris"), "{run}");
    }
    assert_eq!(peak, 1, "no run started a process of its own");
    assert_eq!(
        descendants(onyx.pid()),
        before,
        "the same one process after 50 runs"
    );
    assert_eq!(servers(&onyx).await["time"]["restarts"], 1);
}

/// A `kill -9` of the gateway runs none of its clean-up: its stdio servers
/// die with it all the same (`onyx tethered` asked for the parent-death
/// signal). The server here is one that outlives the end of its stdin: the
/// real time server, then a long sleep in the same process.
#[tokio::test]
async fn a_killed_gateway_takes_its_stdio_servers_with_it() {
    use std::os::unix::fs::PermissionsExt;
    let install = tempfile::tempdir().unwrap();
    let script = install.path().join("stubborn-server.sh");
    let time = binary("MCP_TIME_BIN");
    std::fs::write(
        &script,
        format!("#!/bin/sh\n'{time}' \"$@\"\nexec sleep 1000000\n"),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let server = json!({"command": script, "args": ["--local-timezone=UTC"], "trust": "read"});
    let fakes = Fakes::start().await;
    let config = TestConfig::new(&fakes)
        .merge(json!({ "mcp": { "servers": { "time": server } } }))
        .build();
    let onyx = Onyx::start(Some(&config), &[]).await;
    let ready = wait_for_state(&onyx, &["time"], "ready").await;
    let pid = u32::try_from(ready["time"]["pid"].as_u64().unwrap()).unwrap();
    assert!(alive(pid), "{ready:?}");
    let _dir = onyx.crash().await;
    assert_all_end(secs(10), "the killed gateway", || {
        [pid].into_iter().filter(|&pid| alive(pid)).collect()
    })
    .await;
}
