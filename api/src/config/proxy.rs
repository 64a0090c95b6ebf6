//! `gateway.trustedProxy`: the reverse proxy whose header names the client's
//! address. Without it the client is the TCP peer, always: a header anyone
//! can send is never read. With it, the header is read only on connections
//! from the proxy's own addresses.

use std::net::IpAddr;

use http::HeaderName;
use serde::Deserialize;

use super::ConfigError;

/// `gateway.trustedProxy`: `{ header: "X-Forwarded-For", from: ["127.0.0.1"] }`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawTrustedProxy {
    pub header: String,
    #[serde(default)]
    pub from: Vec<String>,
}

/// Who the client is behind a trusted reverse proxy.
#[derive(Debug, Clone)]
pub struct TrustedProxy {
    /// The header the proxy sets: `X-Forwarded-For` (its last address is the
    /// one the proxy saw), `X-Real-IP` or any other naming one address.
    pub header: HeaderName,
    /// The proxy's addresses (`127.0.0.1`, `10.0.0.0/8`, `fd00::/8`).
    pub from: Vec<IpNet>,
}

impl TrustedProxy {
    /// The client's address: from the header when `peer` is the proxy and the
    /// header names one, else `peer` itself.
    pub fn client(&self, peer: IpAddr, header: Option<&str>) -> IpAddr {
        if !self.from.iter().any(|net| net.contains(peer)) {
            return peer;
        }
        header
            .and_then(|value| value.rsplit(',').next())
            .and_then(parse_address)
            .unwrap_or(peer)
    }
}

/// `1.2.3.4`, `1.2.3.4:80`, `2001:db8::1`, `[2001:db8::1]:80`.
fn parse_address(text: &str) -> Option<IpAddr> {
    let text = text.trim();
    text.parse::<IpAddr>()
        .ok()
        .or_else(|| text.parse::<std::net::SocketAddr>().ok().map(|a| a.ip()))
}

/// An address and how many of its leading bits a match shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpNet {
    addr: IpAddr,
    prefix: u8,
}

impl IpNet {
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match (self.addr, ip) {
            // An IPv4 client on a dual-stack socket arrives as ::ffff:a.b.c.d.
            (IpAddr::V4(_), IpAddr::V6(v6)) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            _ => ip,
        };
        let (net, ip, bits) = match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => (u128::from(u32::from(net)), u128::from(u32::from(ip)), 32),
            (IpAddr::V6(net), IpAddr::V6(ip)) => (u128::from(net), u128::from(ip), 128),
            _ => return false,
        };
        let shift = bits - u32::from(self.prefix);
        shift >= bits || (net >> shift) == (ip >> shift)
    }
}

impl std::str::FromStr for IpNet {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let (addr, prefix) = match text.trim().split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (text.trim(), None),
        };
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| format!("{text:?} is not an address or a network like 10.0.0.0/8"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("{text:?}: the prefix must be 0 to {max}"))?,
        };
        Ok(Self { addr, prefix })
    }
}

pub(super) fn trusted_proxy(raw: Option<RawTrustedProxy>) -> Result<Option<TrustedProxy>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let header = HeaderName::from_bytes(raw.header.trim().as_bytes()).map_err(|_| {
        ConfigError::invalid(
            "gateway.trustedProxy.header",
            format!("{:?} is not a header name", raw.header),
        )
    })?;
    if raw.from.is_empty() {
        return Err(ConfigError::invalid(
            "gateway.trustedProxy.from",
            "name the proxy's addresses (e.g. [\"127.0.0.1\"]): the header is read only on connections from them",
        ));
    }
    let from = raw
        .from
        .iter()
        .enumerate()
        .map(|(index, text)| {
            text.parse::<IpNet>().map_err(|message| {
                ConfigError::invalid(format!("gateway.trustedProxy.from[{index}]"), message)
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(TrustedProxy { header, from }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proxy(from: &[&str]) -> TrustedProxy {
        TrustedProxy {
            header: HeaderName::from_static("x-forwarded-for"),
            from: from.iter().map(|f| f.parse().unwrap()).collect(),
        }
    }

    #[test]
    fn the_header_counts_only_from_the_proxy() {
        let proxy = proxy(&["127.0.0.1", "10.0.0.0/8", "fd00::/8"]);
        let ip = |text: &str| text.parse::<IpAddr>().unwrap();
        // From the proxy: its last address.
        assert_eq!(
            proxy.client(ip("127.0.0.1"), Some("9.9.9.9, 203.0.113.7")),
            ip("203.0.113.7")
        );
        assert_eq!(
            proxy.client(ip("10.2.3.4"), Some("203.0.113.8:5555")),
            ip("203.0.113.8")
        );
        assert_eq!(
            proxy.client(ip("fd12::1"), Some("[2001:db8::9]:80")),
            ip("2001:db8::9")
        );
        assert_eq!(
            proxy.client(ip("::ffff:10.1.1.1"), Some("203.0.113.9")),
            ip("203.0.113.9")
        );
        // From the proxy without a usable header: the proxy.
        assert_eq!(proxy.client(ip("127.0.0.1"), None), ip("127.0.0.1"));
        assert_eq!(proxy.client(ip("127.0.0.1"), Some("unknown")), ip("127.0.0.1"));
        // From anyone else: the header is ignored.
        assert_eq!(
            proxy.client(ip("203.0.113.5"), Some("127.0.0.1")),
            ip("203.0.113.5")
        );
        assert_eq!(proxy.client(ip("11.0.0.1"), Some("1.1.1.1")), ip("11.0.0.1"));
    }

    #[test]
    fn networks_parse_and_match() {
        let net: IpNet = "10.0.0.0/8".parse().unwrap();
        assert!(net.contains("10.255.0.1".parse().unwrap()));
        assert!(!net.contains("11.0.0.1".parse().unwrap()));
        assert!(!net.contains("::1".parse().unwrap()));
        let everything: IpNet = "0.0.0.0/0".parse().unwrap();
        assert!(everything.contains("8.8.8.8".parse().unwrap()));
        let one: IpNet = "::1".parse().unwrap();
        assert!(one.contains("::1".parse().unwrap()) && !one.contains("::2".parse().unwrap()));
        for bad in ["10.0.0.0/33", "proxy", "::/129", "1.2.3.4/x"] {
            assert!(bad.parse::<IpNet>().is_err(), "{bad}");
        }
    }
}
