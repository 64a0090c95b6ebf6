//! API keys in the database: `onyx keys`, `/v1/keys`, scopes, `last_used_at`,
//! revocation; config keys keep working.

use crate::harness::*;
use serde_json::{Value, json};

#[tokio::test]
async fn keys_made_over_http_work_until_revoked() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&fakes.config()), &[]).await;
    let created = onyx
        .post("/v1/keys")
        .json(&json!({"name": "laptop", "scope": "chat"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let created: Value = created.json().await.unwrap();
    let key = created["key"].as_str().unwrap().to_string();
    assert!(key.starts_with("onyx_sk_") && key.len() >= 40, "{key}");
    assert_eq!(created["scope"], "chat");
    assert!(key.starts_with(created["prefix"].as_str().unwrap()));

    let chat = |key: String| {
        onyx.client
            .post(format!("{}/v1/chat/completions", onyx.url))
            .bearer_auth(key)
            .json(&json!({"model": "openai/fake-echo", "messages": [{"role": "user", "content": "hi"}]}))
            .send()
    };
    assert_eq!(chat(key.clone()).await.unwrap().status(), 200);
    // A chat key cannot manage keys.
    let forbidden = onyx
        .client
        .get(format!("{}/v1/keys", onyx.url))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(forbidden.status(), 403);
    let body: Value = forbidden.json().await.unwrap();
    assert_eq!(body["error"]["code"], "insufficient_scope");

    // The list never shows the key itself; last use is recorded.
    let listed = wait_until(secs(5), "the key's last use is recorded", async || {
        let listed = onyx.get_json("/v1/keys").await;
        listed["data"][0]["last_used_at"].is_string().then_some(listed)
    })
    .await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 1);
    assert_eq!(listed["data"][0]["name"], "laptop");
    assert!(listed["data"][0]["last_used_at"].is_string(), "{listed}");
    assert!(!listed.to_string().contains(&key), "the secret is never listed");

    let id = created["id"].as_str().unwrap();
    let revoked = onyx
        .client
        .delete(format!("{}/v1/keys/{id}", onyx.url))
        .bearer_auth(ONYX_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), 200);
    assert_eq!(
        chat(key).await.unwrap().status(),
        401,
        "revoked keys stop working at once"
    );
    let again = onyx
        .client
        .delete(format!("{}/v1/keys/{id}", onyx.url))
        .bearer_auth(ONYX_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 404);

    for bad in [
        json!({"name": ""}),
        json!({"name": "x", "scope": "root"}),
        json!({"scope": "chat"}),
        json!({"name": "x", "extra": 1}),
    ] {
        let response = onyx.post("/v1/keys").json(&bad).send().await.unwrap();
        assert_eq!(response.status(), 400, "{bad}");
    }
}

#[tokio::test]
async fn a_key_from_the_cli_turns_auth_on() {
    let fakes = Fakes::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = TestConfig::new(&fakes)
        .set("gateway.auth.apiKeys", json!([]))
        .build();
    let path = dir.path().join("onyx.json5");
    std::fs::write(&path, &config).unwrap();
    let run = |args: Vec<&str>| {
        let mut cmd = Onyx::command(dir.path(), &[]);
        cmd.arg("keys").args(args).arg("--config").arg(&path);
        cmd.output()
    };
    let output = run(vec!["create", "--name", "ci", "--scope", "admin"])
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let key = String::from_utf8(output.stdout).unwrap().trim().to_string();
    assert!(key.starts_with("onyx_sk_"));
    let listed = String::from_utf8(run(vec!["list"]).await.unwrap().stdout).unwrap();
    assert!(
        listed
            .lines()
            .any(|l| l.contains(" ci ") && l.contains("admin") && l.contains("never")),
        "{listed}"
    );
    let bad = run(vec!["create", "--name", "x", "--scope", "root"])
        .await
        .unwrap();
    assert!(!bad.status.success());

    let onyx = Onyx::start_in(dir, Some(&config), &[]).await;
    let anonymous = onyx
        .client
        .get(format!("{}/v1/models", onyx.url))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401, "a key exists, so requests need one");
    let with_key = onyx
        .client
        .get(format!("{}/v1/keys", onyx.url))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(with_key.status(), 200);
    let body: Value = with_key.json().await.unwrap();
    assert_eq!(body["data"][0]["name"], "ci");
}
