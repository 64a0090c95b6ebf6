//! Issue 41, point 6: `exec` with `background: true` and the `process` tool,
//! through the real binary, its sandbox and the scripted fake model. A
//! background command with a `setsid` grandchild is listed, its output read,
//! and `stop` ends it and the grandchild; another agent can neither see nor
//! stop it; an agent has at most 8 running; a graceful shutdown ends them
//! all; `safe` mode offers neither `exec` nor `process`.

use crate::harness::*;
use serde_json::{Value, json};

fn config(fakes: &Fakes, mode: &str) -> String {
    TestConfig::new(fakes)
        .merge(json!({
            "agents": {
                "defaults": { "model": "openai/fake-script", "permissionMode": mode, "maxIterations": 4 },
                "list": [{ "id": "main", "default": true }, { "id": "other" }],
            },
            "tools": { "exec": { "timeoutSeconds": 20 } },
        }))
        .build()
}

/// One tool call by `agent`; what the tool answered. (The fake model's script
/// splits on " ; " and " & ": arguments avoid both.)
async fn call(onyx: &Onyx, agent: &str, tool: &str, args: Value) -> String {
    let answer = onyx
        .agent_answer(agent, &format!("script: {tool} {args} ; answer"))
        .await;
    answer
        .strip_prefix("script done: ")
        .unwrap_or_else(|| panic!("{answer}"))
        .to_string()
}

/// Waits (polling, bounded) until `sleep duration` runs.
async fn wait_running(duration: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while running(&["sleep", duration]).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "sleep {duration} never started"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Kills what a failed test left, then fails on it.
fn assert_gone(durations: &[&str], context: &str) {
    let left: Vec<u32> = durations.iter().flat_map(|d| running(&["sleep", d])).collect();
    for pid in &left {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
    assert!(left.is_empty(), "{context}: still running: {left:?}");
}

/// Durations unique to this test run: the processes to look for.
fn durations(base: u32, count: u32) -> Vec<String> {
    let seed = std::process::id() % 10_000;
    (0..count).map(|i| (base + seed * 10 + i).to_string()).collect()
}

#[tokio::test]
async fn a_background_command_is_listed_read_and_stopped_with_its_grandchild_by_its_agent_only() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes, "allow-all")), &[]).await;
    let sleeps = durations(7_000_000, 2);
    let (grandchild, child) = (sleeps[0].as_str(), sleeps[1].as_str());
    // A `setsid -f` grandchild: out of the command's process group and session.
    let command = format!(
        "setsid -f sleep {grandchild} </dev/null >/dev/null 2>&1 && echo to-stdout && echo to-stderr >&2 && exec sleep {child}"
    );
    let started = call(
        &onyx,
        "main",
        "exec",
        json!({ "command": command, "background": true }),
    )
    .await;
    assert!(started.starts_with("started background process p-1"), "{started}");
    wait_running(grandchild).await;
    wait_running(child).await;

    let list = call(&onyx, "main", "process", json!({ "action": "list" })).await;
    assert!(
        list.starts_with("p-1  running  started 20") && list.contains(&format!("exec sleep {child}")),
        "{list}"
    );
    let output = call(
        &onyx,
        "main",
        "process",
        json!({ "action": "output", "id": "p-1" }),
    )
    .await;
    assert!(
        output.starts_with("p-1 running; output bytes 0..20 of 20\n")
            && output.contains("to-stdout\n")
            && output.contains("to-stderr\n"),
        "{output}"
    );
    let from_offset = call(
        &onyx,
        "main",
        "process",
        json!({ "action": "output", "id": "p-1", "offset": 10 }),
    )
    .await;
    assert!(
        from_offset.starts_with("p-1 running; output bytes 10..20 of 20\n"),
        "{from_offset}"
    );

    // Another agent: nothing listed, p-1 unknown to it, and it keeps running.
    let theirs = call(&onyx, "other", "process", json!({ "action": "list" })).await;
    assert_eq!(theirs, "no background processes");
    for action in ["output", "stop"] {
        let refused = call(
            &onyx,
            "other",
            "process",
            json!({ "action": action, "id": "p-1" }),
        )
        .await;
        assert_eq!(
            refused, "error: you have no background process \"p-1\" (process list shows yours)",
            "{action}"
        );
    }
    assert!(!running(&["sleep", child]).is_empty() && !running(&["sleep", grandchild]).is_empty());

    let stopped = call(&onyx, "main", "process", json!({ "action": "stop", "id": "p-1" })).await;
    assert_eq!(stopped, "p-1 stopped");
    assert_gone(&[child, grandchild], "after process stop");
    let list = call(&onyx, "main", "process", json!({ "action": "list" })).await;
    assert!(list.starts_with("p-1  stopped  started "), "{list}");
    let again = call(&onyx, "main", "process", json!({ "action": "stop", "id": "p-1" })).await;
    assert_eq!(again, "p-1 had already ended: stopped");

    // One that ends by itself: its exit code.
    let started = call(
        &onyx,
        "main",
        "exec",
        json!({ "command": "echo bye && exit 3", "background": true }),
    )
    .await;
    assert!(started.starts_with("started background process p-2"), "{started}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let output = call(
            &onyx,
            "main",
            "process",
            json!({ "action": "output", "id": "p-2" }),
        )
        .await;
        if output.starts_with("p-2 exited with code 3;") {
            assert!(output.ends_with("\nbye\n"), "{output}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{output}");
    }
    let unknown = call(&onyx, "main", "process", json!({ "action": "kill", "id": "p-2" })).await;
    assert!(unknown.starts_with("error: unknown action \"kill\""), "{unknown}");
}

#[tokio::test]
async fn an_agent_runs_at_most_eight_and_shutdown_stops_them_all() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes, "allow-all")), &[]).await;
    let sleeps = durations(6_000_000, 9);
    let calls: Vec<String> = sleeps
        .iter()
        .map(|d| {
            let args = json!({ "command": format!("exec sleep {d}"), "background": true });
            format!("exec {args}")
        })
        .collect();
    let answer = onyx
        .agent_answer("main", &format!("script: {} ; answer", calls.join(" & ")))
        .await;
    let parts: Vec<&str> = answer.trim_start_matches("script done: ").split(" | ").collect();
    let started = parts
        .iter()
        .filter(|p| p.starts_with("started background process p-"))
        .count();
    let refused: Vec<&&str> = parts.iter().filter(|p| p.starts_with("error:")).collect();
    assert_eq!((started, refused.len()), (8, 1), "{answer}");
    assert!(
        refused[0].contains("you already have 8 background processes running"),
        "{answer}"
    );
    // The eight the table lists, each waited for until its `sleep` runs.
    let list = call(&onyx, "main", "process", json!({ "action": "list" })).await;
    let mut live: Vec<&str> = Vec::new();
    for d in &sleeps {
        if list.contains(&format!("exec sleep {d}")) {
            wait_running(d).await;
            live.push(d);
        }
    }
    assert_eq!(live.len(), 8, "{list}");

    let (status, logs) = onyx.stop_and_logs().await;
    assert!(status.success(), "{status:?}: {logs}");
    assert_gone(&live, "after a graceful shutdown");
}

#[tokio::test]
async fn safe_mode_offers_neither_exec_nor_process() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes, "safe")), &[]).await;
    let answer = onyx.agent_answer("main", "script: answer").await;
    assert!(answer.starts_with("script done"), "{answer}");
    let request = fakes
        .openai
        .state
        .requests()
        .into_iter()
        .rev()
        .find(|r| r["model"] == "fake-script")
        .unwrap();
    let offered = pluck(&request["tools"], "/function/name");
    assert!(offered.contains(&"grep".to_string()), "{offered:?}");
    assert!(
        !offered.contains(&"process".to_string()) && !offered.contains(&"exec".to_string()),
        "{offered:?}"
    );
    // Called anyway (a model that names a tool it was not offered): refused.
    let refused = onyx
        .agent_answer("main", r#"script: process {"action": "list"} ; answer"#)
        .await;
    assert_eq!(
        refused,
        "script done: error: the tool \"process\" is not available to you"
    );
}
