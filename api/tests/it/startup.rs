//! Starting the binary: the embedded default with no config, zero-config
//! providers from the environment, config errors that name the path, the
//! loopback-only rule without a key, `doctor` and `hash-password`, and a
//! quiet start and clean stop (one migration line, one "listening on", no
//! warning when stopped with SIGTERM).

use std::process::Stdio;

use crate::harness::services::Service;

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
    assert!(logs.contains(" ready "), "{logs}");
    assert!(
        logs.contains(&format!(
            "applied {} migrations in",
            onyx::storage::SCHEMA_VERSION
        )),
        "{logs}"
    );
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

/// Everything one `onyx serve` run printed, stdout and stderr together, from
/// start to a SIGTERM stop; with its exit status.
async fn run_and_stop(
    dir: &std::path::Path,
    config: Option<&str>,
    env: &[(&str, &str)],
) -> (std::process::ExitStatus, Vec<String>) {
    let mut command = Onyx::command(dir, env);
    command.args(["serve", "--listen", "127.0.0.1:0"]);
    if let Some(config) = config {
        let path = dir.join("onyx.json5");
        std::fs::write(&path, config).unwrap();
        command.arg("--config").arg(path);
    }
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let (url_tx, mut url_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut readers = Vec::new();
    for pipe in [
        Box::new(child.stdout.take().unwrap()) as Box<dyn tokio::io::AsyncRead + Unpin + Send>,
        Box::new(child.stderr.take().unwrap()),
    ] {
        let (lines, url_tx) = (lines.clone(), url_tx.clone());
        readers.push(tokio::spawn(async move {
            use tokio::io::AsyncBufReadExt;
            let mut reader = tokio::io::BufReader::new(pipe).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                if let Some(url) = line.strip_prefix("listening on ") {
                    let _ = url_tx.send(url.to_string());
                }
                lines.lock().unwrap().push(line);
            }
        }));
    }
    drop(url_tx);
    let url = tokio::time::timeout(secs(60), url_rx.recv())
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("never listened: {:?}", lines.lock().unwrap()));
    let client = reqwest::Client::new();
    wait_until(secs(30), "onyx is healthy", async || {
        let response = client.get(format!("{url}/health")).send().await.ok()?;
        response.status().is_success().then_some(())
    })
    .await;
    let pid = child.id().unwrap().to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    let status = child.wait().await.unwrap();
    for reader in readers {
        reader.await.unwrap();
    }
    let lines = lines.lock().unwrap().clone();
    (status, lines)
}

fn is_warning(line: &str) -> bool {
    line.contains(" WARN ") || line.contains("\"level\":\"WARN\"") || line.contains(" ERROR ")
}

/// The lines of a run that announce migrations, or say "listening on".
fn count(lines: &[String], needle: &str) -> usize {
    lines.iter().filter(|l| l.contains(needle)).count()
}

#[tokio::test]
async fn a_first_start_says_what_it_migrated_once_and_a_clean_stop_warns_about_nothing() {
    let s3 = Service::s3().await;
    let surreal = Service::surreal().await;
    let fakes = Fakes::start().await;
    let openai = format!("{}/v1", fakes.openai.url());
    let server = TestConfig::empty().surreal(&surreal).s3(&s3).build();
    // The embedded default, then a SurrealDB server with S3 (compose's
    // topology); each with the default log filter and with compose's `info`.
    for (config, log) in [(None, ""), (None, "info"), (Some(server.as_str()), "info")] {
        let dir = tempfile::tempdir().unwrap();
        // A key and a provider: without them Onyx rightly warns.
        let env = [
            ("ONYX_API_KEY", ONYX_KEY),
            ("OPENAI_API_KEY", onyx_test_fakes::DEFAULT_KEY),
            ("OPENAI_BASE_URL", openai.as_str()),
            ("ONYX_LOG", log),
            ("RUST_LOG", ""),
        ];
        let (status, first) = run_and_stop(dir.path(), config, &env).await;
        let what = format!(
            "{} with ONYX_LOG={log:?}",
            if config.is_some() { "server" } else { "embedded" }
        );
        assert!(status.success(), "{what}: {status}\n{}", first.join("\n"));
        assert_eq!(count(&first, "listening on"), 1, "{what}:\n{}", first.join("\n"));
        let migrated: Vec<&String> = first.iter().filter(|l| l.contains("migration")).collect();
        let expected = format!("applied {} migrations in ", onyx::storage::SCHEMA_VERSION);
        assert_eq!(
            migrated.len(),
            1,
            "{what}: one line for the migrations: {migrated:?}"
        );
        assert!(
            migrated[0].contains(&expected) && migrated[0].contains(" ms"),
            "{what}: {migrated:?}"
        );
        let warnings: Vec<&String> = first.iter().filter(|l| is_warning(l)).collect();
        assert!(
            warnings.is_empty(),
            "{what}: a clean run warned:\n{}",
            first.join("\n")
        );
        for noise in [
            "Failed to kill live query",
            "Specify a namespace",
            "No runtime available",
        ] {
            assert_eq!(count(&first, noise), 0, "{what}: {noise}\n{}", first.join("\n"));
        }
        // Started again on the same data: nothing to migrate, nothing said.
        let (status, again) = run_and_stop(dir.path(), config, &env).await;
        assert!(status.success(), "{what}: {status}");
        assert_eq!(count(&again, "migration"), 0, "{what}:\n{}", again.join("\n"));
        assert_eq!(count(&again, "listening on"), 1, "{what}");
        assert!(
            again.iter().all(|l| !is_warning(l)),
            "{what}:\n{}",
            again.join("\n")
        );
    }
}

/// The upgrade fixtures: data dirs written by earlier builds (`make.sh` there).
fn upgrade_fixtures() -> Vec<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upgrade");
    let mut found: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".tar.zst"))
        .collect();
    found.sort();
    assert!(!found.is_empty(), "no upgrade fixture in {}", dir.display());
    found
}

fn unpack_fixture(archive: &std::path::Path, into: &std::path::Path) {
    let file = std::fs::File::open(archive).unwrap();
    tar::Archive::new(zstd::Decoder::new(file).unwrap())
        .unpack(into)
        .unwrap();
}

#[tokio::test]
async fn a_data_dir_from_an_earlier_build_opens_migrates_and_serves_the_same() {
    let fakes = Fakes::start().await;
    let openai = format!("{}/v1", fakes.openai.url());
    for archive in upgrade_fixtures() {
        let expected: Value = serde_json::from_str(
            &std::fs::read_to_string(archive.with_extension("").with_extension("json")).unwrap(),
        )
        .unwrap();
        let home = tempfile::tempdir().unwrap();
        unpack_fixture(&archive, home.path());
        let config = std::fs::read_to_string(home.path().join("onyx.json5")).unwrap();
        let fixture_home = home.path().display().to_string();
        let env = [
            ("FIXTURE_OPENAI_URL", openai.as_str()),
            ("FIXTURE_HOME", fixture_home.as_str()),
            ("ONYX_API_KEY", ONYX_KEY),
        ];
        let what = archive.file_name().unwrap().to_string_lossy().to_string();
        let onyx = Onyx::start_in(home, Some(&config), &env).await;
        for (id, messages) in expected["sessions"].as_object().unwrap() {
            let session = onyx.get_json(&format!("/v1/sessions/{id}")).await;
            let seen: Vec<Value> = session["messages"]
                .as_array()
                .unwrap_or_else(|| panic!("{what}: session {id}: {session}"))
                .iter()
                .map(|m| json!({"role": m["role"], "content": m["content"]}))
                .collect();
            assert_eq!(&Value::Array(seen), messages, "{what}: session {id}");
        }
        let listed = ids(&onyx.get_json("/v1/sessions?agent=main&limit=100").await);
        assert_eq!(
            listed.len(),
            expected["sessions"].as_object().unwrap().len(),
            "{what}: {listed:?}"
        );
        let query = expected["search"]["q"].as_str().unwrap();
        let paths = wait_until(secs(30), "the fixture's memory is found", async || {
            let (status, hits) = reply(onyx.get("/v1/memory/search").query(&[
                ("q", query),
                ("mode", "text"),
                ("agent", "main"),
            ]))
            .await;
            let paths = pluck(&hits["data"], "/path");
            (status == 200 && !paths.is_empty()).then_some(paths)
        })
        .await;
        assert_eq!(json!(paths), expected["search"]["paths"], "{what}");
        let skills = pluck(&onyx.get_json("/v1/skills?agent=main").await["data"], "/name");
        assert_eq!(json!(skills), expected["skills"], "{what}");
        let (status, body) = onyx
            .chat(
                json!({"model": "onyx:main", "messages": [{"role": "user", "content": "after the upgrade"}]}),
            )
            .await;
        assert_eq!(status, 200, "{what}: {body}");
        let (home, logs) = onyx.stop().await;
        // Migrated once, said in one line, and at the current schema.
        let migrated: Vec<&str> = logs.lines().filter(|l| l.contains("migration")).collect();
        assert!(migrated.len() <= 1, "{what}: {migrated:?}");
        let output = Onyx::command(home.path(), &env)
            .args(["doctor", "--config"])
            .arg(home.path().join("onyx.json5"))
            .output()
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let schema = stdout
            .lines()
            .find(|l| l.starts_with("schema"))
            .unwrap_or_else(|| panic!("{what}: no schema row: {stdout}"));
        assert!(
            schema.contains(" ok ") && schema.contains(&format!("version {}", onyx::storage::SCHEMA_VERSION)),
            "{what}: {schema}"
        );
    }
}
