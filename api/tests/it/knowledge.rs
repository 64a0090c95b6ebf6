//! menos as a knowledge source, through the real binary against the menos
//! stand-in (`tests/fakes/src/menos.rs`), which verifies every request's
//! RFC 9421 ed25519 signature as menos does: an agent's `menos_search`
//! reaches menos signed with the key `ssh-keygen` made, `/health` and
//! `/v1/knowledge` say menos accepts it; a key menos does not know, a
//! signature replayed on another path and a bare unsigned request are
//! refused; key files that cannot sign stop startup with the reason.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::harness::*;

/// A fresh ed25519 key from `ssh-keygen`, as a person makes one: (private key path, public key line).
fn ssh_keygen(dir: &Path, name: &str) -> (PathBuf, String) {
    let path = dir.join(name);
    let out = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
        .arg(&path)
        .output()
        .expect("ssh-keygen runs (openssh-client)");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let public = std::fs::read_to_string(path.with_extension("pub")).unwrap();
    (path, public.trim().to_string())
}

/// menos's key id for an `ssh-ed25519 AAAA…` line, computed here independently.
fn key_id_of(public_line: &str) -> String {
    use base64::Engine;
    let blob = base64::engine::general_purpose::STANDARD
        .decode(public_line.split_whitespace().nth(1).unwrap())
        .unwrap();
    onyx_test_fakes::menos::key_id(&blob)
}

fn config(fakes: &Fakes, menos_url: &str, key: &Path) -> String {
    TestConfig::new(fakes)
        .merge(json!({
            "agents": {
                "defaults": { "model": "openai/fake-script" },
                "list": [
                    { "id": "main", "default": true, "permissionMode": "safe" },
                ],
            },
            "knowledge": { "menos": { "url": menos_url, "keyFile": key.display().to_string() } },
        }))
        .build()
}

/// What the stand-in saw, oldest first.
fn seen(menos: &onyx_test_fakes::FakeServer) -> Vec<Value> {
    menos.state.requests()
}

#[tokio::test]
async fn agents_search_menos_with_signed_requests_and_menos_refuses_what_it_cannot_verify() {
    let keys = tempfile::tempdir().unwrap();
    let (owner_key, owner_public) = ssh_keygen(keys.path(), "onyx");
    let (stranger_key, _) = ssh_keygen(keys.path(), "stranger");
    let menos = onyx_test_fakes::menos::start(&owner_public, 0).await.unwrap();
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes, &menos.url(), &owner_key)), &[]).await;

    // /health (open) says menos accepts Onyx's key, without menos's address.
    let health = onyx.health().await;
    let entry = dependency(&health, "menos");
    assert_eq!(entry["status"], "up", "{health}");
    assert_eq!(entry["kind"], "knowledge:menos");
    assert_eq!(entry["detail"], "signed requests accepted");
    assert!(!health.to_string().contains(&menos.url()), "{health}");
    // The admin's view: the address, the key id menos knows Onyx by, the line menos needs.
    let sources = onyx.get_json("/v1/knowledge").await;
    assert_eq!(sources["menos"]["url"], format!("{}/", menos.url()));
    assert_eq!(sources["menos"]["key_id"], key_id_of(&owner_public));
    let public = sources["menos"]["public_key"].as_str().unwrap();
    assert_eq!(
        public.split_whitespace().take(2).collect::<Vec<_>>(),
        owner_public.split_whitespace().take(2).collect::<Vec<_>>()
    );
    assert_eq!(sources["menos"]["probe"]["up"], true, "{sources}");

    // An agent in safe mode is offered menos_search (a Read tool) and uses it.
    let answer = onyx
        .agent_answer(
            "main",
            r#"script: menos_search {"query": "docker networking", "limit": 2} ; answer"#,
        )
        .await;
    assert!(
        answer.contains("1. Docker networking explained [youtube, id c1"),
        "{answer}"
    );
    assert!(answer.contains("Bridge networks give each container"), "{answer}");
    let offered = fakes.openai.state.last_request().unwrap();
    assert!(offered["tools"].to_string().contains("menos_search"), "{offered}");
    let search = seen(&menos)
        .into_iter()
        .find(|r| r["path"] == "/api/v1/content/search")
        .expect("menos was asked");
    assert_eq!(search["accepted"], true, "{search}");
    assert_eq!(search["query"], "q=docker+networking&limit=2");
    let signed = search["signatureInput"].as_str().unwrap();
    assert!(
        signed.starts_with(r#"sig1=("@method" "@path" "@authority");keyid="SHA256:"#)
            && signed.contains(r#";alg="ed25519";created="#),
        "{signed}"
    );

    // Bad arguments are the model's to fix, and menos is not asked.
    let asked = seen(&menos).len();
    let answer = onyx
        .agent_answer("main", r#"script: menos_search {"query": "  "} ; answer"#)
        .await;
    assert!(answer.contains("error: the query is empty"), "{answer}");
    assert_eq!(seen(&menos).len(), asked);

    // The attacker's side: no signature, a signature from a key menos does not
    // know, and a valid signature replayed on another path are all refused.
    let client = reqwest::Client::new();
    let unsigned = client
        .get(format!("{}/api/v1/content/search?q=docker&limit=1", menos.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(unsigned.status(), 401);
    let stranger = Onyx::start(Some(&config(&fakes, &menos.url(), &stranger_key)), &[]).await;
    let health = stranger.health().await;
    let entry = dependency(&health, "menos");
    assert_eq!(entry["status"], "down", "{health}");
    let detail = entry["detail"].as_str().unwrap();
    assert!(
        detail.contains("menos refused Onyx's signature (401)"),
        "{detail}"
    );
    let stranger_sources = stranger.get_json("/v1/knowledge").await;
    let stranger_id = stranger_sources["menos"]["key_id"].as_str().unwrap().to_string();
    assert!(
        detail.contains(&stranger_id),
        "the detail names the key to authorize: {detail}"
    );
    assert_eq!(
        stranger_sources["menos"]["probe"]["error"],
        format!("Unknown key: {stranger_id}")
    );
    let answer = stranger
        .agent_answer("main", r#"script: menos_search {"query": "terraform"} ; answer"#)
        .await;
    assert!(answer.contains("menos answered 401: Unknown key"), "{answer}");
    assert_eq!(health["status"], "degraded");
    let refusals: Vec<Value> = seen(&menos)
        .into_iter()
        .filter(|r| r["accepted"] == false)
        .collect();
    assert!(
        refusals
            .iter()
            .any(|r| r["refusal"] == format!("Unknown key: {stranger_id}")),
        "{refusals:?}"
    );

    // A signature Onyx made for one path does not open another.
    let signer = onyx_signature(&owner_key, "/api/v1/content/search", &menos.url());
    let replayed = client
        .get(format!("{}/api/v1/auth/whoami", menos.url()))
        .header("signature-input", &signer.0)
        .header("signature", &signer.1)
        .send()
        .await
        .unwrap();
    assert_eq!(replayed.status(), 401);
    let body: Value = replayed.json().await.unwrap();
    assert_eq!(body["detail"], "Invalid signature");
    let genuine = client
        .get(format!(
            "{}/api/v1/content/search?q=terraform&limit=1",
            menos.url()
        ))
        .header("signature-input", &signer.0)
        .header("signature", &signer.1)
        .send()
        .await
        .unwrap();
    assert_eq!(genuine.status(), 200, "the same headers on their own path pass");
}

/// Onyx's own signer (the library), signing `path` for the stand-in's authority now.
fn onyx_signature(key: &Path, path: &str, base: &str) -> (String, String) {
    let signer = onyx::knowledge::Signer::from_file(key).unwrap();
    let authority = base.strip_prefix("http://").unwrap();
    let headers = signer.sign("GET", path, authority, None, chrono::Utc::now().timestamp());
    (headers.signature_input, headers.signature)
}

#[tokio::test]
async fn key_files_that_cannot_sign_stop_startup_with_the_reason() {
    let keys = tempfile::tempdir().unwrap();
    let (key, public) = ssh_keygen(keys.path(), "onyx");
    let menos = onyx_test_fakes::menos::start(&public, 0).await.unwrap();
    let fakes = Fakes::start().await;
    let start = async |config: String| match Onyx::try_start(Some(&config), &[]).await {
        Ok(_) => panic!("started with {config}"),
        Err((code, stderr)) => {
            assert_ne!(code, Some(0));
            stderr
        }
    };

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        let stderr = start(config(&fakes, &menos.url(), &key)).await;
        assert!(
            stderr.contains("knowledge.menos.keyFile") && stderr.contains("chmod 600"),
            "{stderr}"
        );
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let stderr = start(config(&fakes, &menos.url(), &keys.path().join("missing"))).await;
    assert!(
        stderr.contains("knowledge.menos.keyFile: cannot read"),
        "{stderr}"
    );

    let rsa = keys.path().join("rsa");
    let out = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "rsa", "-b", "2048", "-N", "", "-f"])
        .arg(&rsa)
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = start(config(&fakes, &menos.url(), &rsa)).await;
    assert!(stderr.contains("ed25519 keys only"), "{stderr}");

    let locked = keys.path().join("locked");
    let out = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "a passphrase", "-f"])
        .arg(&locked)
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = start(config(&fakes, &menos.url(), &locked)).await;
    assert!(stderr.contains("passphrase-protected"), "{stderr}");

    let stderr = start(config(&fakes, "ftp://menos.example", &key)).await;
    assert!(stderr.contains("knowledge.menos.url"), "{stderr}");
    let stderr = start(
        TestConfig::new(&fakes)
            .merge(json!({"knowledge": {"menos": {"url": menos.url(), "keyfile": "x"}}}))
            .build(),
    )
    .await;
    assert!(stderr.contains("keyfile"), "an unknown key is named: {stderr}");
}
