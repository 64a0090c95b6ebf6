//! Providers and aliases managed through `/v1/providers` and `/v1/aliases`:
//! a change on one replica routes on another without a restart, secrets are
//! sealed at rest (absent from the database files, the object store and the
//! logs), and `onyx keys rotate-master` re-seals them under a new key.

use crate::harness::services::Service;
use crate::harness::*;
use serde_json::{Value, json};

/// A key no other test uses, so finding it anywhere means it leaked.
const SECRET_KEY: &str = "sk-live-onyx-sealed-7f3a9c2e51b84d06";
const SECRET_HEADER: &str = "team-secret-header-value-9b1e77";
const SUBSCRIPTION_TOKEN: &str = "rt-subscription-sealed-4c1d8e";
const MASTER_KEY: &str = "3f1c0b6a9e8d7c6b5a4938271605f4e3d2c1b0a99887766554433221100ffeed";

async fn secret_upstream() -> onyx_test_fakes::FakeServer {
    onyx_test_fakes::openai::start(Some(SECRET_KEY.into()), 0)
        .await
        .unwrap()
}

fn acme(upstream: &onyx_test_fakes::FakeServer) -> Value {
    json!({
        "name": "acme", "type": "openai", "baseUrl": format!("{}/v1", upstream.url()),
        "apiKey": SECRET_KEY, "headers": {"X-Team": SECRET_HEADER}, "models": ["fake-echo"],
    })
}

async fn chat_status(onyx: &Onyx, model: &str) -> (u16, Value) {
    onyx.chat(json!({"model": model, "messages": [{"role": "user", "content": "hi"}]}))
        .await
}

#[tokio::test]
async fn a_provider_added_on_one_replica_answers_on_another_without_a_restart() {
    let (fakes, surreal, upstream) = (
        Fakes::start().await,
        Service::surreal().await,
        secret_upstream().await,
    );
    let config = TestConfig::new(&fakes).surreal(&surreal).build();
    let env = [("ONYX_MASTER_KEY", MASTER_KEY)];
    let (a, b) = (
        Onyx::start(Some(&config), &env).await,
        Onyx::start(Some(&config), &env).await,
    );
    assert_eq!(chat_status(&b, "acme/fake-echo").await.0, 404);

    let (status, created) = reply(a.post("/v1/providers").json(&acme(&upstream))).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["apiKey"], "…4d06");
    assert_eq!(created["headers"]["X-Team"], "…1e77");
    assert_eq!(created["source"], "api");
    assert!(!created.to_string().contains(SECRET_KEY));
    // Routes on this replica as soon as the answer is back.
    let (status, body) = chat_status(&a, "acme/fake-echo").await;
    assert_eq!(status, 200, "{body}");

    let started = std::time::Instant::now();
    wait_until(
        secs(2),
        "the other replica routes to the new provider",
        async || (chat_status(&b, "acme/fake-echo").await.0 == 200).then_some(()),
    )
    .await;
    eprintln!("another replica routed to it after {:?}", started.elapsed());

    // Edits and aliases travel too.
    let (status, edited) = reply(
        a.patch("/v1/providers/acme")
            .json(&json!({"maxRetries": 0, "models": ["fake-echo", "fake-tools"]})),
    )
    .await;
    assert_eq!(status, 200, "{edited}");
    assert_eq!(edited["apiKey"], "…4d06", "an edit that names no key keeps it");
    let (status, alias) = reply(
        a.put("/v1/aliases/house")
            .json(&json!({"targets": ["acme/fake-echo", "openai/fake-echo"]})),
    )
    .await;
    assert_eq!(status, 200, "{alias}");
    wait_until(
        secs(2),
        "the other replica sees the edit and the alias",
        async || {
            let view = b.get_json("/v1/providers/acme").await;
            let routed = chat_status(&b, "house").await.0 == 200;
            (view["maxRetries"] == 0 && routed).then_some(())
        },
    )
    .await;
    let models = b.get_json("/v1/models").await;
    assert!(
        pluck(&models["data"], "/id").contains(&"acme/fake-tools".to_string()),
        "{models}"
    );

    // A provider an alias uses cannot go; the config file's cannot be changed here.
    let (status, body) = reply(a.delete("/v1/providers/acme")).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("house"),
        "{body}"
    );
    let (status, body) = reply(a.patch("/v1/providers/openai").json(&json!({"maxRetries": 1}))).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("config file"),
        "{body}"
    );
    let listed = a.get_json("/v1/providers").await;
    let openai = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "openai")
        .unwrap();
    assert_eq!(openai["readOnly"], true);
    assert_eq!(openai["source"], "config");

    assert_eq!(reply(a.delete("/v1/aliases/house")).await.0, 200);
    assert_eq!(reply(a.delete("/v1/providers/acme")).await.0, 200);
    wait_until(secs(2), "the other replica stops routing to it", async || {
        let (status, body) = chat_status(&b, "acme/fake-echo").await;
        (status == 404 && body["error"]["code"] == "model_not_found").then_some(())
    })
    .await;

    let audit = a.get_json("/v1/audit?limit=50").await;
    let actions = pluck(&audit["data"], "/action");
    assert!(
        actions.iter().filter(|a| *a == "provider.changed").count() >= 3,
        "{audit}"
    );
    assert!(actions.contains(&"alias.changed".to_string()), "{audit}");
    assert!(!audit.to_string().contains(SECRET_KEY) && !audit.to_string().contains(SECRET_HEADER));
}

#[tokio::test]
async fn bad_provider_input_is_refused_naming_the_field() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&fakes.config()), &[]).await;
    let cases = [
        (json!({"type": "openai"}), "name"),
        (json!({"name": "a/b", "type": "openai"}), "name"),
        (json!({"name": "x", "type": "watsonx"}), "type"),
        (
            json!({"name": "x", "type": "openai", "baseUrl": "not a url"}),
            "baseUrl",
        ),
        (
            json!({"name": "x", "type": "openai", "timeoutSeconds": "soon"}),
            "timeoutSeconds",
        ),
        (
            json!({"name": "x", "type": "openai", "apiKey": "has spaces in it"}),
            "apiKey",
        ),
        (json!({"name": "x", "type": "openai", "colour": "blue"}), "colour"),
    ];
    for (body, field) in cases {
        let (status, answer) = reply(onyx.post("/v1/providers").json(&body)).await;
        assert_eq!(status, 400, "{body}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(field), "{body}: {answer}");
    }
    let (status, answer) = reply(
        onyx.post("/v1/providers")
            .json(&json!({"name": "openai", "type": "openai"})),
    )
    .await;
    assert_eq!(status, 409, "{answer}");
    let (status, answer) = reply(
        onyx.put("/v1/aliases/smart")
            .json(&json!({"targets": ["nobody/model"]})),
    )
    .await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"]["param"], "targets[0]", "{answer}");
    assert_eq!(reply(onyx.delete("/v1/providers/nobody")).await.0, 404);
    assert_eq!(
        reply(onyx.patch("/v1/providers/nobody").json(&json!({}))).await.0,
        404
    );
    // Admin scope only.
    let chat_key = onyx.create_key("chatter", "chat").await;
    let (status, _) = reply(onyx.with_key("GET", "/v1/providers", chat_key["key"].as_str().unwrap())).await;
    assert_eq!(status, 403);
}

/// Every file under `dir` that contains `needle`.
fn files_containing(dir: &std::path::Path, needle: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            stack.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else if let Ok(bytes) = std::fs::read(&path)
            && bytes.windows(needle.len()).any(|w| w == needle)
        {
            found.push(path.display().to_string());
        }
    }
    found
}

#[tokio::test]
async fn secrets_are_sealed_at_rest_never_logged_and_survive_a_master_key_rotation() {
    let (fakes, upstream) = (Fakes::start().await, secret_upstream().await);
    let config = fakes.config();
    let env = [("ONYX_LOG", "debug")];
    let onyx = Onyx::start(Some(&config), &env).await;
    let (status, body) = reply(onyx.post("/v1/providers").json(&acme(&upstream))).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(chat_status(&onyx, "acme/fake-echo").await.0, 200);
    let listed = onyx.get_json("/v1/providers").await;
    assert!(!listed.to_string().contains(SECRET_KEY) && !listed.to_string().contains(SECRET_HEADER));
    // A subscription sign-in written while Onyx runs is sealed when it stops.
    let codex_home = onyx.dir.path().join("data/subscriptions/codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    std::fs::write(
        codex_home.join("auth.json"),
        format!(r#"{{"tokens":{{"refresh_token":"{SUBSCRIPTION_TOKEN}"}}}}"#),
    )
    .unwrap();
    let (dir, logs) = onyx.stop().await;
    let codex_home = dir.path().join("data/subscriptions/codex");
    assert!(!codex_home.join("auth.json").exists(), "no plaintext at rest");
    let sealed_before = std::fs::read_to_string(codex_home.join("auth.json.sealed")).unwrap();

    let data = dir.path().join("data");
    let key_file = data.join("master.key");
    assert!(key_file.exists(), "a master key file is made at first start");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    // The scan can see stored values: the sealed form is there in the clear.
    assert!(
        !files_containing(&data, b"onyx-sealed:v1:").is_empty(),
        "the database files hold the sealed key"
    );
    for secret in [SECRET_KEY, SECRET_HEADER, SUBSCRIPTION_TOKEN] {
        assert_eq!(
            files_containing(dir.path(), secret.as_bytes()),
            Vec::<String>::new(),
            "{secret} on disk"
        );
        assert!(!logs.contains(secret), "{secret} in the logs");
    }

    // Rotation: every secret re-sealed under a new key file; the provider still works.
    let before = std::fs::read_to_string(&key_file).unwrap();
    let output = Onyx::cli(dir.path(), &["keys", "rotate-master"]).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("re-sealed 1 stored providers and 1 subscription credential files"),
        "{stderr}"
    );
    let sealed_after =
        std::fs::read_to_string(dir.path().join("data/subscriptions/codex/auth.json.sealed")).unwrap();
    let key_id = |sealed: &str| sealed.split(':').nth(2).unwrap().to_string();
    assert_ne!(
        key_id(&sealed_before),
        key_id(&sealed_after),
        "re-sealed under the new key"
    );
    assert!(output.stdout.is_empty(), "a key file rotation prints no key");
    let after = std::fs::read_to_string(&key_file).unwrap();
    assert_ne!(before, after);
    assert!(!data.join("master.key.next").exists());
    let onyx = Onyx::start_in(dir, Some(&config), &env).await;
    let (status, body) = chat_status(&onyx, "acme/fake-echo").await;
    assert_eq!(status, 200, "{body}");
    let audit = onyx.get_json("/v1/audit?limit=50").await;
    assert!(
        pluck(&audit["data"], "/action").contains(&"master_key.rotated".to_string()),
        "{audit}"
    );

    // The old key alone no longer opens anything: the stored provider is shown with why.
    let (dir, _) = onyx.stop().await;
    std::fs::write(&key_file, before).unwrap();
    let onyx = Onyx::start_in(dir, Some(&config), &env).await;
    let (status, _) = chat_status(&onyx, "acme/fake-echo").await;
    assert_eq!(
        status, 404,
        "a provider whose key cannot be opened does not route"
    );
    let view = onyx.get_json("/v1/providers/acme").await;
    assert!(
        view["error"]
            .as_str()
            .unwrap()
            .contains("which this replica does not hold"),
        "{view}"
    );
    assert_eq!(view["apiKey"], "sealed", "{view}");
}
