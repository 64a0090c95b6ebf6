//! OpenAI's JSON endpoints (`/chat/completions`, `/embeddings`) called
//! over the provider's [`Transport`], with each endpoint's URL and headers
//! prepared once per provider: async-openai formats and parses the URL and
//! rebuilds its headers on every call, which profiling put at ~10% of the
//! gateway's CPU at saturation. Streams and the Responses API go through
//! async-openai (on the same client).

use std::time::Duration;

use async_openai::config::Config;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::ProviderError;
use super::transport::{Endpoint, Transport, UpstreamReply};

/// The endpoint `path` (`/chat/completions`) under `config`'s base, with its
/// query and headers (secrets marked sensitive, so they are never logged).
pub(super) fn endpoint(config: &dyn Config, path: &str, provider: &str) -> Result<Endpoint, ProviderError> {
    let url = config.url(path);
    let query = config.query();
    let parsed = if query.is_empty() {
        reqwest::Url::parse(&url)
    } else {
        reqwest::Url::parse_with_params(&url, query)
    };
    let url = parsed
        .map_err(|err| ProviderError::InvalidRequest(format!("providers.{provider}.baseUrl: {err}")))?;
    let mut headers = config.headers();
    for secret in [
        http::header::AUTHORIZATION,
        http::HeaderName::from_static("api-key"),
    ] {
        if let Some(value) = headers.get_mut(&secret) {
            value.set_sensitive(true);
        }
    }
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(Endpoint { url, headers })
}

/// The part of a provider that sends JSON and reads JSON back.
pub(super) struct Wire<'a> {
    pub transport: &'a Transport,
    pub provider: &'a str,
    pub timeout: Duration,
}

impl Wire<'_> {
    /// POSTs the JSON `body` to `endpoint` and parses the answer, mapping
    /// failures the way OpenAI reports them (`{"error": {...}}`).
    pub(super) async fn post(
        &self,
        endpoint: &Endpoint,
        body: Result<Vec<u8>, serde_json::Error>,
    ) -> Result<Value, ProviderError> {
        let bytes = self.post_for_bytes(endpoint, body).await?;
        serde_json::from_slice(&bytes).map_err(|err| ProviderError::bad_response(self.provider, err))
    }

    /// Like [`post`](Self::post), with a successful answer's bytes as they came.
    pub(super) async fn post_for_bytes(
        &self,
        endpoint: &Endpoint,
        body: Result<Vec<u8>, serde_json::Error>,
    ) -> Result<Bytes, ProviderError> {
        let body = body.map_err(|err| {
            ProviderError::InvalidRequest(format!("the request could not be encoded: {err}"))
        })?;
        let exchange = self.transport.post_json(endpoint, body);
        let UpstreamReply { status, body: bytes } =
            super::within(self.provider, self.timeout, exchange, |err| err).await?;
        if !status.is_success() {
            return Err(upstream_error(self.provider, status.as_u16(), &bytes));
        }
        Ok(bytes)
    }
}

/// OpenAI's error body.
#[derive(Deserialize)]
struct WrappedError {
    error: ApiError,
}

#[derive(Deserialize)]
struct ApiError {
    message: String,
    #[serde(rename = "type")]
    kind: Option<String>,
    param: Option<String>,
    /// A string at OpenAI; some compatible servers send a number.
    code: Option<Value>,
}

/// An error an upstream sent inside its stream, as a chunk of its own
/// (`{"error": {"message", "code"…}}`, as OpenRouter and vLLM do): the
/// stream ends with it. Its `code`, when it is an HTTP status, is the status.
pub(super) fn stream_error(provider: &str, error: &Map<String, Value>) -> ProviderError {
    let text = |key: &str| match error.get(key) {
        Some(Value::String(text)) => Some(text.clone()),
        Some(Value::Null) | None => None,
        Some(other) => Some(other.to_string()),
    };
    let status = error
        .get("code")
        .and_then(|code| code.as_u64().or_else(|| code.as_str()?.parse().ok()))
        .and_then(|code| u16::try_from(code).ok())
        .filter(|code| (400..600).contains(code))
        .unwrap_or(500);
    ProviderError::Upstream {
        provider: provider.into(),
        status,
        message: text("message").unwrap_or_else(|| "the upstream failed mid-stream".into()),
        kind: text("type"),
        code: text("code"),
        param: text("param"),
    }
}

/// An upstream's failure. A 5xx body may be an HTML page or carry upstream
/// internals, so only a JSON error's message is shown for those.
fn upstream_error(provider: &str, status: u16, body: &[u8]) -> ProviderError {
    let parsed = serde_json::from_slice::<WrappedError>(body).ok();
    if status >= 500 {
        return ProviderError::Upstream {
            provider: provider.into(),
            status,
            message: parsed
                .map(|wrapped| wrapped.error.message)
                .unwrap_or_else(|| format!("the upstream failed with HTTP {status}")),
            kind: None,
            code: None,
            param: None,
        };
    }
    match parsed {
        Some(WrappedError { error }) => ProviderError::Upstream {
            provider: provider.into(),
            status,
            message: error.message,
            kind: error.kind,
            code: error.code.and_then(|code| match code {
                Value::String(code) => Some(code),
                Value::Null => None,
                other => Some(other.to_string()),
            }),
            param: error.param,
        },
        None => ProviderError::bad_response(
            provider,
            format!(
                "HTTP {status} without an OpenAI error body: {}",
                crate::text::one_line(&String::from_utf8_lossy(body), 200)
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_keep_the_upstreams_fields_and_hide_5xx_pages() {
        let body =
            br#"{"error":{"message":"bad model","type":"invalid_request_error","param":"model","code":404}}"#;
        let ProviderError::Upstream {
            status,
            message,
            kind,
            code,
            param,
            ..
        } = upstream_error("p", 404, body)
        else {
            panic!("expected an upstream error")
        };
        assert_eq!((status, message.as_str()), (404, "bad model"));
        assert_eq!(kind.as_deref(), Some("invalid_request_error"));
        assert_eq!((code.as_deref(), param.as_deref()), (Some("404"), Some("model")));

        let ProviderError::Upstream { message, .. } = upstream_error("p", 502, b"<html>secret stack</html>")
        else {
            panic!("expected an upstream error")
        };
        assert_eq!(message, "the upstream failed with HTTP 502");
        assert!(matches!(
            upstream_error("p", 400, b"not json"),
            ProviderError::BadResponse { .. }
        ));
    }

    #[test]
    fn errors_inside_a_stream_keep_their_words_and_status() {
        let error = serde_json::json!({"message": "Provider overloaded", "code": 502, "type": null});
        let ProviderError::Upstream {
            status,
            message,
            code,
            kind,
            ..
        } = stream_error("p", error.as_object().unwrap())
        else {
            panic!("expected an upstream error")
        };
        assert_eq!((status, message.as_str()), (502, "Provider overloaded"));
        assert_eq!((code.as_deref(), kind), (Some("502"), None));
        let odd = serde_json::json!({"code": "context_length_exceeded"});
        assert!(matches!(
            stream_error("p", odd.as_object().unwrap()),
            ProviderError::Upstream { status: 500, .. }
        ));
    }

    #[test]
    fn endpoints_carry_the_query_and_a_json_content_type() {
        let config = async_openai::config::OpenAIConfig::new()
            .with_api_base("http://127.0.0.1:9/v1")
            .with_api_key("k");
        let endpoint = endpoint(&config, "/chat/completions", "p").unwrap();
        assert_eq!(endpoint.url.as_str(), "http://127.0.0.1:9/v1/chat/completions");
        assert!(endpoint.headers["authorization"].is_sensitive());
        assert_eq!(endpoint.headers["authorization"], "Bearer k");
        assert_eq!(endpoint.headers["content-type"], "application/json");
    }
}
