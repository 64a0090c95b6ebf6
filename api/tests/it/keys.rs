//! API keys in the database: `onyx keys`, `/v1/keys`, scopes, `last_used_at`,
//! revocation; config keys keep working.

use crate::harness::*;
use serde_json::json;

#[tokio::test]
async fn keys_made_over_http_work_until_revoked() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&fakes.config()), &[]).await;
    let created = onyx.create_key("laptop", "chat").await;
    let key = created["key"].as_str().unwrap().to_string();
    assert!(key.starts_with("onyx_sk_") && key.len() >= 40, "{key}");
    assert_eq!(created["scope"], "chat");
    assert!(key.starts_with(created["prefix"].as_str().unwrap()));

    let chat = |key: &str| {
        reply(
            onyx.with_key("POST", "/v1/chat/completions", key)
                .json(&json!({"model": "openai/fake-echo", "messages": [{"role": "user", "content": "hi"}]})),
        )
    };
    assert_eq!(chat(&key).await.0, 200);
    // A chat key cannot manage keys.
    let (status, body) = reply(onyx.with_key("GET", "/v1/keys", &key)).await;
    assert_eq!(status, 403);
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
    let revoke = || reply(onyx.delete(&format!("/v1/keys/{id}")));
    assert_eq!(revoke().await.0, 200);
    assert_eq!(chat(&key).await.0, 401, "revoked keys stop working at once");
    assert_eq!(revoke().await.0, 404, "already revoked");

    for bad in [
        json!({"name": ""}),
        json!({"name": "x", "scope": "root"}),
        json!({"scope": "chat"}),
        json!({"name": "x", "extra": 1}),
    ] {
        let (status, _) = reply(onyx.post("/v1/keys").json(&bad)).await;
        assert_eq!(status, 400, "{bad}");
    }
}

#[tokio::test]
async fn a_key_from_the_cli_turns_auth_on() {
    let fakes = Fakes::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = TestConfig::new(&fakes)
        .set("gateway.auth.apiKeys", json!([]))
        .build();
    std::fs::write(dir.path().join("onyx.json5"), &config).unwrap();
    let output = Onyx::cli(
        dir.path(),
        &["keys", "create", "--name", "ci", "--scope", "admin"],
    )
    .await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let key = String::from_utf8(output.stdout).unwrap().trim().to_string();
    assert!(key.starts_with("onyx_sk_"));
    let listed = String::from_utf8(Onyx::cli(dir.path(), &["keys", "list"]).await.stdout).unwrap();
    assert!(
        listed
            .lines()
            .any(|l| l.contains(" ci ") && l.contains("admin") && l.contains("never")),
        "{listed}"
    );
    let bad = Onyx::cli(dir.path(), &["keys", "create", "--name", "x", "--scope", "root"]).await;
    assert!(!bad.status.success());

    let onyx = Onyx::start_in(dir, Some(&config), &[]).await;
    let (anonymous, _) = reply(onyx.anonymous("GET", "/v1/models")).await;
    assert_eq!(anonymous, 401, "a key exists, so requests need one");
    let (status, body) = reply(onyx.with_key("GET", "/v1/keys", &key)).await;
    assert_eq!(status, 200);
    assert_eq!(body["data"][0]["name"], "ci");
}
