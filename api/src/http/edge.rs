//! What a key-less gateway answers. With no key (the loopback default) a key
//! cannot tell the owner's programs from a web page in the owner's browser,
//! which can reach `127.0.0.1` too: through DNS rebinding (a name of the
//! attacker's that resolves to 127.0.0.1, sent as `Host`) or a plain
//! cross-site request. So while the gateway is key-less every request must
//! carry a loopback `Host` (`127.0.0.1`, `[::1]` or `localhost`, any port),
//! no `Origin` or its own (`http://` + that `Host`), and no
//! `Sec-Fetch-Site` saying another site sent it. JSON endpoints also refuse
//! bodies that are not sent as JSON (`body`), which is how pages skip the
//! CORS preflight.
//!
//! The one exception is the MCP OAuth callback (`mcp_oauth`), which a
//! browser reaches from another site by design.
//!
//! A keyed gateway needs none of this: a page has no key to send, and the
//! UI's cookie is `SameSite=Strict` and checked for its own origin
//! (`middleware`).

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::extract::Request;
use axum::http::{HeaderMap, Uri, header};
use axum::response::{IntoResponse, Response};
use futures::future::{Either, Ready, ready};
use tower::{Layer, Service};

use super::error::ApiError;
use crate::app::App;

/// Applies the key-less rules (see the module docs) to every route it wraps.
#[derive(Clone)]
pub struct KeylessEdgeLayer {
    app: Arc<App>,
}

impl KeylessEdgeLayer {
    pub fn new(app: Arc<App>) -> Self {
        Self { app }
    }
}

impl<S> Layer<S> for KeylessEdgeLayer {
    type Service = KeylessEdge<S>;

    fn layer(&self, inner: S) -> Self::Service {
        KeylessEdge {
            app: self.app.clone(),
            inner,
        }
    }
}

#[derive(Clone)]
pub struct KeylessEdge<S> {
    app: Arc<App>,
    inner: S,
}

impl<S> Service<Request> for KeylessEdge<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<S::Future, Ready<Result<Response, Infallible>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        // The OAuth callback is reached from the authorization server's
        // page; its one-time state, not the Host or Origin, admits it.
        if self.app.auth.required() || req.uri().path() == super::mcp_oauth::CALLBACK_PATH {
            return Either::Left(self.inner.call(req));
        }
        match keyless_request(req.headers(), req.uri()) {
            Ok(()) => Either::Left(self.inner.call(req)),
            Err(refused) => Either::Right(ready(Ok(refused.into_response()))),
        }
    }
}

/// Whether a request may reach a key-less gateway (see the module docs).
pub fn keyless_request(headers: &HeaderMap, uri: &Uri) -> Result<(), ApiError> {
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| uri.authority().map(|a| a.as_str()))
        .unwrap_or_default();
    if !loopback_host(host) {
        return Err(ApiError::Refused {
            message: format!(
                "Host {host:?} refused: without an API key Onyx answers only 127.0.0.1, [::1] or localhost \
                 (set gateway.auth.apiKeys or ONYX_API_KEY to serve other names)"
            ),
            code: "host_not_allowed",
        });
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or_default();
        let same = ["http://", "https://"].iter().any(|scheme| {
            origin
                .strip_prefix(scheme)
                .is_some_and(|rest| rest.eq_ignore_ascii_case(host))
        });
        if !same {
            return Err(ApiError::Refused {
                message: format!(
                    "Origin {origin:?} refused: without an API key Onyx answers only its own pages and programs that send no Origin"
                ),
                code: "origin_not_allowed",
            });
        }
    }
    let fetched_from = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
    if matches!(fetched_from, Some("cross-site" | "same-site")) {
        return Err(ApiError::Refused {
            message: "refused: another site's page sent this request (Sec-Fetch-Site)".into(),
            code: "origin_not_allowed",
        });
    }
    Ok(())
}

/// `127.0.0.1`, `[::1]` or `localhost`, each with an optional port.
fn loopback_host(host: &str) -> bool {
    let (name, port, bracketed) = match host.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((name, "")) => (name, None, true),
            Some((name, after)) => match after.strip_prefix(':') {
                Some(port) => (name, Some(port), true),
                None => return false,
            },
            None => return false,
        },
        None => match host.rsplit_once(':') {
            Some((name, port)) => (name, Some(port), false),
            None => (host, None, false),
        },
    };
    let port_ok = port.is_none_or(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()));
    let name_ok = if bracketed {
        name == "::1"
    } else {
        name == "127.0.0.1" || name.eq_ignore_ascii_case("localhost")
    };
    port_ok && name_ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn request(host: Option<&'static str>, origin: Option<&'static str>) -> Result<(), ApiError> {
        let mut headers = HeaderMap::new();
        if let Some(host) = host {
            headers.insert(header::HOST, HeaderValue::from_static(host));
        }
        if let Some(origin) = origin {
            headers.insert(header::ORIGIN, HeaderValue::from_static(origin));
        }
        keyless_request(&headers, &Uri::from_static("/v1/agents"))
    }

    #[test]
    fn only_loopback_names_are_hosts() {
        for host in [
            "127.0.0.1",
            "127.0.0.1:18790",
            "localhost",
            "LOCALHOST:8080",
            "[::1]",
            "[::1]:18790",
        ] {
            assert!(loopback_host(host), "{host}");
        }
        for host in [
            "",
            "rebind.attacker.example",
            "rebind.attacker.example:18790",
            "127.0.0.1.nip.io",
            "localhost.attacker.example",
            "127.0.0.2",
            "0.0.0.0:18790",
            "[::1",
            "[::2]:80",
            "::1",
            "127.0.0.1:",
            "127.0.0.1:abc",
            "localhost:18790]",
            "[::1]x",
        ] {
            assert!(!loopback_host(host), "{host}");
        }
    }

    #[test]
    fn a_rebound_name_or_another_origin_is_refused() {
        assert!(request(Some("127.0.0.1:18790"), None).is_ok());
        assert!(request(Some("127.0.0.1:18790"), Some("http://127.0.0.1:18790")).is_ok());
        assert!(request(Some("localhost:18790"), Some("http://localhost:18790")).is_ok());
        for (host, origin) in [
            (
                Some("rebind.attacker.example:18790"),
                Some("http://rebind.attacker.example:18790"),
            ),
            (Some("127.0.0.1:18790"), Some("http://evil.example")),
            (Some("127.0.0.1:18790"), Some("null")),
            (Some("127.0.0.1:18790"), Some("http://127.0.0.1:3000")),
            (Some("localhost:18790"), Some("http://127.0.0.1:18790")),
            (None, None),
        ] {
            let refused = request(host, origin).unwrap_err();
            assert_eq!(refused.status(), 403, "{host:?} {origin:?}");
        }
    }
}
