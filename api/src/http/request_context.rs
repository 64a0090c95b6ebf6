//! The context every request gets: an id (the client's `x-request-id` when
//! sane, else a UUIDv7), a tracing span carrying it, the id echoed on the
//! response, and the request metrics.
//!
//! It is the outermost of the per-request layers, which `http::mod` stacks
//! into one service wrapping each route once: every `Router::layer` boxes
//! the route again, and each boxed route clones every route inside it on
//! every request.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderValue, Method};
use axum::response::Response;
use tower::{Layer, Service};
use tracing::Instrument;
use tracing::instrument::Instrumented;

use super::body::BodyLimit;
use crate::app::App;

const REQUEST_ID: &str = "x-request-id";

fn client_request_id(req: &Request) -> Option<HeaderValue> {
    let value = req.headers().get(REQUEST_ID)?;
    let text = value.to_str().ok()?;
    let sane = !text.is_empty() && text.len() <= 128 && text.bytes().all(|b| b.is_ascii_graphic());
    sane.then(|| value.clone())
}

/// A UUIDv7, encoded on the stack (no intermediate `String`).
fn new_request_id() -> HeaderValue {
    let mut buf = uuid::Uuid::encode_buffer();
    let text = uuid::Uuid::now_v7().hyphenated().encode_lower(&mut buf);
    HeaderValue::from_str(text).unwrap_or(HeaderValue::from_static("unknown"))
}

/// A span field's text, written as it is. The log's field formatter quotes
/// and escapes a `&str` character by character, which was most of what the
/// request span cost; these texts have nothing to escape: the id is checked
/// printable ASCII (or made here), the method and the path are as hyper
/// parsed them (no spaces or control characters).
struct Plain<'a>(&'a str);

impl std::fmt::Debug for Plain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// Gives each request on the services it wraps its context (see the module
/// docs). A hand-written service rather than `from_fn`, which boxes the route
/// and the future and clones the route on every request: this one wraps
/// every route, so that showed in the gateway's profile.
#[derive(Clone)]
pub struct RequestContextLayer {
    app: Arc<App>,
}

impl RequestContextLayer {
    pub fn new(app: Arc<App>) -> Self {
        Self { app }
    }
}

impl<S> Layer<S> for RequestContextLayer {
    type Service = RequestContext<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequestContext {
            app: self.app.clone(),
            inner,
        }
    }
}

#[derive(Clone)]
pub struct RequestContext<S> {
    app: Arc<App>,
    inner: S,
}

impl<S, B> Service<Request> for RequestContext<S>
where
    S: Service<Request, Response = Response<B>, Error = Infallible>,
{
    type Response = Response<B>;
    type Error = Infallible;
    type Future = Finishing<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request) -> Self::Future {
        let started = Instant::now();
        let id = client_request_id(&req).unwrap_or_else(new_request_id);
        // MatchedPath is a shared string: cloning it copies no text.
        let route = req.extensions().get::<MatchedPath>().cloned();
        let method = req.method().clone();
        req.extensions_mut().insert(BodyLimit(self.app.max_body_bytes));
        let span = tracing::info_span!(
            "request",
            request_id = ?Plain(id.to_str().unwrap_or_default()),
            method = ?Plain(method.as_str()),
            path = ?Plain(req.uri().path())
        );
        Finishing {
            answer: self.inner.call(req).instrument(span),
            request: Some(Started {
                app: self.app.clone(),
                started,
                id,
                route,
                method,
            }),
        }
    }
}

/// What is known of a request when it starts, for when it finishes.
struct Started {
    app: Arc<App>,
    started: Instant,
    id: HeaderValue,
    route: Option<MatchedPath>,
    method: Method,
}

pin_project_lite::pin_project! {
    /// The route's answer, then the request's metrics, log line and id header.
    pub struct Finishing<F> {
        #[pin]
        answer: Instrumented<F>,
        request: Option<Started>,
    }
}

impl<F, B> Future for Finishing<F>
where
    F: Future<Output = Result<Response<B>, Infallible>>,
{
    type Output = Result<Response<B>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let Ok(mut response) = ready!(this.answer.as_mut().poll(cx));
        let Some(request) = this.request.take() else {
            return Poll::Ready(Ok(response));
        };
        let elapsed = request.started.elapsed();
        let status = response.status().as_u16();
        let route = request.route.as_ref().map_or("unmatched", MatchedPath::as_str);
        request
            .app
            .metrics
            .record_request(route, request.method.as_str(), status, elapsed.as_secs_f64());
        this.answer.span().in_scope(|| {
            tracing::debug!(
                status,
                elapsed_us = elapsed.as_micros() as u64,
                "request finished"
            )
        });
        response.headers_mut().insert(REQUEST_ID, request.id);
        Poll::Ready(Ok(response))
    }
}
