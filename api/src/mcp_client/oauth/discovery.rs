//! Finding a remote MCP server's authorization server, as the MCP
//! authorization spec (2025-06-18) describes: the server's 401 names its
//! Protected Resource Metadata (RFC 9728) in `WWW-Authenticate`, which names
//! the authorization server, whose own metadata (RFC 8414, or OpenID
//! Connect discovery) names its endpoints. Every endpoint must be https
//! (loopback excepted), the issuer must be the one the resource named, and
//! no redirect is followed.

use serde::Deserialize;
use url::Url;

use super::OAuthError;

/// What a protected MCP server's 401 said.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Challenge {
    /// `resource_metadata`: where its Protected Resource Metadata is.
    pub resource_metadata: Option<String>,
    /// `scope`: what it wants the token to carry.
    pub scope: Option<String>,
}

/// The authorization server's endpoints, checked.
#[derive(Debug, Clone)]
pub struct AuthServer {
    pub issuer: String,
    pub authorization_endpoint: Url,
    pub token_endpoint: Url,
    pub registration_endpoint: Option<Url>,
    /// The scopes to ask for (the challenge's, else the resource's), if any.
    pub scope: Option<String>,
}

#[derive(Deserialize)]
struct ResourceMetadata {
    resource: String,
    #[serde(default)]
    authorization_servers: Vec<String>,
    #[serde(default)]
    scopes_supported: Vec<String>,
}

#[derive(Deserialize)]
struct ServerMetadata {
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
    registration_endpoint: Option<String>,
    code_challenge_methods_supported: Option<Vec<String>>,
}

/// Reads a `WWW-Authenticate` value; `None` unless it is a Bearer challenge.
pub fn parse_challenge(header: &str) -> Option<Challenge> {
    let rest = header.trim();
    let (scheme, params) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let mut challenge = Challenge::default();
    let mut rest = params.trim();
    while !rest.is_empty() {
        let Some((key, after)) = rest.split_once('=') else {
            break;
        };
        let key = key.trim().trim_start_matches(',').trim().to_ascii_lowercase();
        let after = after.trim_start();
        let (value, remaining) = if let Some(quoted) = after.strip_prefix('"') {
            let end = quoted.find('"').unwrap_or(quoted.len());
            (&quoted[..end], quoted.get(end + 1..).unwrap_or(""))
        } else {
            let end = after.find(',').unwrap_or(after.len());
            (after[..end].trim(), &after[end..])
        };
        match key.as_str() {
            "resource_metadata" => challenge.resource_metadata = Some(value.to_string()),
            "scope" => challenge.scope = Some(value.to_string()),
            _ => {}
        }
        rest = remaining.trim_start().trim_start_matches(',').trim_start();
    }
    Some(challenge)
}

/// Whether `url` may carry OAuth traffic: https, or http to a loopback host.
pub fn check_secure(url: &Url, what: &str) -> Result<(), OAuthError> {
    let loopback = match url.host() {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    match url.scheme() {
        "https" => Ok(()),
        "http" if loopback => Ok(()),
        _ => Err(OAuthError::Refused(format!(
            "{what} {url} is not https (plain http is allowed only to loopback)"
        ))),
    }
}

fn parse_url(text: &str, what: &str) -> Result<Url, OAuthError> {
    let url = Url::parse(text)
        .map_err(|err| OAuthError::Refused(format!("{what} {text:?} is not a URL: {err}")))?;
    check_secure(&url, what)?;
    Ok(url)
}

/// The well-known Protected Resource Metadata address of `resource` (RFC 9728 §3.1).
fn default_resource_metadata(resource: &Url) -> Result<Url, OAuthError> {
    let path = resource.path().trim_end_matches('/');
    let mut url = resource.clone();
    url.set_path(&format!("/.well-known/oauth-protected-resource{path}"));
    url.set_query(None);
    url.set_fragment(None);
    Ok(url)
}

/// Where the authorization server `issuer` may publish its metadata, in order
/// (RFC 8414 §3, then OpenID Connect discovery both ways).
fn server_metadata_urls(issuer: &Url) -> Vec<Url> {
    let path = issuer.path().trim_end_matches('/');
    let at = |p: String| {
        let mut url = issuer.clone();
        url.set_path(&p);
        url.set_query(None);
        url
    };
    let mut urls = vec![
        at(format!("/.well-known/oauth-authorization-server{path}")),
        at(format!("/.well-known/openid-configuration{path}")),
    ];
    if !path.is_empty() {
        urls.push(at(format!("{path}/.well-known/openid-configuration")));
    }
    urls
}

async fn get_json<T: serde::de::DeserializeOwned>(
    http: &reqwest::Client,
    url: &Url,
    what: &str,
) -> Result<Option<T>, OAuthError> {
    let response = http
        .get(url.clone())
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|err| {
            OAuthError::Unreachable(format!("{what} {url}: {}", crate::error_chain::chain(&err)))
        })?;
    if response.status() == reqwest::StatusCode::NOT_FOUND {
        return Ok(None);
    }
    if !response.status().is_success() {
        return Err(OAuthError::Refused(format!(
            "{what} {url} answered {}",
            response.status()
        )));
    }
    response
        .json()
        .await
        .map(Some)
        .map_err(|err| OAuthError::Refused(format!("{what} {url} is not valid metadata: {err}")))
}

/// From the server's challenge (or the well-known address) to its authorization server.
pub async fn discover(
    http: &reqwest::Client,
    resource: &Url,
    challenge: &Challenge,
) -> Result<AuthServer, OAuthError> {
    let metadata_url = match &challenge.resource_metadata {
        Some(text) => parse_url(text, "the resource metadata address")?,
        None => default_resource_metadata(resource)?,
    };
    check_secure(&metadata_url, "the resource metadata address")?;
    let metadata: ResourceMetadata = get_json(http, &metadata_url, "the protected resource metadata")
        .await?
        .ok_or_else(|| {
            OAuthError::Refused(format!(
                "{resource} publishes no protected resource metadata ({metadata_url} was not found)"
            ))
        })?;
    if !same_resource(&metadata.resource, resource) {
        return Err(OAuthError::Refused(format!(
            "the protected resource metadata is for {:?}, not {resource}",
            metadata.resource
        )));
    }
    let issuer_text = metadata.authorization_servers.first().ok_or_else(|| {
        OAuthError::Refused("the protected resource metadata names no authorization server".into())
    })?;
    let issuer = parse_url(issuer_text, "the authorization server")?;
    let mut found = None;
    for url in server_metadata_urls(&issuer) {
        if let Some(server) =
            get_json::<ServerMetadata>(http, &url, "the authorization server metadata").await?
        {
            found = Some(server);
            break;
        }
    }
    let server = found.ok_or_else(|| {
        OAuthError::Refused(format!("the authorization server {issuer} publishes no metadata"))
    })?;
    if server.issuer.trim_end_matches('/') != issuer_text.trim_end_matches('/') {
        return Err(OAuthError::Refused(format!(
            "the authorization server metadata names issuer {:?}, not {issuer_text:?}",
            server.issuer
        )));
    }
    if let Some(methods) = &server.code_challenge_methods_supported
        && !methods.iter().any(|m| m == "S256")
    {
        return Err(OAuthError::Refused(
            "the authorization server does not offer PKCE with S256".into(),
        ));
    }
    let scope = challenge
        .scope
        .clone()
        .or_else(|| (!metadata.scopes_supported.is_empty()).then(|| metadata.scopes_supported.join(" ")));
    Ok(AuthServer {
        issuer: server.issuer,
        authorization_endpoint: parse_url(&server.authorization_endpoint, "the authorization endpoint")?,
        token_endpoint: parse_url(&server.token_endpoint, "the token endpoint")?,
        registration_endpoint: server
            .registration_endpoint
            .as_deref()
            .map(|text| parse_url(text, "the registration endpoint"))
            .transpose()?,
        scope,
    })
}

/// Whether the metadata's `resource` names the server Onyx talks to (same
/// origin, and the server's URL at or below its path).
fn same_resource(named: &str, resource: &Url) -> bool {
    let Ok(named) = Url::parse(named) else {
        return false;
    };
    named.origin() == resource.origin()
        && resource
            .path()
            .trim_end_matches('/')
            .starts_with(named.path().trim_end_matches('/'))
}

/// Asks the server (without a token) whether it wants one: its challenge if it answers 401.
pub async fn probe(
    http: &reqwest::Client,
    url: &Url,
    bearer: Option<&str>,
) -> Result<Option<Challenge>, OAuthError> {
    let initialize = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "onyx", "version": env!("CARGO_PKG_VERSION")}}});
    let mut request = http
        .post(url.clone())
        .header(reqwest::header::ACCEPT, "application/json, text/event-stream")
        .json(&initialize);
    if let Some(token) = bearer {
        request = request.bearer_auth(token);
    }
    let response = request
        .send()
        .await
        .map_err(|err| OAuthError::Unreachable(format!("{url}: {}", crate::error_chain::chain(&err))))?;
    if response.status() != reqwest::StatusCode::UNAUTHORIZED {
        return Ok(None);
    }
    Ok(Some(
        response
            .headers()
            .get_all(reqwest::header::WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(parse_challenge)
            .unwrap_or_default(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bearer_challenge_names_its_metadata_and_scope() {
        let c = parse_challenge(
            r#"Bearer error="invalid_token", resource_metadata="https://mcp.example/.well-known/oauth-protected-resource", scope="files:read files:write""#,
        )
        .unwrap();
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("https://mcp.example/.well-known/oauth-protected-resource")
        );
        assert_eq!(c.scope.as_deref(), Some("files:read files:write"));
        assert_eq!(parse_challenge("Basic realm=\"x\""), None);
        assert_eq!(parse_challenge("Bearer"), Some(Challenge::default()));
    }

    #[test]
    fn only_https_or_loopback_carries_oauth() {
        for ok in [
            "https://as.example/token",
            "http://127.0.0.1:9/t",
            "http://localhost/t",
            "http://[::1]:8/t",
        ] {
            assert!(check_secure(&Url::parse(ok).unwrap(), "x").is_ok(), "{ok}");
        }
        for bad in [
            "http://as.example/token",
            "http://10.0.0.1/t",
            "ftp://127.0.0.1/t",
            "http://127.0.0.1.evil.example/t",
        ] {
            assert!(check_secure(&Url::parse(bad).unwrap(), "x").is_err(), "{bad}");
        }
    }

    #[test]
    fn well_known_addresses_keep_the_path() {
        let prm = default_resource_metadata(&Url::parse("https://h.example/api/mcp").unwrap()).unwrap();
        assert_eq!(
            prm.as_str(),
            "https://h.example/.well-known/oauth-protected-resource/api/mcp"
        );
        let urls = server_metadata_urls(&Url::parse("https://as.example/tenant1").unwrap());
        assert_eq!(
            urls[0].as_str(),
            "https://as.example/.well-known/oauth-authorization-server/tenant1"
        );
        assert_eq!(
            urls[2].as_str(),
            "https://as.example/tenant1/.well-known/openid-configuration"
        );
        assert!(same_resource(
            "https://h.example/api/mcp",
            &Url::parse("https://h.example/api/mcp").unwrap()
        ));
        assert!(!same_resource(
            "https://evil.example/api/mcp",
            &Url::parse("https://h.example/api/mcp").unwrap()
        ));
    }
}
