//! The control UI's server side: the embedded app at `/` (with its routes
//! falling back to index.html, while API paths keep OpenAI-shaped 404s), the
//! guard that no UI page shares its address with an API route, the old MCP
//! page's address for browsers, and the login cookie's attributes. The
//! browser suite (frontend/tests) drives the UI itself in Chromium.

use std::path::Path;

use crate::harness::inprocess::InProcess;
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

/// A gateway with an API key (so the UI asks for a sign-in).
fn with_a_key() -> TestConfig {
    TestConfig::empty().set("gateway.auth.apiKeys", json!([ONYX_KEY]))
}

fn hash(password: &str) -> String {
    onyx::auth::hash_password(password).unwrap()
}

#[tokio::test]
async fn the_ui_is_served_at_the_root_and_api_paths_stay_json() {
    let onyx = Onyx::start(None, &[]).await;
    for path in ["/", "/sessions", "/tasks?x=1", "/mcp-servers"] {
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
    let config = with_a_key().build();
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
    let logs = onyx.get_json("/v1/logs?level=info&q=ready").await;
    assert!(
        logs["data"].to_string().contains(&onyx.url),
        "the line that says where it listens: {logs}"
    );
}

/// What Chromium sends when it opens a page.
const BROWSER_ACCEPT: &str =
    "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8";

/// One segment of a route, UI or API, for telling whether two routes can
/// answer the same address.
#[derive(Clone, Debug, PartialEq)]
enum Segment {
    Literal(String),
    /// Any one segment (`[id]`, `{id}`, or a segment mixing text and a parameter).
    One,
    /// Any number of segments, none included (`[...rest]`; `{*rest}` is `One` + `Rest`).
    Rest,
}

/// The control UI's pages as SvelteKit route ids (`/`, `/sessions`,
/// `/files/[...path]`): every folder under `frontend/src/routes` that holds a
/// `+page` file.
fn ui_pages() -> Vec<String> {
    fn walk(dir: &Path, id: &str, pages: &mut Vec<String>) {
        let entries = std::fs::read_dir(dir).unwrap_or_else(|err| panic!("{}: {err}", dir.display()));
        for entry in entries {
            let entry = entry.unwrap();
            let name = entry.file_name().into_string().unwrap();
            if entry.file_type().unwrap().is_dir() {
                walk(&entry.path(), &format!("{id}/{name}"), pages);
            } else if name.starts_with("+page.") {
                let page = if id.is_empty() {
                    "/".to_string()
                } else {
                    id.to_string()
                };
                if !pages.contains(&page) {
                    pages.push(page);
                }
            }
        }
    }
    let routes = Path::new(env!("CARGO_MANIFEST_DIR")).join("../frontend/src/routes");
    let mut pages = Vec::new();
    walk(&routes, "", &mut pages);
    pages.sort();
    pages
}

/// The addresses a SvelteKit route id answers, one pattern per choice of its
/// optional parameters (`[[lang]]`); groups (`(app)`) take no segment.
fn ui_patterns(id: &str) -> Vec<Vec<Segment>> {
    let mut patterns = vec![Vec::new()];
    for part in id.split('/').filter(|part| !part.is_empty()) {
        if part.starts_with('(') && part.ends_with(')') {
            continue;
        }
        if part.starts_with("[[") && part.ends_with("]]") {
            let with: Vec<_> = patterns
                .iter()
                .map(|p| [p.as_slice(), &[Segment::One]].concat())
                .collect();
            patterns.extend(with);
            continue;
        }
        let segment = if part.starts_with("[...") && part.ends_with(']') {
            Segment::Rest
        } else if part.contains('[') {
            Segment::One
        } else {
            Segment::Literal(part.to_string())
        };
        for pattern in &mut patterns {
            pattern.push(segment.clone());
        }
    }
    patterns
}

/// The address an axum route path answers.
fn api_pattern(path: &str) -> Vec<Segment> {
    let mut pattern = Vec::new();
    for part in path.split('/').filter(|part| !part.is_empty()) {
        if part.starts_with("{*") {
            pattern.extend([Segment::One, Segment::Rest]);
        } else if part.contains('{') {
            pattern.push(Segment::One);
        } else {
            pattern.push(Segment::Literal(part.to_string()));
        }
    }
    pattern
}

/// Whether some address matches both patterns.
fn overlap(a: &[Segment], b: &[Segment]) -> bool {
    match (a.split_first(), b.split_first()) {
        (None, None) => true,
        // A rest either ends here or takes the other side's next segment.
        (Some((Segment::Rest, after)), _) => overlap(after, b) || (!b.is_empty() && overlap(a, &b[1..])),
        (_, Some((Segment::Rest, after))) => overlap(a, after) || (!a.is_empty() && overlap(&a[1..], b)),
        (None, _) | (_, None) => false,
        (Some((x, a_after)), Some((y, b_after))) => {
            let same = match (x, y) {
                (Segment::Literal(x), Segment::Literal(y)) => x == y,
                _ => true,
            };
            same && overlap(a_after, b_after)
        }
    }
}

/// An address the pattern answers, with `sample` for every parameter.
fn sample_address(pattern: &[Segment]) -> String {
    let parts: Vec<&str> = pattern
        .iter()
        .filter_map(|segment| match segment {
            Segment::Literal(text) => Some(text.as_str()),
            Segment::One => Some("sample"),
            Segment::Rest => None,
        })
        .collect();
    format!("/{}", parts.join("/"))
}

/// The paths the router's routes were added with, read from its `Debug`
/// output: axum lists them there (`node: Node { paths: {RouteId(1): "/v1/keys", …} }`)
/// and nowhere public.
fn api_routes(router: &axum::Router) -> Vec<String> {
    let debug = format!("{router:?}");
    const TABLE: &str = "node: Node { paths: {";
    let routes = debug
        .find("path_router: PathRouter")
        .expect("a path router in the Debug output");
    let table = debug[routes..]
        .find(TABLE)
        .unwrap_or_else(|| panic!("axum's Debug output changed: no `{TABLE}` in {debug}"));
    let mut rest = &debug[routes + table + TABLE.len()..];
    let mut paths = Vec::new();
    loop {
        rest = rest.trim_start_matches([',', ' ']);
        if rest.starts_with('}') {
            break;
        }
        let entry = rest
            .strip_prefix("RouteId(")
            .unwrap_or_else(|| panic!("not a route entry: {rest}"));
        let (_, quoted) = entry.split_once(": \"").unwrap();
        let (path, after) = quoted.split_once('"').unwrap();
        assert!(path.starts_with('/') && !path.contains('\\'), "{path}");
        paths.push(path.to_string());
        rest = after;
    }
    paths.sort();
    paths
}

/// Every (UI page, API route) pair that answers some same address.
fn overlaps(pages: &[String], routes: &[String]) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for page in pages {
        for route in routes {
            let api = api_pattern(route);
            if ui_patterns(page).iter().any(|ui| overlap(ui, &api)) {
                found.push((page.clone(), route.clone()));
            }
        }
    }
    found
}

fn navigation(path: &str) -> http::Request<axum::body::Body> {
    http::Request::get(path)
        .header("accept", BROWSER_ACCEPT)
        .header("sec-fetch-mode", "navigate")
        .header("sec-fetch-dest", "document")
        .body(axum::body::Body::empty())
        .unwrap()
}

#[test]
fn route_overlap_sees_parameters_rests_optionals_and_groups() {
    let pair = |ui: &str, api: &str| ui_patterns(ui).iter().any(|p| overlap(p, &api_pattern(api)));
    assert!(pair("/mcp", "/mcp"));
    assert!(pair("/(console)/mcp", "/mcp"));
    assert!(pair("/[page]", "/health"));
    assert!(pair("/[[lang]]/metrics", "/metrics"));
    assert!(pair("/docs/[...path]", "/docs"));
    assert!(pair("/[...path]", "/v1/memory/files/{agent}/{*path}"));
    assert!(pair("/v1/tools-[name]", "/v1/{thing}"));
    assert!(pair(
        "/v1/memory/files/main/[...rest]",
        "/v1/memory/files/{agent}/{*path}"
    ));
    assert!(!pair("/mcp-servers", "/mcp"));
    assert!(!pair("/sessions", "/v1/sessions"));
    assert!(!pair("/", "/health"));
    assert!(!pair("/sessions/[id]", "/sessions"));
    assert!(!pair("/memory/files/[name]", "/v1/memory/files/{agent}/{*path}"));
    assert!(!pair(
        "/v1/memory/files/[agent]",
        "/v1/memory/files/{agent}/{*path}"
    ));
}

#[tokio::test]
async fn no_ui_page_shares_an_address_with_the_api() {
    let pages = ui_pages();
    assert!(
        pages.len() > 1 && pages.contains(&"/".to_string()),
        "the UI's pages from frontend/src/routes: {pages:?}"
    );
    let onyx = InProcess::start(with_a_key()).await;
    let routes = api_routes(onyx.router());

    // The listing is the router's: each route it names answers as the API
    // (whatever the status), not with the UI's page.
    assert!(routes.len() > 10, "{routes:?}");
    for route in &routes {
        let address = sample_address(&api_pattern(route));
        let request = http::Request::get(&address)
            .body(axum::body::Body::empty())
            .unwrap();
        let (status, _, body) = onyx.send_raw(request).await;
        assert!(
            !String::from_utf8_lossy(&body).contains("<title>Onyx</title>"),
            "{route} ({address}) answered {status} with the UI"
        );
    }
    // It finds the collision of issue 43 (the MCP page was at /mcp).
    assert_eq!(
        overlaps(&["/mcp".to_string()], &routes),
        [("/mcp".to_string(), "/mcp".to_string())]
    );

    let found = overlaps(&pages, &routes);
    assert!(
        found.is_empty(),
        "UI pages (frontend/src/routes) at addresses the API answers, so a browser opening them gets the API: \
         {found:?}. Move the page to a folder of another name."
    );
    // And a browser opening any page, key-less, gets the UI, whatever else is in the way.
    for page in &pages {
        for pattern in ui_patterns(page) {
            let address = sample_address(&pattern);
            let (status, headers, body) = onyx.send_raw(navigation(&address)).await;
            assert_eq!(status, 200, "{page} ({address})");
            assert_eq!(
                headers["content-type"], "text/html; charset=utf-8",
                "{page} ({address})"
            );
            let body = String::from_utf8_lossy(&body);
            assert!(body.contains("<title>Onyx</title>"), "{page} ({address}): {body}");
        }
    }
}

#[tokio::test]
async fn a_bookmark_of_the_old_mcp_page_opens_the_page_and_mcp_clients_still_get_the_endpoint() {
    let config = with_a_key().build();
    let onyx = Onyx::start(Some(&config), &[]).await;
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let open = |path: &str| {
        browser
            .get(format!("{}{path}", onyx.url))
            .header("accept", BROWSER_ACCEPT)
            .header("sec-fetch-mode", "navigate")
            .header("sec-fetch-dest", "document")
    };

    // A browser opening /mcp, with no key or cookie, is sent to the page, by
    // an answer no cache keeps.
    let moved = open("/mcp").send().await.unwrap();
    assert_eq!(moved.status(), 307);
    assert_eq!(moved.headers()["location"], "/mcp-servers");
    assert_eq!(moved.headers()["cache-control"], "no-store");
    let vary = moved.headers()["vary"].to_str().unwrap().to_string();
    assert!(
        vary.contains("accept") && vary.contains("sec-fetch-mode"),
        "{vary}"
    );
    let with_query = open("/mcp?server=time").send().await.unwrap();
    assert_eq!(with_query.headers()["location"], "/mcp-servers?server=time");
    let page = open("/mcp-servers").send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("<title>Onyx</title>"));

    // An MCP client's GET (it asks for an event stream) gets what the
    // streamable-HTTP transport says for a server without one: 405, after the key check.
    let stream = onyx
        .get("/mcp")
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 405);
    assert_eq!(stream.headers()["allow"], "POST");
    assert!(
        stream.headers()["vary"]
            .to_str()
            .unwrap()
            .contains("sec-fetch-mode")
    );
    assert_eq!(
        stream.json::<Value>().await.unwrap()["error"]["code"],
        "method_not_allowed"
    );
    let key_less = onyx
        .anonymous("GET", "/mcp")
        .header("accept", "text/event-stream");
    assert_eq!(reply(key_less).await.0, 401);
    // A page's script asking for HTML is no navigation (its fetch metadata says so).
    let script = onyx
        .anonymous("GET", "/mcp")
        .header("accept", "text/html")
        .header("sec-fetch-mode", "cors");
    assert_eq!(reply(script).await.0, 401);
    // A form posted to /mcp navigates too, but is no redirect: the endpoint
    // refuses a body that is not JSON (415) before any key check.
    let form = browser
        .post(format!("{}/mcp", onyx.url))
        .header("accept", BROWSER_ACCEPT)
        .header("sec-fetch-mode", "navigate")
        .header("content-type", "application/x-www-form-urlencoded")
        .body("a=b");
    assert_eq!(reply(form).await.0, 415);

    // The endpoint itself answers as before.
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let request = onyx
        .post("/mcp")
        .header("accept", "application/json, text/event-stream")
        .json(&initialize);
    let (status, body) = reply(request).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["protocolVersion"], "2025-06-18", "{body}");
}
