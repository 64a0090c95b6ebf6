//! The HTTP edge, hardened: security headers on the UI (a CSP whose only
//! inline script is the bootstrap's hash), no key taken from a query string,
//! keys that expire and keys scoped to agents, and the audit log of admin
//! actions.

use crate::harness::*;
use base64::Engine;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

fn agents_config(fakes: &Fakes) -> String {
    TestConfig::new(fakes)
        .agent(json!({"id": "main", "default": true, "model": "openai/fake-echo"}))
        .agent(json!({"id": "ops", "model": "openai/fake-echo"}))
        .build()
}

/// The inline `<script>` of the served index.html.
fn inline_script(html: &str) -> &str {
    let open = html.find("<script>").expect("an inline script") + "<script>".len();
    let close = html[open..].find("</script>").unwrap();
    &html[open..open + close]
}

#[tokio::test]
async fn ui_responses_carry_a_strict_csp_and_security_headers() {
    let onyx = Onyx::start(None, &[]).await;
    let response = onyx.anonymous("GET", "/").send().await.unwrap();
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    let html = response.text().await.unwrap();
    let csp = headers["content-security-policy"].to_str().unwrap().to_string();
    let hash =
        base64::engine::general_purpose::STANDARD.encode(Sha256::digest(inline_script(&html).as_bytes()));
    let script_src = csp
        .split(';')
        .map(str::trim)
        .find(|d| d.starts_with("script-src "))
        .unwrap_or_else(|| panic!("no script-src in {csp}"));
    assert_eq!(script_src, format!("script-src 'self' 'sha256-{hash}'"), "{csp}");
    for directive in [
        "default-src 'self'",
        "frame-ancestors 'none'",
        "object-src 'none'",
        "base-uri 'none'",
    ] {
        assert!(csp.contains(directive), "{directive} in {csp}");
    }
    assert!(!csp.contains("unsafe-eval"), "{csp}");
    for path in ["/", "/sessions", "/favicon.svg"] {
        let response = onyx.anonymous("GET", path).send().await.unwrap();
        let h = response.headers();
        assert_eq!(h["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(h["referrer-policy"], "no-referrer", "{path}");
        assert_eq!(h["x-frame-options"], "DENY", "{path}");
        assert!(h.contains_key("content-security-policy"), "{path}");
    }
}

#[tokio::test]
async fn a_key_in_the_query_string_is_never_accepted() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&fakes.config()), &[]).await;
    for path in [
        format!("/v1/models?api_key={ONYX_KEY}"),
        format!("/v1/models?token={ONYX_KEY}"),
        format!("/v1/models?key={ONYX_KEY}"),
        format!("/v1/logs?follow=true&token={ONYX_KEY}"),
        format!("/metrics?access_token={ONYX_KEY}"),
    ] {
        let (status, body) = reply(onyx.anonymous("GET", &path)).await;
        assert_eq!(status, 401, "{path}: {body}");
        assert_eq!(body["error"]["code"], "invalid_api_key", "{path}");
    }
}

#[tokio::test]
async fn a_key_stops_working_at_its_expiry_naming_it() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&fakes.config()), &[]).await;
    let at = chrono::Utc::now() + chrono::Duration::seconds(3);
    let body = json!({"name": "short", "expiresAt": at.to_rfc3339()});
    let (status, created) = reply(onyx.post("/v1/keys").json(&body)).await;
    assert_eq!(status, 201, "{created}");
    let expires_at = created["expires_at"].as_str().unwrap().to_string();
    let key = created["key"].as_str().unwrap().to_string();
    let models = || reply(onyx.with_key("GET", "/v1/models", &key));
    assert_eq!(models().await.0, 200, "works before its expiry");
    let refused = wait_until(secs(15), "the key expires", async || {
        let (status, body) = models().await;
        (status == 401).then_some(body)
    })
    .await;
    assert_eq!(refused["error"]["code"], "invalid_api_key", "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("expired") && message.contains(&expires_at),
        "{message}"
    );

    for (body, param) in [
        (json!({"name": "x", "expiresAt": "next week"}), "expiresAt"),
        (
            json!({"name": "x", "expiresAt": "2001-01-01T00:00:00Z"}),
            "expiresAt",
        ),
        (json!({"name": "x", "agents": ["nobody"]}), "agents"),
        (json!({"name": "x", "agents": []}), "agents"),
        (
            json!({"name": "x", "scope": "admin", "agents": ["main"]}),
            "agents",
        ),
    ] {
        let (status, answer) = reply(onyx.post("/v1/keys").json(&body)).await;
        assert_eq!(status, 400, "{body}: {answer}");
        assert_eq!(answer["error"]["param"], param, "{body}: {answer}");
    }
}

#[tokio::test]
async fn a_key_scoped_to_an_agent_reaches_only_that_agent() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&agents_config(&fakes)), &[]).await;
    let (status, created) = reply(
        onyx.post("/v1/keys")
            .json(&json!({"name": "ops bot", "agents": ["ops"]})),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["agents"], json!(["ops"]));
    let key = created["key"].as_str().unwrap().to_string();
    let chat = |key: &str, model: &str, session: Option<&str>| {
        let mut request = onyx
            .with_key("POST", "/v1/chat/completions", key)
            .json(&json!({"model": model, "messages": [{"role": "user", "content": "hi"}]}));
        if let Some(session) = session {
            request = request.header("x-onyx-session-id", session);
        }
        request.send()
    };
    let mine = chat(&key, "onyx:ops", None).await.unwrap();
    assert_eq!(mine.status(), 200);
    let my_session = session_id(&mine);
    let theirs = chat(ONYX_KEY, "onyx:main", None).await.unwrap();
    assert_eq!(theirs.status(), 200);
    let their_session = session_id(&theirs);

    let refused = |status: u16, body: &Value, what: &str| {
        assert_eq!(status, 403, "{what}: {body}");
        assert_eq!(body["error"]["code"], "insufficient_scope", "{what}: {body}");
    };
    for model in ["onyx:main", "openai/fake-echo"] {
        let response = chat(&key, model, None).await.unwrap();
        let status = response.status().as_u16();
        refused(status, &response.json().await.unwrap(), model);
    }
    // Its own agent, but another agent's session: refused.
    let response = chat(&key, "onyx:ops", Some(&their_session)).await.unwrap();
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    refused(status, &body, "another agent's session");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("\"main\""),
        "{body}"
    );
    // The agent header cannot redirect an `onyx:ops` request either.
    let (status, body) = reply(
        onyx.with_key("POST", "/v1/chat/completions", &key)
            .header("x-onyx-agent-id", "main")
            .json(&json!({"model": "onyx:ops", "messages": [{"role": "user", "content": "hi"}]})),
    )
    .await;
    refused(status, &body, "x-onyx-agent-id: main");

    let get = |path: String| reply(onyx.with_key("GET", &path, &key));
    for path in [
        format!("/v1/sessions/{their_session}"),
        format!("/v1/sessions/{their_session}/export"),
        "/v1/agents/main".into(),
        "/v1/agents/main/files/SOUL.md".into(),
        "/v1/memory/files/main/MEMORY.md".into(),
        "/v1/memory/search?q=hi".into(),
        "/v1/sessions".into(),
        "/v1/sessions?agent=main".into(),
        "/v1/tasks".into(),
        "/v1/inbox".into(),
        "/v1/usage".into(),
    ] {
        let (status, body) = get(path.clone()).await;
        refused(status, &body, &path);
    }
    for path in [
        format!("/v1/sessions/{my_session}"),
        "/v1/agents/ops".into(),
        "/v1/sessions?agent=ops".into(),
        "/v1/memory/search?q=hi&agent=ops".into(),
        "/v1/models".into(),
    ] {
        let (status, body) = get(path.clone()).await;
        assert_eq!(status, 200, "{path}: {body}");
    }
    // A stored response of another agent cannot be continued; its own can.
    let respond = |key: &str, model: &str, previous: Option<&str>| {
        let mut body = json!({"model": model, "input": "hi"});
        if let Some(previous) = previous {
            body["previous_response_id"] = json!(previous);
        }
        reply(onyx.with_key("POST", "/v1/responses", key).json(&body))
    };
    let (status, theirs) = respond(ONYX_KEY, "onyx:main", None).await;
    assert_eq!(status, 200, "{theirs}");
    let (status, mine) = respond(&key, "onyx:ops", None).await;
    assert_eq!(status, 200, "{mine}");
    let (status, body) = respond(&key, "onyx:ops", theirs["id"].as_str()).await;
    refused(status, &body, "another agent's stored response");
    let (status, body) = respond(&key, "onyx:ops", mine["id"].as_str()).await;
    assert_eq!(status, 200, "its own stored response: {body}");

    // The Anthropic-shaped route refuses in its own shape.
    let (status, body) = reply(onyx.with_key("POST", "/v1/messages", &key).json(
        &json!({"model": "onyx:main", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}),
    ))
    .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["type"], "error", "{body}");
}

#[tokio::test]
async fn admin_actions_are_audited_newest_first() {
    let fakes = Fakes::start().await;
    let hash = onyx::auth::hash_password("right horse").unwrap();
    let config = TestConfig::new(&fakes)
        .set("gateway.auth.passwordHash", json!(hash))
        .build();
    let onyx = Onyx::start(Some(&config), &[]).await;
    let created = onyx.create_key("audited", "chat").await;
    let id = created["id"].as_str().unwrap();
    let secret = created["key"].as_str().unwrap();
    assert_eq!(
        onyx.delete(&format!("/v1/keys/{id}"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let login = |password: &str| {
        onyx.anonymous("POST", "/auth/login")
            .json(&json!({"password": password}))
            .send()
    };
    assert_eq!(login("wrong horse").await.unwrap().status(), 401);
    assert_eq!(login("right horse").await.unwrap().status(), 200);

    let (status, audit) = reply(onyx.get("/v1/audit?limit=10")).await;
    assert_eq!(status, 200, "{audit}");
    let actions = pluck(&audit["data"], "/action");
    assert_eq!(
        actions,
        ["login.succeeded", "login.failed", "key.revoked", "key.created"],
        "{audit}"
    );
    let events = audit["data"].as_array().unwrap();
    assert_eq!(events[3]["target"], id);
    assert!(
        events[3]["actor"].as_str().unwrap().starts_with("config:"),
        "{audit}"
    );
    assert!(
        events[3]["detail"].as_str().unwrap().contains("audited"),
        "{audit}"
    );
    assert_eq!(events[1]["ip"], "127.0.0.1");
    assert!(!audit.to_string().contains(secret), "no secret in the audit log");
    let (status, one) = reply(onyx.get("/v1/audit?limit=1")).await;
    assert_eq!(status, 200);
    assert_eq!(pluck(&one["data"], "/action"), ["login.succeeded"]);
    let (status, bad) = reply(onyx.get("/v1/audit?limit=0")).await;
    assert_eq!(status, 400);
    assert_eq!(bad["error"]["param"], "limit");

    let chat_key = onyx.create_key("reader", "chat").await;
    let (status, _) = reply(onyx.with_key("GET", "/v1/audit", chat_key["key"].as_str().unwrap())).await;
    assert_eq!(status, 403, "the audit log is for admins");
}

#[tokio::test]
async fn the_cli_makes_scoped_expiring_keys_and_audits_them() {
    let fakes = Fakes::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = agents_config(&fakes);
    std::fs::write(dir.path().join("onyx.json5"), &config).unwrap();
    let args = [
        "keys",
        "create",
        "--name",
        "ops-cli",
        "--agents",
        "ops",
        "--expires-at",
        "2999-01-01T00:00:00Z",
    ];
    let output = Onyx::cli(dir.path(), &args).await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let key = String::from_utf8(output.stdout).unwrap().trim().to_string();
    let bad = Onyx::cli(
        dir.path(),
        &[
            "keys",
            "create",
            "--name",
            "x",
            "--expires-at",
            "2001-01-01T00:00:00Z",
        ],
    )
    .await;
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("expiresAt"),
        "{bad:?}"
    );

    let onyx = Onyx::start_in(dir, Some(&config), &[]).await;
    let chat = |model: &str| {
        reply(
            onyx.with_key("POST", "/v1/chat/completions", &key)
                .json(&json!({"model": model, "messages": [{"role": "user", "content": "hi"}]})),
        )
    };
    assert_eq!(chat("onyx:ops").await.0, 200);
    assert_eq!(chat("onyx:main").await.0, 403);
    let listed = onyx.get_json("/v1/keys").await;
    assert_eq!(listed["data"][0]["agents"], json!(["ops"]), "{listed}");
    assert_eq!(
        listed["data"][0]["expires_at"], "2999-01-01T00:00:00.000000Z",
        "{listed}"
    );
    let audit = onyx.get_json("/v1/audit").await;
    let made = audit["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "key.created")
        .unwrap_or_else(|| panic!("{audit}"));
    assert_eq!(made["actor"], "cli", "{audit}");
}
