//! The sandbox on this machine's kernel. Here: a command cannot read the
//! data dir, `/root`, the config or the rest of `/etc`, cannot write outside
//! its workspace, reaches no network, cannot signal the gateway, and a fork
//! flood or a memory hog is stopped by its limits; `/health` and `doctor`
//! say what is confined. Beside it, one module per hole of issue 37, each
//! driving the real binary (as `nobody` where the point is the sandbox):
//! `races` (file tools and a link swapped in), `descendants` (what `exec`
//! leaves behind), `sockets` (Unix sockets outside), `environment` (what
//! commands, MCP servers and CLIs inherit), `cli` (vendor CLIs confined),
//! `fail_closed` (what is refused where confinement is missing).

mod cli;
mod descendants;
mod environment;
mod fail_closed;
mod races;
mod sockets;

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
    exec_as(onyx, "main", command).await
}

async fn exec_as(onyx: &Onyx, agent: &str, command: &str) -> String {
    let script = format!("script: exec {} ; answer", json!({ "command": command }));
    onyx.agent_answer(agent, &script).await
}

/// `/health` with the key: the authenticated view, with the sandbox's detail.
async fn health(onyx: &Onyx) -> Value {
    onyx.get_json("/health").await
}

/// `onyx doctor`'s row about the exec sandbox, for the config in `dir`.
async fn doctor_exec_row(dir: &std::path::Path) -> String {
    let doctor = Onyx::cli(dir, &["doctor"]).await;
    let table = String::from_utf8_lossy(&doctor.stdout);
    table
        .lines()
        .find(|l| l.starts_with("exec sandbox"))
        .unwrap_or_else(|| panic!("{table}"))
        .to_string()
}

/// A config whose agent `main` may run anything, on the scripted fake model.
fn exec_config(fakes: &Fakes, exec: Value) -> String {
    TestConfig::new(fakes)
        .merge(json!({
            "agents": {
                "defaults": { "model": "openai/fake-script", "permissionMode": "allow-all", "maxIterations": 12 },
                "list": [{ "id": "main", "default": true }],
            },
            "tools": { "exec": exec },
        }))
        .build()
}

#[tokio::test]
async fn exec_is_confined_to_its_workspace_without_secrets_or_network() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes)), SECRET_ENV).await;
    let health = health(&onyx).await;
    // This machine's kernel confines every part; a test run elsewhere must fail, not pass by skipping.
    assert_eq!(health["exec"]["confined"], true, "{health}");
    assert_eq!(health["exec"]["networkCut"], true, "{health}");
    let confinement = &health["exec"]["confinement"];
    for part in ["openat2", "seccomp", "pidNamespace", "networkNamespace"] {
        assert_eq!(confinement[part], true, "{part}: {health}");
    }
    assert!(confinement["landlockAbi"].as_u64().unwrap() >= 6, "{health}");

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
        // /etc is narrowed to what programs need: not its other files.
        ("/etc/shadow's folder", "ls /etc".to_string(), "passwd"),
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
async fn the_programs_agents_run_still_run_inside() {
    // Default limits (Node reserves more address space than the limits test allows).
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&exec_config(&fakes, json!({}))), &[]).await;
    // The parts of /etc they need are there, and a /proc of their own.
    let command = format!(
        "export PATH=/usr/local/bin:/usr/bin:/bin && id -un && python3 -c 'import ssl, locale; ssl.create_default_context(); print(\"python-ok\")' && node -e 'console.log(require(\"tls\").rootCertificates.length > 0 ? \"node-ok\" : \"no-certs\")' && git init -q repo && git -C repo status --short && echo git-ok && curl --version | head -n 1 && TZ=Europe/Berlin date +%Z && head -c 1 /proc/self/maps > /dev/null && echo proc-ok && test ! -e /proc/{}/environ && echo gateway-unseen",
        onyx.pid()
    );
    let out = exec(&onyx, &command).await;
    for expected in [
        "exit code 0",
        "root",
        "python-ok",
        "node-ok",
        "git-ok",
        "curl ",
        "CE",
        "proc-ok",
        "gateway-unseen",
    ] {
        assert!(out.contains(expected), "{expected}: {out}");
    }
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
    let health: Value = health(&onyx).await;
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
    let row = doctor_exec_row(dir.path()).await;
    if confined {
        assert!(row.contains("ok") && row.contains("Landlock ABI"), "{row}");
    } else {
        assert!(row.contains("FAIL") && row.contains("UNCONFINED"), "{row}");
    }
}
