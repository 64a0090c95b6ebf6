//! The control UI's server side: the embedded app at `/` (with its routes
//! falling back to index.html, while API paths keep OpenAI-shaped 404s), and
//! the login cookie's attributes. The browser suite (frontend/tests) drives
//! the UI itself in Chromium.

use crate::harness::*;
use serde_json::{Value, json};

/// A request with the cookie (and headers) given, no API key.
async fn send(onyx: &Onyx, method: &str, path: &str, cookie: &str, body: Option<Value>) -> reqwest::Response {
    let mut request = onyx
        .anonymous(method, path)
        .header("cookie", cookie)
        .header("origin", &onyx.url);
    if let Some(body) = body {
        request = request.json(&body);
    }
    request.send().await.unwrap()
}

fn hash(password: &str) -> String {
    onyx::auth::hash_password(password).unwrap()
}

#[tokio::test]
async fn the_ui_is_served_at_the_root_and_api_paths_stay_json() {
    let onyx = Onyx::start(None, &[]).await;
    for path in ["/", "/sessions", "/tasks?x=1"] {
        let response = onyx.anonymous("GET", path).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/html")
        );
        assert!(
            response.text().await.unwrap().contains("<title>Onyx</title>"),
            "{path}"
        );
    }
    let favicon = onyx.anonymous("GET", "/favicon.svg").send().await.unwrap();
    assert_eq!(favicon.headers()["content-type"], "image/svg+xml");
    for (method, path) in [
        ("GET", "/v1/nope"),
        ("POST", "/somewhere"),
        ("GET", "/auth/nothing"),
    ] {
        let (status, body) = reply(onyx.anonymous(method, path)).await;
        assert_eq!(status, 404, "{method} {path}");
        assert_eq!(body["error"]["code"], "unknown_route", "{body}");
    }
    // Without any key (loopback), the UI needs no login.
    let me = onyx.get_json("/auth/me").await;
    assert_eq!(
        me,
        json!({"authenticated": true, "auth_required": false, "password_configured": false})
    );
}

#[tokio::test]
async fn the_login_cookie_is_http_only_strict_and_secure_behind_https() {
    let config = TestConfig::empty()
        .set(
            "gateway.auth",
            json!({ "apiKeys": [ONYX_KEY], "passwordHash": hash("s3cret pass") }),
        )
        .build();
    let onyx = Onyx::start(Some(&config), &[]).await;
    let login = |proto: Option<&'static str>| {
        let mut request = onyx
            .anonymous("POST", "/auth/login")
            .json(&json!({"password": "s3cret pass"}));
        if let Some(proto) = proto {
            request = request.header("x-forwarded-proto", proto);
        }
        request.send()
    };
    let plain = login(None).await.unwrap();
    assert_eq!(plain.status(), 200);
    let cookie = plain.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(cookie.starts_with("onyx_session="), "{cookie}");
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    assert!(!cookie.contains("Secure"), "{cookie}");
    let https = login(Some("https")).await.unwrap();
    let cookie = https.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(cookie.contains("Secure"), "{cookie}");

    // The cookie reaches the API; a wrong password and a bad body do not sign in.
    let session = cookie.split(';').next().unwrap().to_string();
    assert_eq!(
        send(&onyx, "GET", "/v1/models", &session, None).await.status(),
        200
    );
    let wrong = send(
        &onyx,
        "POST",
        "/auth/login",
        "",
        Some(json!({"password": "nope"})),
    )
    .await;
    assert_eq!(wrong.status(), 401);
    let bad = send(&onyx, "POST", "/auth/login", "", Some(json!({"pass": "x"}))).await;
    assert_eq!(bad.status(), 400);
    // Signed out, the cookie is worth nothing.
    assert_eq!(
        send(&onyx, "POST", "/auth/logout", &session, None).await.status(),
        200
    );
    let after = send(&onyx, "GET", "/v1/models", &session, None).await;
    assert_eq!(after.status(), 401);
}

#[tokio::test]
async fn without_a_password_login_says_how_to_set_one() {
    let config = TestConfig::empty()
        .set("gateway.auth.apiKeys", json!([ONYX_KEY]))
        .build();
    let onyx = Onyx::start(Some(&config), &[]).await;
    let me = onyx.get_json("/auth/me").await;
    assert_eq!(me["authenticated"], false);
    assert_eq!(me["password_configured"], false);
    let (status, body) = reply(
        onyx.anonymous("POST", "/auth/login")
            .json(&json!({"password": "anything"})),
    )
    .await;
    assert_eq!(status, 409);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("onyx hash-password"),
        "{body}"
    );
}

#[tokio::test]
async fn provider_details_and_logs_need_the_admin_scope() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&fakes.config()), &[]).await;
    let created = onyx.create_key("phone", "chat").await;
    let chat_key = created["key"].as_str().unwrap().to_string();
    for path in ["/v1/providers", "/v1/logs"] {
        let (as_chat, _) = reply(onyx.with_key("GET", path, &chat_key)).await;
        assert_eq!(as_chat, 403, "{path}");
        assert_eq!(reply(onyx.get(path)).await.0, 200, "{path}");
    }
    // Keys are shown only as their last characters.
    let providers = onyx.get_json("/v1/providers").await;
    let openai = providers["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "openai")
        .unwrap();
    assert_eq!(openai["apiKey"], "…0001", "{openai}");
    assert!(!providers.to_string().contains(onyx_test_fakes::DEFAULT_KEY));
    let (_, probe) = reply(onyx.post("/v1/providers/openai/test")).await;
    assert_eq!(probe["status"], "up", "{probe}");
    let logs = onyx.get_json("/v1/logs?level=info&q=listening").await;
    assert!(logs["data"].to_string().contains("onyx listening"), "{logs}");
}
