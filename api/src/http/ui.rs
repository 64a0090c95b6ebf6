//! The control UI: the SvelteKit app's static files, embedded in the binary at
//! build time (`frontend/build`), served at `/` with index.html for every
//! client-side route. Paths under the API answer in OpenAI's error shape
//! instead, so a wrong URL never gets a web page by mistake. Every UI response
//! carries the security headers of `ui_headers`.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{Method, StatusCode, header};
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
        return super::ops::not_found(request.uri().clone()).await.into_response();
    }
    let mut response = file_response(&path);
    let index = UI.get_file("index.html").and_then(|f| f.contents_utf8());
    super::ui_headers::add(response.headers_mut(), index);
    response
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
