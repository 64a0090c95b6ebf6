//! Who is on the other end of a request: the TCP peer's address, or, when
//! `gateway.trustedProxy` is configured and the peer is that proxy, the
//! address its header names. One reading for the login throttle and the
//! audit log alike; a header is never believed from anyone else.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;

use crate::app::App;

/// The client's address (`None` only for a request that came over no socket, as in-process tests send).
#[derive(Debug, Clone, Copy)]
pub struct ClientIp(pub Option<IpAddr>);

impl ClientIp {
    /// For the audit log.
    pub fn text(self) -> Option<String> {
        self.0.map(|ip| ip.to_string())
    }
}

impl FromRequestParts<Arc<App>> for ClientIp {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, app: &Arc<App>) -> Result<Self, Self::Rejection> {
        let Some(ConnectInfo(peer)) = parts.extensions.get::<ConnectInfo<SocketAddr>>().copied() else {
            return Ok(Self(None));
        };
        let peer = peer.ip();
        Ok(Self(Some(match &app.trusted_proxy {
            Some(proxy) => {
                let header = parts.headers.get(&proxy.header).and_then(|v| v.to_str().ok());
                proxy.client(peer, header)
            }
            None => peer,
        })))
    }
}
