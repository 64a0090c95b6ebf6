//! The control UI's cookie sessions (tower-sessions, stored in SurrealDB),
//! run only for requests that can use one: those carrying a cookie, and the
//! `/auth/` routes that start and end one. API clients send a key and no
//! cookie; they skip the session machinery (a cookie jar, a session object,
//! a cloned inner service and a boxed future on every request).
//!
//! Over https (a TLS-terminating proxy says so in `X-Forwarded-Proto`) the
//! session cookie is marked `Secure`.

use std::convert::Infallible;
use std::task::{Context, Poll};

use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use futures::future::{BoxFuture, Either};
use tower::{Layer, Service, ServiceExt};

/// Wraps each route in `sessions` (a `SessionManagerLayer`) for the requests that need it.
#[derive(Clone)]
pub struct UiSessionsLayer<L> {
    sessions: L,
}

impl<L> UiSessionsLayer<L> {
    pub fn new(sessions: L) -> Self {
        Self { sessions }
    }
}

impl<L: Clone, S> Layer<S> for UiSessionsLayer<L> {
    type Service = UiSessions<S, L>;

    fn layer(&self, inner: S) -> Self::Service {
        UiSessions {
            bare: inner,
            sessions: self.sessions.clone(),
        }
    }
}

/// One route, and the session layer to put in front of it when a request
/// can use a session. The layered service is made for those requests only:
/// keeping it made every clone of the route (one per request) clone the
/// route twice.
#[derive(Clone)]
pub struct UiSessions<S, L> {
    bare: S,
    sessions: L,
}

impl<S, L> Service<Request> for UiSessions<S, L>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone,
    L: Layer<S>,
    L::Service: Service<Request, Response = Response, Error = Infallible> + Send + 'static,
    <L::Service as Service<Request>>::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<S::Future, BoxFuture<'static, Result<Response, Infallible>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.bare.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        if !can_use_a_session(&request) {
            return Either::Left(self.bare.call(request));
        }
        let https = came_over_https(&request);
        let with_session = self.sessions.layer(self.bare.clone());
        Either::Right(Box::pin(async move {
            let mut response = with_session.oneshot(request).await?;
            if https {
                mark_cookies_secure(&mut response);
            }
            Ok(response)
        }))
    }
}

fn can_use_a_session(request: &Request) -> bool {
    request.headers().contains_key(header::COOKIE) || request.uri().path().starts_with("/auth/")
}

fn came_over_https(request: &Request) -> bool {
    request
        .headers()
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("https"))
        || request.uri().scheme_str() == Some("https")
}

fn mark_cookies_secure(response: &mut Response) {
    let cookies: Vec<_> = response
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .cloned()
        .collect();
    response.headers_mut().remove(header::SET_COOKIE);
    for cookie in cookies {
        let secured = cookie
            .to_str()
            .ok()
            .filter(|c| !c.contains("Secure"))
            .and_then(|c| HeaderValue::from_str(&format!("{c}; Secure")).ok())
            .unwrap_or(cookie);
        response.headers_mut().append(header::SET_COOKIE, secured);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;

    fn request(path: &str, cookie: bool) -> Request {
        let mut builder = Request::builder().uri(path);
        if cookie {
            builder = builder.header(header::COOKIE, "onyx_session=x");
        }
        builder.body(Body::empty()).unwrap()
    }

    #[test]
    fn only_cookies_and_the_login_routes_get_a_session() {
        assert!(can_use_a_session(&request("/v1/status", true)));
        assert!(can_use_a_session(&request("/auth/login", false)));
        assert!(!can_use_a_session(&request("/v1/chat/completions", false)));
    }

    #[test]
    fn cookies_are_marked_secure_once() {
        let mut response = Response::new(Body::empty());
        for cookie in ["a=1; HttpOnly", "b=2; Secure"] {
            response
                .headers_mut()
                .append(header::SET_COOKIE, HeaderValue::from_static(cookie));
        }
        mark_cookies_secure(&mut response);
        let cookies: Vec<_> = response.headers().get_all(header::SET_COOKIE).iter().collect();
        assert_eq!(cookies, ["a=1; HttpOnly; Secure", "b=2; Secure"]);
    }
}
