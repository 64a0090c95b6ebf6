//! `web_fetch` (a page as readable text) and `web_search` (SearXNG's JSON API).
//! `web_fetch` resolves the host itself and refuses private, loopback,
//! link-local and other non-public addresses unless allowlisted
//! (`tools.webFetch.allowPrivate`), connects only to the address it checked
//! (no DNS rebinding), and checks again at every redirect.

use std::net::{IpAddr, SocketAddr};

use serde_json::{Value, json};
use url::Url;

use super::tool::{Needs, Tool};
use super::{ToolContext, ToolError, ToolKind, fail, number, text};
use crate::config::ToolsConfig;

const MAX_REDIRECTS: usize = 5;
const MAX_TEXT_CHARS: usize = 50_000;

pub const FETCH: Tool = Tool {
    name: "web_fetch",
    description: "Fetch a web page (http or https) and return it as readable text.",
    parameters: || json!({"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}),
    kind: ToolKind::Dangerous,
    needs: Needs::Nothing,
    over_mcp: false,
    asks_first: None,
    call: |ctx, args| Box::pin(fetch_tool(ctx, args)),
};

pub const SEARCH: Tool = Tool {
    name: "web_search",
    description: "Search the web. Returns titles, URLs and short extracts.",
    parameters: || {
        json!({"type": "object", "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer", "description": "default 5"}
        }, "required": ["query"]})
    },
    kind: ToolKind::Dangerous,
    needs: Needs::Searxng,
    over_mcp: false,
    asks_first: None,
    call: |ctx, args| Box::pin(search_tool(ctx, args)),
};

pub const TOOLS: &[Tool] = &[FETCH, SEARCH];

async fn fetch_tool(ctx: &ToolContext, args: &Value) -> Result<String, ToolError> {
    fetch(&ctx.settings, text(args, "url")?).await
}

async fn search_tool(ctx: &ToolContext, args: &Value) -> Result<String, ToolError> {
    let base = ctx
        .settings
        .searxng_url
        .as_ref()
        .ok_or("web search is not configured")?;
    search(base, text(args, "query")?, number(args, "limit", 5, 20) as usize).await
}

/// Whether an address is on the public internet.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_private()
                || v4.is_loopback()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || a == 0
                || (a == 100 && (64..128).contains(&b)) // carrier-grade NAT
                || (a == 198 && (b == 18 || b == 19)) // benchmarking
                || a >= 240)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00 // unique local
                || (first & 0xffc0) == 0xfe80) // link-local
        }
    }
}

fn allowlisted(settings: &ToolsConfig, host: &str, ip: IpAddr) -> bool {
    settings
        .fetch_allow_private
        .iter()
        .any(|allowed| allowed.eq_ignore_ascii_case(host) || allowed.parse::<IpAddr>().is_ok_and(|a| a == ip))
}

/// The one address to connect to, after checking every address the host has.
async fn checked_address(settings: &ToolsConfig, url: &Url) -> Result<SocketAddr, ToolError> {
    let host = url.host_str().ok_or("the URL has no host")?;
    let port = url.port_or_known_default().ok_or("the URL has no port")?;
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addresses: Vec<SocketAddr> = match bare.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::net::lookup_host((bare, port))
            .await
            .map_err(|e| format!("cannot resolve {host}: {e}"))?
            .collect(),
    };
    if addresses.is_empty() {
        return Err(fail!("{host} has no address"));
    }
    for address in &addresses {
        if !is_public(address.ip()) && !allowlisted(settings, bare, address.ip()) {
            return Err(fail!(
                "refused: {host} is at {}, a private, loopback or link-local address (allow it in tools.webFetch.allowPrivate)",
                address.ip()
            ));
        }
    }
    Ok(addresses[0])
}

pub async fn fetch(settings: &ToolsConfig, url: &str) -> Result<String, ToolError> {
    let mut url = Url::parse(url).map_err(|e| format!("not a URL: {e}"))?;
    for _ in 0..=MAX_REDIRECTS {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(fail!("refused: only http and https URLs, not {}", url.scheme()));
        }
        let address = checked_address(settings, &url).await?;
        let host = url.host_str().unwrap_or_default().to_string();
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(settings.fetch_timeout)
            .resolve(&host, address)
            .user_agent(concat!("onyx/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| e.to_string())?;
        let mut response = client
            .get(url.clone())
            .send()
            .await
            .map_err(|e| format!("fetch failed: {e}"))?;
        if response.status().is_redirection() {
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .ok_or("a redirect without a Location")?;
            url = url.join(location).map_err(|e| format!("bad redirect: {e}"))?;
            continue;
        }
        let status = response.status();
        let is_html = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("html"));
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| format!("fetch failed: {e}"))? {
            body.extend_from_slice(&chunk);
            if body.len() > settings.fetch_max_bytes {
                body.truncate(settings.fetch_max_bytes);
                break;
            }
        }
        let mut readable = if is_html {
            html2text::from_read(body.as_slice(), 100)
                .unwrap_or_else(|_| String::from_utf8_lossy(&body).into_owned())
        } else {
            String::from_utf8_lossy(&body).into_owned()
        };
        if readable.chars().count() > MAX_TEXT_CHARS {
            readable = readable.chars().take(MAX_TEXT_CHARS).collect::<String>() + "\n[… truncated]";
        }
        return Ok(format!("{} {url}\n\n{readable}", status.as_u16()));
    }
    Err(fail!("more than {MAX_REDIRECTS} redirects"))
}

async fn search(base: &Url, query: &str, limit: usize) -> Result<String, ToolError> {
    let url = base.join("search").map_err(|e| e.to_string())?;
    let response = reqwest::Client::new()
        .get(url)
        .query(&[("q", query), ("format", "json")])
        .timeout(std::time::Duration::from_secs(15))
        .send()
        .await
        .map_err(|e| format!("search failed: {e}"))?;
    if !response.status().is_success() {
        return Err(fail!("search failed: SearXNG answered {}", response.status()));
    }
    let body: Value = response.json().await.map_err(|e| format!("search failed: {e}"))?;
    let results: Vec<String> = body["results"]
        .as_array()
        .map(|r| r.as_slice())
        .unwrap_or_default()
        .iter()
        .take(limit)
        .map(|r| {
            format!(
                "- {} <{}>\n  {}",
                r["title"].as_str().unwrap_or_default(),
                r["url"].as_str().unwrap_or_default(),
                r["content"].as_str().unwrap_or_default()
            )
        })
        .collect();
    Ok(if results.is_empty() {
        format!("no results for {query:?}")
    } else {
        results.join("\n")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_addresses_are_not_public() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in ["1.1.1.1", "93.184.216.34", "2606:4700:4700::1111"] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
    }
}
