//! Starting the binary: the embedded default with no config, zero-config
//! providers from the environment, config errors that name the path, the
//! loopback-only rule without a key, `doctor` and `hash-password`.

use std::process::Stdio;

use crate::harness::*;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

#[tokio::test]
async fn serves_with_no_config_file_at_all() {
    let onyx = Onyx::start(None, &[]).await;
    let body: Value = onyx.health().await;
    assert_eq!(body["status"], "ok");
    // No key configured: loopback requests need none.
    let (status, body) = reply(onyx.anonymous("GET", "/v1/models")).await;
    assert_eq!(status, 200);
    // No providers, so no provider models; the main agent always exists.
    assert_eq!(ids(&body), ["onyx:main"]);
    let (status, body) = reply(
        onyx.anonymous("POST", "/v1/chat/completions")
            .json(&json!({"model": "openai/gpt-4o-mini", "messages": [{"role": "user", "content": "x"}]})),
    )
    .await;
    assert_eq!(status, 404);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("OPENAI_API_KEY"),
        "{body}"
    );
}

#[tokio::test]
async fn the_embedded_database_start_up_chatter_stays_out_of_the_default_log() {
    // An empty ONYX_LOG means the default filter (the harness sets `info` otherwise).
    let onyx = Onyx::start(None, &[("ONYX_LOG", ""), ("RUST_LOG", "")]).await;
    let (_, logs) = onyx.stop_and_logs().await;
    assert!(logs.contains("onyx listening on"), "{logs}");
    assert!(logs.contains("applied database migration"), "{logs}");
    for chatter in ["LSM tree", "WAL recovery", "block cache capacity", "kvs store"] {
        assert!(!logs.contains(chatter), "{chatter:?} in the default log:\n{logs}");
    }
}

#[tokio::test]
async fn providers_appear_from_the_environment() {
    let fakes = Fakes::start().await;
    let openai = format!("{}/v1", fakes.openai.url());
    let anthropic = fakes.anthropic.url();
    let ollama = fakes.ollama.url();
    let env = [
        ("OPENAI_API_KEY", onyx_test_fakes::DEFAULT_KEY),
        ("OPENAI_BASE_URL", openai.as_str()),
        ("ANTHROPIC_API_KEY", onyx_test_fakes::DEFAULT_KEY),
        ("ANTHROPIC_BASE_URL", anthropic.as_str()),
        ("OLLAMA_HOST", ollama.as_str()),
        ("ONYX_API_KEY", ONYX_KEY),
    ];
    let onyx = Onyx::start(None, &env).await;
    for model in ["openai/fake-echo", "anthropic/fake-echo", "ollama/fake-echo"] {
        let (status, body) = onyx
            .chat(json!({"model": model, "messages": [{"role": "user", "content": "hi"}]}))
            .await;
        assert_eq!(status, 200, "{model}: {body}");
    }
    let (status, _) = reply(onyx.anonymous("GET", "/v1/models")).await;
    assert_eq!(status, 401, "ONYX_API_KEY turns auth on");
}

#[tokio::test]
async fn config_errors_name_the_path() {
    let cases = [
        (
            r#"{ gateway: { lisen: "127.0.0.1:1" } }"#,
            "gateway.lisen: unknown field `lisen`, expected one of `listen`",
        ),
        (
            r#"{ providers: { openai: { type: "openai", baseUrl: "not a url" } } }"#,
            "providers.openai.baseUrl: not a URL",
        ),
        (
            r#"{ providers: { x: { type: "grpc" } } }"#,
            "providers.x.type: unknown provider type",
        ),
        (
            r#"{ providers: { x: { type: "openai", apiKey: "${MISSING_VAR_FOR_TEST}" } } }"#,
            "providers.x.apiKey: environment variable MISSING_VAR_FOR_TEST is not set",
        ),
        (
            r#"{ models: { aliases: { fast: ["nope/m"] } } }"#,
            "models.aliases.fast[0]: unknown provider",
        ),
        (r#"{ gateway: { maxBodyBytes: "big" } }"#, "gateway.maxBodyBytes"),
        (r#"{ gateway: { listen: 5 "#, "onyx.json5:"),
    ];
    for (config, expected) in cases {
        let (code, stderr) = match Onyx::try_start(Some(config), &[]).await {
            Ok(_) => panic!("{config} started"),
            Err(failure) => failure,
        };
        assert_eq!(code, Some(1), "{config}");
        assert!(
            stderr.contains(expected),
            "{config}: expected {expected:?} in {stderr}"
        );
    }
}

#[tokio::test]
async fn refuses_a_public_address_without_a_key() {
    let dir = tempfile::tempdir().unwrap();
    let output = Onyx::command(dir.path(), &[])
        .args(["serve", "--listen", "0.0.0.0:0"])
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("refusing to listen on 0.0.0.0:0 without an API key"),
        "{stderr}"
    );
}

#[tokio::test]
async fn doctor_prints_a_table_and_fails_on_unreachable_dependencies() {
    let fakes = Fakes::start().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("onyx.json5");
    std::fs::write(&path, fakes.config()).unwrap();
    let output = Onyx::cli(dir.path(), &["doctor"]).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(stdout.starts_with("CHECK"), "{stdout}");
    for row in [
        "config",
        "data dir",
        "auth",
        "openai (provider:openai)",
        "anthropic (provider:anthropic)",
        "ollama (provider:ollama)",
    ] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(row))
            .unwrap_or_else(|| panic!("no {row} row: {stdout}"));
        assert!(line.contains(" ok "), "{line}");
    }

    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let only_dead = TestConfig::empty().set(
        "providers.dead",
        json!({ "type": "ollama", "baseUrl": format!("http://{dead}") }),
    );
    std::fs::write(&path, only_dead.build()).unwrap();
    let output = Onyx::cli(dir.path(), &["doctor"]).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("dead (provider:ollama)") && l.contains("FAIL")),
        "{stdout}"
    );

    std::fs::write(&path, "{ bogus: 1 }").unwrap();
    let output = Onyx::cli(dir.path(), &["doctor"]).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1));
    assert!(stdout.contains("unknown field `bogus`"), "{stdout}");
}

#[tokio::test]
async fn hash_password_makes_an_argon2id_hash_the_config_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Onyx::command(dir.path(), &[])
        .arg("hash-password")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"hunter2 is long\n")
        .await
        .unwrap();
    let output = child.wait_with_output().await.unwrap();
    assert!(output.status.success());
    let hash = String::from_utf8(output.stdout).unwrap().trim().to_string();
    assert!(hash.starts_with("$argon2id$"), "{hash}");
    assert!(onyx::auth::verify_password("hunter2 is long", &hash));
    let config = TestConfig::empty()
        .set("gateway.auth.passwordHash", json!(hash))
        .build();
    let onyx = Onyx::start(Some(&config), &[]).await;
    assert!(onyx.url.starts_with("http://127.0.0.1:"));
}
