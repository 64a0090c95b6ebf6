//! The HTTP transport of the proxied hot path: for plain `http://`
//! upstreams our own HTTP/1.1 client (`http1`), whose I/O runs in the
//! calling task; for the rest hyper's pooled client over rustls, with nothing
//! between the call and the connection. reqwest wraps
//! every call in a retry layer, a redirect follower and a boxed service, and
//! parses the URL again (with IDNA) on every response; profiling put that at
//! ~5% of the gateway's CPU at saturation. When the environment names a
//! proxy (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`), calls go through reqwest
//! instead, which honours it and `NO_PROXY`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use super::{ProviderError, http1};
use crate::config::ProviderConfig;
use crate::error_chain::root_cause;

type Direct = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

pub(crate) enum Transport {
    /// Plain `http://` by our HTTP/1.1 client, a pool per host; the rest by
    /// hyper's pooled client, TLS by rustls with the platform's trust store.
    Direct(Box<Direct>, Plain),
    /// reqwest: a proxy is configured, or the TLS setup failed.
    Reqwest(reqwest::Client),
}

/// Where a call goes: the same URL in both transports' types, parsed once,
/// and for a plain `http://` URL its `host:port`.
#[derive(Clone)]
pub(crate) struct Target {
    pub uri: http::Uri,
    pub url: reqwest::Url,
    plain: Option<String>,
}

impl Target {
    pub(crate) fn new(url: reqwest::Url) -> Result<Self, String> {
        let uri = url.as_str().parse::<http::Uri>().map_err(|err| err.to_string())?;
        let plain = match (uri.scheme_str(), url.host_str(), url.port_or_known_default()) {
            (Some("http"), Some(host), Some(port)) => Some(format!("{host}:{port}")),
            _ => None,
        };
        Ok(Self { uri, url, plain })
    }
}

/// The answer's status and whole body.
pub(crate) struct Answer {
    pub status: http::StatusCode,
    pub body: Bytes,
}

impl Transport {
    /// The direct transport, unless a proxy is configured; `fallback` is the
    /// provider's reqwest client (same timeouts), used then.
    pub(crate) fn new(config: &ProviderConfig, fallback: &reqwest::Client) -> Self {
        if proxy_in_environment() {
            return Self::Reqwest(fallback.clone());
        }
        match direct(config) {
            Ok(client) => Self::Direct(Box::new(client), Plain::new(config.connect_timeout)),
            Err(err) => {
                tracing::warn!(provider = %config.name, error = %err, "TLS setup for the direct transport failed; using reqwest");
                Self::Reqwest(fallback.clone())
            }
        }
    }

    /// POSTs `body` with `headers`; the caller bounds the time.
    pub(crate) async fn post(
        &self,
        target: &Target,
        headers: &http::HeaderMap,
        body: Vec<u8>,
        provider: &str,
        timeout: Duration,
    ) -> Result<Answer, ProviderError> {
        match self {
            Self::Direct(_, plain) if target.plain.is_some() => {
                let pool = plain.pool(target.plain.as_deref().unwrap_or_default());
                let path = target.uri.path_and_query().map_or("/", |p| p.as_str());
                match pool.post(path, headers, &body).await {
                    Ok(answer) => Ok(Answer {
                        status: answer.status,
                        body: answer.body,
                    }),
                    Err(http1::Failure::Connect(detail)) => Err(ProviderError::Connect {
                        provider: provider.into(),
                        detail,
                    }),
                    Err(http1::Failure::Body(detail)) => Err(ProviderError::bad_response(provider, detail)),
                }
            }
            Self::Direct(client, _) => {
                let mut request = http::Request::new(Full::new(Bytes::from(body)));
                *request.method_mut() = http::Method::POST;
                *request.uri_mut() = target.uri.clone();
                *request.headers_mut() = headers.clone();
                let response = client
                    .request(request)
                    .await
                    .map_err(|err| ProviderError::Connect {
                        provider: provider.into(),
                        detail: root_cause(&err),
                    })?;
                let status = response.status();
                let body = response
                    .into_body()
                    .collect()
                    .await
                    .map_err(|err| ProviderError::bad_response(provider, root_cause(&err)))?
                    .to_bytes();
                Ok(Answer { status, body })
            }
            Self::Reqwest(client) => {
                let map = |err| ProviderError::from_reqwest(provider, err, timeout);
                let response = client
                    .post(target.url.clone())
                    .headers(headers.clone())
                    .body(body)
                    .send()
                    .await
                    .map_err(map)?;
                let status = response.status();
                let body = response.bytes().await.map_err(map)?;
                Ok(Answer { status, body })
            }
        }
    }
}

/// The pools of plain-http connections, one per `host:port` (a provider
/// has one or two; found by a short scan).
pub(crate) struct Plain {
    connect_timeout: Duration,
    pools: std::sync::Mutex<Vec<Arc<http1::Pool>>>,
}

impl Plain {
    fn new(connect_timeout: Duration) -> Self {
        Self {
            connect_timeout,
            pools: std::sync::Mutex::new(Vec::new()),
        }
    }

    fn pool(&self, authority: &str) -> Arc<http1::Pool> {
        let mut pools = self.pools.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(pool) = pools.iter().find(|p| p.authority() == authority) {
            return pool.clone();
        }
        let pool = Arc::new(http1::Pool::new(authority, self.connect_timeout));
        pools.push(pool.clone());
        pool
    }
}

fn direct(config: &ProviderConfig) -> Result<Direct, String> {
    let crypto = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let verifier = rustls_platform_verifier::Verifier::new(crypto.clone()).map_err(|err| err.to_string())?;
    let tls = rustls::ClientConfig::builder_with_provider(crypto)
        .with_safe_default_protocol_versions()
        .map_err(|err| err.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(config.connect_timeout));
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(http);
    Ok(Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .pool_timer(TokioTimer::new())
        .build(https))
}

/// Whether the environment names a proxy reqwest would use.
fn proxy_in_environment() -> bool {
    [
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
    ]
    .iter()
    .any(|name| std::env::var_os(name).is_some_and(|value| !value.is_empty()))
}
