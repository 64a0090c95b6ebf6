//! `gateway.cors`: a preflight from a configured origin is answered with the
//! CORS headers (exact origin, never credentials), one from any other origin
//! gets none, and with no `gateway.cors` nothing is answered at all. On a
//! key-less gateway the edge's Origin rules still come first: a configured
//! origin does not reopen issue 37's hole.

use reqwest::header::HeaderMap;
use serde_json::json;

use crate::harness::*;

const APP: &str = "https://app.example";

fn with_cors(fakes: &Fakes) -> TestConfig {
    TestConfig::new(fakes).set(
        "gateway.cors",
        json!({"origins": ["https://App.example:443", "http://127.0.0.1:5173"]}),
    )
}

async fn preflight(onyx: &Onyx, origin: &str, path: &str) -> (u16, HeaderMap) {
    let response = onyx
        .anonymous("OPTIONS", path)
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization, content-type, x-stainless-lang",
        )
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.headers().clone())
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).map(|v| v.to_str().unwrap())
}

#[tokio::test]
async fn a_configured_origin_gets_the_headers_and_no_other_does() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&with_cors(&fakes).build()), &[]).await;

    for path in ["/v1/chat/completions", "/v1/messages", "/v1/sessions"] {
        let (status, headers) = preflight(&onyx, APP, path).await;
        assert!((200..300).contains(&status), "{path}: {status}");
        assert_eq!(
            header(&headers, "access-control-allow-origin"),
            Some(APP),
            "{path}: {headers:?}"
        );
        let methods = header(&headers, "access-control-allow-methods")
            .unwrap()
            .to_ascii_uppercase();
        assert!(
            methods.contains("POST") && methods.contains("DELETE"),
            "{methods}"
        );
        let allowed = header(&headers, "access-control-allow-headers")
            .unwrap()
            .to_ascii_lowercase();
        assert!(
            allowed.contains("authorization") && allowed.contains("x-stainless-lang"),
            "{allowed}"
        );
        assert_eq!(
            header(&headers, "access-control-allow-credentials"),
            None,
            "never credentials"
        );
        assert!(
            header(&headers, "vary").is_some_and(|v| v.to_ascii_lowercase().contains("origin")),
            "{headers:?}"
        );
    }
    let (_, local) = preflight(&onyx, "http://127.0.0.1:5173", "/v1/models").await;
    assert_eq!(
        header(&local, "access-control-allow-origin"),
        Some("http://127.0.0.1:5173")
    );

    // Any other origin, however close to a configured one, gets no CORS header.
    for origin in [
        "https://evil.example",
        "https://app.example.evil.example",
        "http://app.example",
        "https://app.example:8443",
        "null",
    ] {
        let (_, headers) = preflight(&onyx, origin, "/v1/chat/completions").await;
        assert_eq!(
            header(&headers, "access-control-allow-origin"),
            None,
            "{origin}: {headers:?}"
        );
        let response = onyx
            .post("/v1/chat/completions")
            .header("origin", origin)
            .json(&json!({"model": "openai/fake-echo", "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
            .unwrap();
        assert_eq!(
            header(response.headers(), "access-control-allow-origin"),
            None,
            "{origin}"
        );
    }

    // The request itself still needs a key; its answer, and its error, are readable by the page.
    let body = json!({"model": "openai/fake-echo", "x-onyx-session-id": "new", "messages": [{"role": "user", "content": "hi"}]});
    let response = onyx
        .post("/v1/chat/completions")
        .header("origin", APP)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(response.headers(), "access-control-allow-origin"),
        Some(APP)
    );
    let exposed = header(response.headers(), "access-control-expose-headers")
        .unwrap()
        .to_ascii_lowercase();
    assert!(exposed.contains("x-onyx-session-id"), "{exposed}");
    let response = onyx
        .anonymous("POST", "/v1/chat/completions")
        .header("origin", APP)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    assert_eq!(
        header(response.headers(), "access-control-allow-origin"),
        Some(APP)
    );
}

#[tokio::test]
async fn cors_is_off_by_default() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&fakes.config()), &[]).await;
    let (_, headers) = preflight(&onyx, APP, "/v1/chat/completions").await;
    for name in [
        "access-control-allow-origin",
        "access-control-allow-methods",
        "access-control-allow-headers",
    ] {
        assert_eq!(header(&headers, name), None, "{name}: {headers:?}");
    }
    let response = onyx.get("/v1/models").header("origin", APP).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(header(response.headers(), "access-control-allow-origin"), None);
}

#[tokio::test]
async fn a_keyless_gateway_refuses_even_a_configured_origin() {
    let fakes = Fakes::start().await;
    let config = with_cors(&fakes).set("gateway.auth.apiKeys", json!([])).build();
    let onyx = Onyx::start(Some(&config), &[]).await;
    let (status, headers) = preflight(&onyx, APP, "/v1/chat/completions").await;
    assert_eq!(status, 403, "{headers:?}");
    assert_eq!(header(&headers, "access-control-allow-origin"), None);
    let (status, refused) = reply(
        onyx.anonymous("POST", "/v1/chat/completions")
            .header("origin", APP)
            .json(&json!({"model": "openai/fake-echo", "messages": [{"role": "user", "content": "hi"}]})),
    )
    .await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(refused["error"]["code"], "origin_not_allowed", "{refused}");
    // The gateway's own programs (no Origin) still work.
    let (status, answer) = reply(
        onyx.anonymous("POST", "/v1/chat/completions")
            .json(&json!({"model": "openai/fake-echo", "messages": [{"role": "user", "content": "hi"}]})),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
}

#[tokio::test]
async fn a_wildcard_origin_stops_the_start_naming_the_entry() {
    let fakes = Fakes::start().await;
    for origins in [json!(["*"]), json!(["https://app.example/path"])] {
        let config = TestConfig::new(&fakes)
            .set("gateway.cors", json!({"origins": origins}))
            .build();
        let Err((code, text)) = Onyx::try_start(Some(&config), &[]).await else {
            panic!("{origins}: started");
        };
        assert_ne!(code, Some(0), "{origins}: {text}");
        assert!(text.contains("gateway.cors.origins[0]"), "{origins}: {text}");
    }
}
