//! Issue 37, point 2: `exec` kills every descendant. A command starts a
//! `setsid` child and a double-forked one (each out of the command's process
//! group, the second reparented away from it), waits until both run, and
//! returns; right after the call neither is left, as `nobody` (a user and a
//! PID namespace: the command is the namespace's init) and as root.

use super::*;
use crate::harness::unprivileged::RunAs;

async fn nothing_outlives_exec(who: RunAs) {
    let fakes = Fakes::start().await;
    let config = exec_config(&fakes, json!({ "timeoutSeconds": 30 }));
    let onyx = Onyx::start_as(who, Some(&config), &[]).await;
    // Durations unique to this test and run: the processes to look for.
    let seed = std::process::id() % 10_000 + if who == RunAs::Root { 0 } else { 10_000 };
    let (first, second) = ((900_000 + seed).to_string(), (800_000 + seed).to_string());
    // `setsid -f`: a new session, in the background.
    let command = format!(
        "setsid -f sh -c 'echo up > setsid.txt && exec sleep {first}' </dev/null >/dev/null 2>&1 && (sh -c 'echo up > forked.txt && exec sleep {second}' </dev/null >/dev/null 2>&1 &) && while [ ! -s setsid.txt ] || [ ! -s forked.txt ]; do sleep 0.05; done && echo both-running"
    );
    let out = exec(&onyx, &command).await;
    assert!(out.contains("both-running"), "{out}");
    let workspace = onyx.workspace("main");
    assert!(workspace.join("setsid.txt").exists() && workspace.join("forked.txt").exists());
    let what = format!("the exec call ({who:?})");
    assert_all_end(secs(0), &what, || {
        [first.as_str(), second.as_str()]
            .iter()
            .flat_map(|d| running(&["sleep", d]))
            .collect()
    })
    .await;
}

#[tokio::test]
async fn exec_leaves_no_process_behind_as_nobody() {
    nothing_outlives_exec(RunAs::Nobody).await;
}

#[tokio::test]
async fn exec_leaves_no_process_behind_as_root() {
    nothing_outlives_exec(RunAs::Root).await;
}

/// A `kill -9` of the gateway (or the OOM killer) runs none of its clean-up:
/// the helper and the namespace's init die with it (the parent-death signal),
/// and with the init everything the command started.
async fn nothing_outlives_a_killed_gateway(who: RunAs) {
    let fakes = Fakes::start().await;
    let config = exec_config(&fakes, json!({ "timeoutSeconds": 300 }));
    let onyx = Onyx::start_as(who, Some(&config), &[]).await;
    let seed = std::process::id() % 10_000 + if who == RunAs::Root { 0 } else { 10_000 };
    let durations: Vec<String> = [700_000, 600_000, 500_000]
        .iter()
        .map(|base| (base + seed).to_string())
        .collect();
    let [detached, forked, own] = [&durations[0], &durations[1], &durations[2]];
    // A new session, a double fork, and the command itself: all still running when the gateway dies.
    let command = format!(
        "setsid -f sh -c 'exec sleep {detached}' </dev/null >/dev/null 2>&1 && (sh -c 'exec sleep {forked}' </dev/null >/dev/null 2>&1 &) && exec sleep {own}"
    );
    let script = format!("script: exec {} ; answer", json!({ "command": command }));
    let turn = onyx
        .post("/v1/chat/completions")
        .json(&json!({"model": "onyx:main", "messages": [{"role": "user", "content": script}]}));
    let turn = tokio::spawn(async move { turn.send().await });
    let sleeping = || -> Vec<u32> { durations.iter().flat_map(|d| running(&["sleep", d])).collect() };
    wait_until(secs(30), "the command and both children run", async || {
        (sleeping().len() == 3).then_some(())
    })
    .await;
    let _dir = onyx.crash().await;
    assert_all_end(secs(10), &format!("the killed gateway ({who:?})"), sleeping).await;
    turn.abort();
}

#[tokio::test]
async fn a_killed_gateway_leaves_no_process_behind_as_nobody() {
    nothing_outlives_a_killed_gateway(RunAs::Nobody).await;
}

#[tokio::test]
async fn a_killed_gateway_leaves_no_process_behind_as_root() {
    nothing_outlives_a_killed_gateway(RunAs::Root).await;
}
