//! The one upstream HTTP stack: each provider's reqwest client (hyper
//! underneath), built here with the provider's connect timeout, `TCP_NODELAY`,
//! idle connections kept 90 s, no redirects followed (an upstream that
//! redirects is misconfigured, and a redirect must not carry the API key
//! elsewhere) and the proxies the environment names (`HTTPS_PROXY`,
//! `HTTP_PROXY`, `ALL_PROXY`, `NO_PROXY`, as reqwest reads them).
//! async-openai, Anthropic and Gemini use the client; the JSON calls of the
//! proxied hot path go through [`Transport::post_json`] with their URL and
//! headers prepared once ([`Endpoint`]).
//!
//! Ollama's client is built here too, but it is its own: ollama-rs 0.3.6
//! (the latest) is written against reqwest 0.12, so it cannot share the 0.13
//! client. The AWS SDK (Bedrock) keeps its own stack.

use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;

use super::ProviderError;
use crate::config::ProviderConfig;
use crate::error_chain::root_cause;

/// Idle upstream connections are closed after this long.
const IDLE_FOR: Duration = Duration::from_secs(90);

/// The client settings above, on a reqwest `ClientBuilder` of either version
/// (0.13's for [`Transport`], 0.12's for Ollama), built.
macro_rules! client_for {
    ($reqwest:ident, $config:expr) => {
        $reqwest::Client::builder()
            .connect_timeout($config.connect_timeout)
            .tcp_nodelay(true)
            .pool_idle_timeout(IDLE_FOR)
            .redirect($reqwest::redirect::Policy::none())
            .build()
            .map_err(|err| ProviderError::Connect {
                provider: $config.name.clone(),
                detail: root_cause(&err),
            })
    };
}

/// A provider's HTTP client.
pub(crate) struct Transport {
    client: reqwest::Client,
    provider: String,
    timeout: Duration,
}

/// One endpoint, ready to call: its URL parsed and its headers built once,
/// cloned per call.
#[derive(Clone)]
pub(crate) struct Endpoint {
    pub url: reqwest::Url,
    pub headers: HeaderMap,
}

/// The answer's status and whole body.
pub(crate) struct UpstreamReply {
    pub status: http::StatusCode,
    pub body: Bytes,
}

impl Transport {
    pub(crate) fn new(config: &ProviderConfig) -> Result<Self, ProviderError> {
        Ok(Self {
            client: client_for!(reqwest, config)?,
            provider: config.name.clone(),
            timeout: config.timeout,
        })
    }

    /// The client, for the SDKs and protocols that build their own requests.
    pub(crate) fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// POSTs the JSON `body` to `endpoint` and reads the whole answer; the
    /// caller bounds the time.
    pub(crate) async fn post_json(
        &self,
        endpoint: &Endpoint,
        body: Vec<u8>,
    ) -> Result<UpstreamReply, ProviderError> {
        let map = |err| ProviderError::from_reqwest(&self.provider, err, self.timeout);
        let response = self
            .client
            .post(endpoint.url.clone())
            .headers(endpoint.headers.clone())
            .body(body)
            .send()
            .await
            .map_err(map)?;
        let status = response.status();
        let body = response.bytes().await.map_err(map)?;
        Ok(UpstreamReply { status, body })
    }
}

/// Ollama's client for `config`: ollama-rs with a reqwest 0.12 client set
/// up as [`Transport`] sets up its own.
pub(crate) fn ollama(config: &ProviderConfig) -> Result<ollama_rs::Ollama, ProviderError> {
    let invalid = |detail: String| {
        ProviderError::InvalidRequest(format!("providers.{}.baseUrl: {detail}", config.name))
    };
    // ollama-rs panics on a URL without a host; the config may hold one.
    if !config.base_url.has_host() {
        return Err(invalid(format!("{} has no host", config.base_url)));
    }
    Ok(ollama_rs::Ollama::builder()
        .url(config.base_url.clone())
        .reqwest_client(client_for!(reqwest_ollama, config)?)
        .build())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ProviderKind, detected_provider};

    #[test]
    fn an_ollama_url_without_a_host_is_refused_not_a_panic() {
        let url = url::Url::parse("unix:/run/ollama.sock").unwrap();
        let config = detected_provider("local", ProviderKind::Ollama, url, None);
        let Err(ProviderError::InvalidRequest(message)) = ollama(&config) else {
            panic!("expected a configuration error")
        };
        assert!(message.starts_with("providers.local.baseUrl:"), "{message}");
        let url = url::Url::parse("http://127.0.0.1:11434").unwrap();
        let config = detected_provider("local", ProviderKind::Ollama, url, None);
        assert_eq!(
            ollama(&config).map(|o| o.url_str().to_string()).ok().as_deref(),
            Some("http://127.0.0.1:11434/")
        );
    }
}
