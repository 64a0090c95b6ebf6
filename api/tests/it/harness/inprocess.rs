//! The real router in-process: `App` built from a `TestConfig` on an in-memory
//! SurrealDB and a temporary data dir, requests sent with
//! `tower::ServiceExt::oneshot`. For API-shape checks that need no process.

use std::sync::Arc;

use axum::body::Body;
use http::{Method, Request, StatusCode};
use onyx_test_fakes::DEFAULT_KEY;
use serde_json::{Value, json};
use tower::ServiceExt;

use super::{ONYX_KEY, TestConfig};

pub struct InProcess {
    router: axum::Router,
    /// Keeps the data dir until the test ends.
    _dir: tempfile::TempDir,
}

/// A response: status and body (JSON, or `Null` when it is not JSON).
pub struct Reply {
    pub status: u16,
    pub body: Value,
}

impl InProcess {
    /// Builds the app from `config` (storage forced to a temp dir and `mem://`).
    pub async fn start(config: TestConfig) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let text = config
            .set("storage.dataDir", json!(dir.path()))
            .set("storage.surrealdb", json!({ "url": "mem://" }))
            .build();
        let env = |name: &str| (name == "FAKE_KEY").then(|| DEFAULT_KEY.to_string());
        let config = onyx::config::parse(Some(&text), None, &env).unwrap();
        let app = onyx::app::App::new(&config).await.unwrap();
        Self {
            router: onyx::http::router(Arc::new(app)),
            _dir: dir,
        }
    }

    /// The router itself, for tests that read its route table.
    pub fn router(&self) -> &axum::Router {
        &self.router
    }

    /// Sends `request` through the router.
    pub async fn send(&self, request: Request<Body>) -> Reply {
        let (status, _, bytes) = self.send_raw(request).await;
        Reply {
            status: status.as_u16(),
            body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        }
    }

    /// Sends `request` through the router; the status, headers and whole body.
    pub async fn send_raw(&self, request: Request<Body>) -> (StatusCode, http::HeaderMap, bytes::Bytes) {
        let response = self.router.clone().oneshot(request).await.unwrap();
        let (parts, body) = response.into_parts();
        let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
        (parts.status, parts.headers, bytes)
    }

    /// `method path` with `body` as JSON, with the test key.
    pub async fn call(&self, method: Method, path: &str, body: &Value) -> Reply {
        let request = request(method, path, Some(ONYX_KEY))
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .unwrap();
        self.send(request).await
    }

    /// `POST /v1/chat/completions` with `body`.
    pub async fn chat(&self, body: Value) -> Reply {
        self.call(Method::POST, "/v1/chat/completions", &body).await
    }
}

/// A request builder for `method path`, with `key` as bearer if any.
pub fn request(method: Method, path: &str, key: Option<&str>) -> http::request::Builder {
    let builder = Request::builder().method(method).uri(path);
    match key {
        Some(key) => builder.header("authorization", format!("Bearer {key}")),
        None => builder,
    }
}
