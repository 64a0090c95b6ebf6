//! The control UI: the SvelteKit app's static files, embedded in the binary at
//! build time (`frontend/build`), served at `/` with index.html for every
//! client-side route. Paths under the API answer in OpenAI's error shape
//! instead, so a wrong URL never gets a web page by mistake. Every UI response
//! carries the security headers of `ui_headers`.
//!
//! A UI page never shares its address with an API route: a page's address
//! must open that page when typed, bookmarked or reloaded, and an API route
//! must answer its clients the same whoever asks (`tests/it/ui.rs` fails on
//! any overlap). A page whose old address became the API's keeps it for
//! browsers only: `old_mcp_page`.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use include_dir::{Dir, include_dir};

static UI: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/../frontend/build");

const API_PREFIXES: &[&str] = &["/v1/", "/v1", "/auth/", "/metrics", "/health"];

fn content_type(path: &str) -> &'static str {
    match path.rsplit('.').next().unwrap_or_default() {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "svg" => "image/svg+xml",
        "json" => "application/json",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "woff2" => "font/woff2",
        "txt" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// Everything no route claimed: a UI file, the UI's index.html for its own
/// routes, or the API's 404/405.
pub async fn fallback(request: Request) -> Response {
    let path = request.uri().path().to_string();
    let is_read = matches!(*request.method(), Method::GET | Method::HEAD);
    if !is_read || API_PREFIXES.iter().any(|p| path == *p || path.starts_with(p)) {
        return super::health::not_found(request.uri().clone())
            .await
            .into_response();
    }
    let mut response = file_response(&path);
    let index = UI.get_file("index.html").and_then(|f| f.contents_utf8());
    super::ui_headers::add(response.headers_mut(), index);
    response
}

/// Where the MCP page lives since `/mcp` is only Onyx's MCP endpoint.
const MCP_PAGE: &str = "/mcp-servers";

/// On the `/mcp` route, before its auth: a browser opening `/mcp` (a bookmark
/// of the MCP page from before it moved to `/mcp-servers`) is sent to the
/// page; every other request is the MCP endpoint's, unchanged. Neither answer
/// may be reused for the other kind of request (no-store, `Vary`).
pub async fn old_mcp_page(request: Request, next: Next) -> Response {
    let mut response = if is_navigation(request.method(), request.headers()) {
        let location = match request.uri().query() {
            Some(query) => format!("{MCP_PAGE}?{query}"),
            None => MCP_PAGE.to_string(),
        };
        let mut moved = StatusCode::TEMPORARY_REDIRECT.into_response();
        if let Ok(location) = HeaderValue::from_str(&location) {
            moved.headers_mut().insert(header::LOCATION, location);
        }
        moved
            .headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        moved
    } else {
        next.run(request).await
    };
    response
        .headers_mut()
        .append(header::VARY, HeaderValue::from_static("accept, sec-fetch-mode"));
    response
}

/// A browser opening a page (an address typed, a bookmark, a link, a reload):
/// a GET asking for HTML and no event stream (an MCP client's GET must ask for
/// `text/event-stream`), whose fetch metadata, which a page's scripts cannot
/// set, says `navigate` (a browser too old to send it is taken at its Accept).
fn is_navigation(method: &Method, headers: &HeaderMap) -> bool {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    let mode = headers.get("sec-fetch-mode").map(HeaderValue::as_bytes);
    *method == Method::GET
        && accepts(accept, "text/html")
        && !accepts(accept, "text/event-stream")
        && mode.is_none_or(|mode| mode.eq_ignore_ascii_case(b"navigate"))
}

/// Whether an Accept header lists `media_type` (and does not refuse it with `q=0`).
fn accepts(accept: &str, media_type: &str) -> bool {
    accept.split(',').any(|item| {
        let mut parts = item.split(';').map(str::trim);
        let listed = parts
            .next()
            .is_some_and(|listed| listed.eq_ignore_ascii_case(media_type));
        let refused = parts.any(|parameter| {
            parameter
                .strip_prefix("q=")
                .and_then(|q| q.parse::<f32>().ok())
                .is_some_and(|q| q <= 0.0)
        });
        listed && !refused
    })
}

fn file_response(path: &str) -> Response {
    let relative = path.trim_start_matches('/');
    if let Some(file) = UI.get_file(relative).filter(|_| !relative.is_empty()) {
        // Vite's hashed assets never change under the same name.
        let cache = if relative.starts_with("_app/immutable/") {
            "public, max-age=31536000, immutable"
        } else {
            "no-cache"
        };
        return (
            [
                (header::CONTENT_TYPE, content_type(relative)),
                (header::CACHE_CONTROL, cache),
            ],
            Body::from(file.contents()),
        )
            .into_response();
    }
    match UI.get_file("index.html") {
        Some(index) => (
            [
                (header::CONTENT_TYPE, "text/html; charset=utf-8"),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            Body::from(index.contents()),
        )
            .into_response(),
        None => (
            StatusCode::NOT_FOUND,
            "the control UI was not built into this binary",
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|&(name, value)| {
                (
                    header::HeaderName::from_static(name),
                    HeaderValue::from_static(value),
                )
            })
            .collect()
    }

    const CHROMIUM_ACCEPT: &str =
        "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8";

    #[test]
    fn a_browser_opening_a_page_is_a_navigation() {
        let typed = headers(&[("accept", CHROMIUM_ACCEPT), ("sec-fetch-mode", "navigate")]);
        assert!(is_navigation(&Method::GET, &typed));
        // A browser without fetch metadata, by its Accept alone.
        assert!(is_navigation(
            &Method::GET,
            &headers(&[("accept", CHROMIUM_ACCEPT)])
        ));
    }

    #[test]
    fn mcp_clients_scripts_and_forms_are_not_navigations() {
        let cases = [
            // The streamable-HTTP transport's GET, with and without HTML listed.
            (Method::GET, headers(&[("accept", "text/event-stream")])),
            (
                Method::GET,
                headers(&[
                    ("accept", "text/html, text/event-stream"),
                    ("sec-fetch-mode", "navigate"),
                ]),
            ),
            // A page's script asking for HTML: fetch metadata says cors, not navigate.
            (
                Method::GET,
                headers(&[("accept", "text/html"), ("sec-fetch-mode", "cors")]),
            ),
            // A form posted to /mcp is a navigation too, but never a page to open.
            (
                Method::POST,
                headers(&[("accept", CHROMIUM_ACCEPT), ("sec-fetch-mode", "navigate")]),
            ),
            (Method::GET, headers(&[("accept", "application/json")])),
            (Method::GET, headers(&[("accept", "text/html;q=0, */*")])),
            (Method::GET, HeaderMap::new()),
        ];
        for (method, headers) in cases {
            assert!(!is_navigation(&method, &headers), "{method} {headers:?}");
        }
    }
}
