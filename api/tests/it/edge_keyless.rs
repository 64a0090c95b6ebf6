//! The gateway without a key, and the moment it gets one. Key-less (the
//! loopback default), it answers only loopback `Host` names and its own
//! pages: a page using DNS rebinding or another origin drives nothing.
//! Once any key existed (stored, configured, or a UI password) it stays
//! keyed, across revocations and restarts. `/health` tells anyone its
//! status and only a caller it would admit its detail.

use serde_json::{Value, json};

use crate::harness::*;

fn keyless(fakes: &Fakes) -> String {
    TestConfig::new(fakes)
        .set("gateway.auth.apiKeys", json!([]))
        .build()
}

fn port(onyx: &Onyx) -> String {
    onyx.url.rsplit(':').next().unwrap().to_string()
}

#[tokio::test]
async fn a_web_page_cannot_drive_a_keyless_gateway() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&keyless(&fakes)), &[]).await;
    let port = port(&onyx);
    let rebound = format!("rebind.attacker.example:{port}");
    let agent = json!({"id": "pwned", "permission_mode": "allow-all"});
    let key = json!({"name": "pwned", "scope": "admin"});
    // Issue 37's attack: a name of the attacker's resolving to 127.0.0.1,
    // sent as Host, with the matching Origin of the attacker's page.
    for (method, path, body) in [
        ("POST", "/v1/agents", Some(&agent)),
        ("POST", "/v1/keys", Some(&key)),
        ("GET", "/v1/sessions", None),
        ("GET", "/health", None),
        ("GET", "/", None),
    ] {
        let mut request = onyx
            .anonymous(method, path)
            .header("host", &rebound)
            .header("origin", format!("http://{rebound}"));
        if let Some(body) = body {
            request = request.json(body);
        }
        let (status, answer) = reply(request).await;
        assert_eq!(status, 403, "{method} {path}: {answer}");
        assert_eq!(answer["error"]["code"], "host_not_allowed", "{answer}");
    }
    // A page of another site reaching 127.0.0.1 directly: its Origin gives it away.
    for origin in ["http://evil.example", "null", "http://localhost:3000"] {
        let (status, answer) = reply(
            onyx.anonymous("POST", "/v1/keys")
                .header("origin", origin)
                .json(&key),
        )
        .await;
        assert_eq!(status, 403, "{origin}: {answer}");
        assert_eq!(answer["error"]["code"], "origin_not_allowed", "{answer}");
    }
    // A cross-site <img> or form has no Origin on a GET, but its Sec-Fetch-Site says where it came from.
    let (status, _) = reply(
        onyx.anonymous("GET", "/v1/sessions")
            .header("sec-fetch-site", "cross-site"),
    )
    .await;
    assert_eq!(status, 403);
    // A form post skips the preflight as text/plain or a form: not JSON.
    for content_type in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ] {
        let (status, answer) = reply(
            onyx.anonymous("POST", "/v1/agents")
                .header("content-type", content_type)
                .body(agent.to_string()),
        )
        .await;
        assert_eq!(status, 415, "{content_type}: {answer}");
    }

    // Nothing was made, and the owner's own programs and pages still work.
    let agents = onyx.get_json("/v1/agents").await;
    assert!(
        !pluck(&agents["data"], "/id").contains(&"pwned".to_string()),
        "{agents}"
    );
    let (status, keys) = reply(onyx.anonymous("GET", "/v1/keys")).await;
    assert_eq!(status, 200, "still key-less: {keys}");
    assert!(keys["data"].as_array().unwrap().is_empty(), "{keys}");
    for (n, (host, origin)) in [
        (format!("127.0.0.1:{port}"), None),
        (
            format!("127.0.0.1:{port}"),
            Some(format!("http://127.0.0.1:{port}")),
        ),
        (
            format!("localhost:{port}"),
            Some(format!("http://localhost:{port}")),
        ),
        (format!("[::1]:{port}"), None),
    ]
    .into_iter()
    .enumerate()
    {
        let mut request = onyx
            .anonymous("POST", "/v1/agents")
            .header("host", &host)
            .json(&json!({"id": format!("local-{n}")}));
        if let Some(origin) = &origin {
            request = request.header("origin", origin);
        }
        let (status, answer) = reply(request).await;
        assert_eq!(status, 200, "{host} {origin:?}: {answer}");
    }
    let (status, _) = reply(onyx.anonymous("GET", "/").header("sec-fetch-site", "same-origin")).await;
    assert_eq!(status, 200, "the UI itself");
}

#[tokio::test]
async fn a_keyed_gateway_stays_keyed_after_its_last_key_is_revoked() {
    let fakes = Fakes::start().await;
    let config = keyless(&fakes);
    let onyx = Onyx::start(Some(&config), &[]).await;
    let audit = |onyx: &Onyx| reply(onyx.anonymous("GET", "/v1/audit"));
    assert_eq!(audit(&onyx).await.0, 200, "key-less at first");
    let (status, created) = reply(
        onyx.anonymous("POST", "/v1/keys")
            .json(&json!({"name": "first", "scope": "admin"})),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let key = created["key"].as_str().unwrap().to_string();
    assert_eq!(audit(&onyx).await.0, 401, "the first key keys it at once");

    // Issue 37's attack: revoke every stored key, then ask without one.
    let id = created["id"].as_str().unwrap();
    let (status, body) = reply(onyx.with_key("DELETE", &format!("/v1/keys/{id}"), &key)).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = audit(&onyx).await;
    assert_eq!(
        status, 401,
        "revoking the last key does not open the gateway: {body}"
    );
    let me = onyx.get_json("/auth/me").await;
    assert_eq!(me["auth_required"], true, "{me}");

    // Nor does a restart: the fact is kept in the database.
    let (dir, _) = onyx.stop().await;
    let onyx = Onyx::start_in(dir, Some(&config), &[]).await;
    assert_eq!(audit(&onyx).await.0, 401, "still keyed after a restart");
    let (status, body) = reply(onyx.anonymous("POST", "/v1/keys").json(&json!({"name": "again"}))).await;
    assert_eq!(status, 401, "{body}");
}

#[tokio::test]
async fn a_ui_password_keys_the_gateway() {
    let fakes = Fakes::start().await;
    let hash = onyx::auth::hash_password("right horse").unwrap();
    let config = TestConfig::new(&fakes)
        .set("gateway.auth", json!({"apiKeys": [], "passwordHash": hash}))
        .build();
    let onyx = Onyx::start(Some(&config), &[]).await;
    let (status, body) = reply(onyx.anonymous("GET", "/v1/agents")).await;
    assert_eq!(status, 401, "a password alone keys the gateway: {body}");
    let me = onyx.get_json("/auth/me").await;
    assert_eq!(me["auth_required"], true, "{me}");
    assert_eq!(me["authenticated"], false, "{me}");
}

#[tokio::test]
async fn health_without_a_key_says_only_its_status() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&fakes.config()), &[]).await;
    let data_dir = onyx.dir.path().join("data").display().to_string();
    for key in [None, Some("onyx_sk_wrong_key_0000000000")] {
        let mut request = onyx.anonymous("GET", "/health");
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        let (status, body) = reply(request).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body, json!({"status": "ok"}), "status only, with {key:?}");
    }
    let (status, detail) = reply(onyx.get("/health")).await;
    assert_eq!(status, 200);
    assert!(detail.to_string().contains(&data_dir), "{detail}");
    for field in ["version", "dependencies", "circuits", "exec", "mcp"] {
        assert!(detail.get(field).is_some(), "{field} with a key: {detail}");
    }

    // Key-less, the owner's loopback programs are the only ones that reach it.
    let open = Onyx::start(Some(&keyless(&fakes)), &[]).await;
    let (status, body): (u16, Value) = reply(open.anonymous("GET", "/health")).await;
    assert_eq!(status, 200);
    assert!(body["dependencies"].is_array(), "{body}");
}
