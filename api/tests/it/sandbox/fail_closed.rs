//! Issue 37, point 13: fail closed. Where neither a PID nor a network
//! namespace can be made (the gateway as root of a user namespace that may
//! make none, capabilities dropped), `/health` says exactly what is missing,
//! `exec` refuses to run networked unless `tools.exec.network` allows it, and
//! `requireSandbox` refuses it outright; `requireSandbox` is on by default
//! when the gateway listens beyond loopback (as the Docker image does).

use super::*;
use crate::harness::unprivileged::RunAs;

#[tokio::test]
async fn where_no_namespace_can_be_made_exec_refuses_and_health_says_why() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start_as(
        RunAs::WithoutNamespaces,
        Some(&exec_config(&fakes, json!({}))),
        &[],
    )
    .await;
    let health = health(&onyx).await;
    let exec_health = &health["exec"];
    let confinement = &exec_health["confinement"];
    for (part, held) in [
        ("pidNamespace", false),
        ("pidsCgroup", false),
        ("networkNamespace", false),
        ("seccomp", true),
        ("openat2", true),
    ] {
        assert_eq!(confinement[part], held, "{part}: {health}");
    }
    assert_eq!(exec_health["confined"], false, "{health}");
    assert_eq!(exec_health["networkCut"], false, "{health}");
    let detail = exec_health["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("UNCONFINED")
            && detail.contains("no PID namespace")
            && detail.contains("no network namespace"),
        "{detail}"
    );
    let out = exec(&onyx, "echo ran-networked").await;
    assert!(out.contains("the network cannot be cut"), "{out}");
    assert!(!out.contains("ran-networked\n"), "{out}");
    onyx.stop().await;

    // With the network allowed it runs, reported as unconfined.
    let allowed = exec_config(&fakes, json!({ "network": true }));
    let onyx = Onyx::start_as(RunAs::WithoutNamespaces, Some(&allowed), &[]).await;
    let out = exec(&onyx, "echo ran-networked").await;
    assert!(
        out.contains("exit code 0") && out.contains("ran-networked"),
        "{out}"
    );
    onyx.stop().await;

    // requireSandbox refuses it, naming what is missing.
    let required = exec_config(&fakes, json!({ "network": true, "requireSandbox": true }));
    let onyx = Onyx::start_as(RunAs::WithoutNamespaces, Some(&required), &[]).await;
    let out = exec(&onyx, "echo ran-required").await;
    assert!(
        out.contains("exec is refused") && out.contains("requireSandbox") && out.contains("no PID namespace"),
        "{out}"
    );
    assert!(!out.contains("ran-required\n"), "{out}");
}

#[tokio::test]
async fn require_sandbox_defaults_on_beyond_loopback() {
    let fakes = Fakes::start().await;
    // Listening on loopback (the harness's --listen): off unless written.
    let onyx = Onyx::start(Some(&exec_config(&fakes, json!({}))), &[]).await;
    assert_eq!(health(&onyx).await["exec"]["requireSandbox"], false);
    onyx.stop().await;

    // Configured to listen on every interface: doctor shows it on.
    let dir = tempfile::tempdir().unwrap();
    let config = TestConfig::new(&fakes)
        .merge(json!({ "gateway": { "listen": "0.0.0.0:18999" } }))
        .build();
    std::fs::write(dir.path().join("onyx.json5"), config).unwrap();
    let row = doctor_exec_row(dir.path()).await;
    assert!(
        row.contains("tools.exec.requireSandbox: true") && row.contains(" ok "),
        "{row}"
    );
    for part in [
        "Landlock ABI",
        "seccomp",
        "PID namespace",
        "network cut",
        "openat2",
    ] {
        assert!(row.contains(part), "{part}: {row}");
    }
}
