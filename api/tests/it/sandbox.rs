//! The `exec` tool's sandbox on this machine's kernel: a command cannot read
//! the data dir, `/root` or the config, cannot write outside its workspace,
//! sees no secrets in its environment, reaches no network, cannot signal the
//! gateway, and a fork flood
//! or a memory hog is stopped by its limits. `/health` says it is confined.

use crate::harness::*;
use serde_json::{Value, json};

const SECRET_ENV: &[(&str, &str)] = &[
    ("GITHUB_TOKEN", "ghp-secret-in-env-1"),
    ("SOME_SERVICE_API_KEY", "sk-secret-in-env-2"),
    ("ONYX_EXTRA", "onyx-secret-in-env-3"),
    ("DB_PASSWORD", "pw-secret-in-env-4"),
];

fn config(fakes: &Fakes) -> String {
    TestConfig::new(fakes)
        .merge(json!({
            "agents": {
                "defaults": { "model": "openai/fake-script", "permissionMode": "allow-all" },
                "list": [{ "id": "main", "default": true }],
            },
            "tools": { "exec": {
                "timeoutSeconds": 20,
                "limits": { "processes": 48, "memoryMb": 256, "fileSizeMb": 1, "cpuSeconds": 10 },
            } },
        }))
        .build()
}

/// Runs `command` through the agent's `exec` tool; the tool's output. (The
/// fake model's script splits on " ; " and " & ": commands avoid both.)
async fn exec(onyx: &Onyx, command: &str) -> String {
    let script = format!("script: exec {} ; answer", json!({ "command": command }));
    onyx.agent_answer("main", &script).await
}

#[tokio::test]
async fn exec_is_confined_to_its_workspace_without_secrets_or_network() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes)), SECRET_ENV).await;
    let health = onyx.health().await;
    if health["exec"]["confined"] != true {
        // A kernel without Landlock: it says so (and requireSandbox refuses,
        // see the test below); nothing here could hold.
        let detail = health["exec"]["detail"].as_str().unwrap();
        assert!(detail.starts_with("UNCONFINED"), "{health}");
        return;
    }
    assert_eq!(health["exec"]["networkCut"], true, "{health}");

    let home = onyx.dir.path().to_path_buf();
    let data = home.join("data");
    std::fs::write(data.join("private.txt"), "data-dir-secret").unwrap();
    let config_path = home.join("onyx.json5");

    // Its own workspace: read-write.
    let out = exec(&onyx, "echo inside > note.txt && cat note.txt && pwd").await;
    assert!(out.contains("exit code 0") && out.contains("inside"), "{out}");
    assert!(data.join("workspaces/main/note.txt").exists(), "{out}");

    for (what, command, secret) in [
        (
            "the data dir",
            format!("cat {}", data.join("private.txt").display()),
            "data-dir-secret",
        ),
        ("the config", format!("cat {}", config_path.display()), ONYX_KEY),
        ("/root", "ls -a /root".to_string(), ".."),
    ] {
        let out = exec(&onyx, &command).await;
        assert!(!out.contains("exit code 0"), "{what} was readable: {out}");
        assert!(out.contains("Permission denied"), "{what}: {out}");
        assert!(!out.contains(secret), "{what} leaked: {out}");
    }

    for target in [home.join("outside.txt"), "/tmp/onyx-sandbox-escape.txt".into()] {
        let out = exec(&onyx, &format!("echo x > {}", target.display())).await;
        assert!(!out.contains("exit code 0"), "{out}");
        assert!(!target.exists(), "wrote {}", target.display());
    }

    let env = exec(&onyx, "env").await;
    assert!(env.contains("PATH="), "{env}");
    for (name, value) in SECRET_ENV {
        assert!(
            !env.contains(name) && !env.contains(value),
            "{name} reached the command: {env}"
        );
    }
    assert!(!env.contains("ONYX_"), "{env}");

    // No signal reaches the gateway (same user, outside the sandbox).
    let out = exec(&onyx, &format!("kill -0 {} && echo SIGNALLED", onyx.pid())).await;
    assert!(!out.contains("SIGNALLED"), "the command could signal onyx: {out}");

    let url = format!("http://{}/health", onyx.url.trim_start_matches("http://"));
    let out = exec(&onyx, &format!("curl -sS -m 5 {url} && echo REACHED")).await;
    assert!(!out.contains("REACHED"), "the network was reachable: {out}");
}

#[tokio::test]
async fn exec_limits_stop_a_fork_flood_a_memory_hog_and_a_huge_file() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes)), &[]).await;

    let out = exec(
        &onyx,
        "for i in $(seq 1 200); do sleep 30 &done; echo spawned-all",
    )
    .await;
    assert!(
        out.to_lowercase().contains("fork"),
        "the process limit held: {out}"
    );
    // What it did start ends with it (its process group and cgroup are reaped).
    let leftover = wait_until(secs(10), "the flood's processes are gone", async || {
        let ps = std::process::Command::new("pgrep")
            .args(["-f", "^sleep 30$"])
            .output()
            .unwrap();
        let n = String::from_utf8_lossy(&ps.stdout).lines().count();
        (n == 0).then_some(n)
    })
    .await;
    assert_eq!(leftover, 0);

    // 2 GiB of string against a 256 MB address space.
    let out = exec(
        &onyx,
        "awk 'BEGIN { s = \"x\"; for (i = 0; i < 31; i++) s = s s; print length(s) }'",
    )
    .await;
    assert!(
        !out.contains("exit code 0") && !out.contains("2147483648"),
        "{out}"
    );

    let out = exec(&onyx, "head -c 5000000 /dev/zero > big.bin; echo rc=$?").await;
    assert!(!out.contains("rc=0"), "a 5 MB file under a 1 MB limit: {out}");
    let size = std::fs::metadata(onyx.dir.path().join("data/workspaces/main/big.bin")).map_or(0, |m| m.len());
    assert!(size <= 1 << 20, "{size}");
}

#[tokio::test]
async fn require_sandbox_is_reported_and_unconfined_exec_is_described() {
    // With Landlock (this machine's kernel) requireSandbox lets exec run;
    // without it, exec is refused and doctor fails its row. The unconfined
    // wording is also checked in `sandbox`'s unit tests.
    let fakes = Fakes::start().await;
    let config = TestConfig::new(&fakes)
        .merge(json!({
            "agents": { "list": [{ "id": "main", "default": true, "model": "openai/fake-script", "permissionMode": "allow-all" }] },
            "tools": { "exec": { "requireSandbox": true, "network": true } },
        }))
        .build();
    let onyx = Onyx::start(Some(&config), &[]).await;
    let health: Value = onyx.health().await;
    assert_eq!(health["exec"]["requireSandbox"], true, "{health}");
    assert_eq!(
        health["exec"]["networkCut"], false,
        "network: true keeps it: {health}"
    );
    let confined = health["exec"]["confined"] == true;
    let out = exec(&onyx, "echo confined-and-running").await;
    if confined {
        assert!(out.contains("confined-and-running"), "{out}");
    } else {
        assert!(
            out.contains("exec is refused") && out.contains("UNCONFINED"),
            "{out}"
        );
        assert!(!out.contains("confined-and-running"), "{out}");
    }
    // The embedded database is held by serve: stop it before doctor opens it.
    let (dir, _) = onyx.stop().await;
    let doctor = Onyx::cli(dir.path(), &["doctor"]).await;
    let table = String::from_utf8_lossy(&doctor.stdout);
    let row = table
        .lines()
        .find(|l| l.starts_with("exec sandbox"))
        .unwrap_or_else(|| panic!("{table}"));
    if confined {
        assert!(row.contains("ok") && row.contains("Landlock ABI"), "{row}");
    } else {
        assert!(row.contains("FAIL") && row.contains("UNCONFINED"), "{row}");
    }
}
