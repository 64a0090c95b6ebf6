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
    let left: Vec<u32> = [first.as_str(), second.as_str()]
        .iter()
        .flat_map(|d| running(&["sleep", d]))
        .collect();
    // Kill what is left before failing, so a failure leaves nothing behind.
    for pid in &left {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
    assert!(
        left.is_empty(),
        "{who:?}: processes outlived the exec call: {left:?}"
    );
}

#[tokio::test]
async fn exec_leaves_no_process_behind_as_nobody() {
    nothing_outlives_exec(RunAs::Nobody).await;
}

#[tokio::test]
async fn exec_leaves_no_process_behind_as_root() {
    nothing_outlives_exec(RunAs::Root).await;
}
