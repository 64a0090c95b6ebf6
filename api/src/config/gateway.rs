//! `gateway`: where the gateway listens, who may call it (API keys, the UI
//! password), request limits, logging, shutdown, and the reverse proxy and
//! CORS settings it answers with (`proxy.rs`, `cors.rs`).

use std::net::SocketAddr;
use std::time::Duration;

use secrecy::SecretString;
use serde::Deserialize;

use super::ConfigError;
use super::fields::Env;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawGateway {
    pub listen: Option<String>,
    #[serde(default)]
    pub auth: RawAuth,
    pub max_body_bytes: Option<u64>,
    pub record_sessions: Option<bool>,
    pub log_format: Option<String>,
    pub shutdown_grace_seconds: Option<u64>,
    pub models_cache_seconds: Option<u64>,
    pub trusted_proxy: Option<super::proxy::RawTrustedProxy>,
    pub cors: Option<super::cors::RawCors>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawAuth {
    #[serde(default)]
    pub api_keys: Vec<String>,
    pub password_hash: Option<String>,
}

pub const DEFAULT_LISTEN: &str = "127.0.0.1:18790";
pub const DEFAULT_MAX_BODY_BYTES: usize = 20 * 1024 * 1024;

#[derive(Debug)]
pub struct GatewayConfig {
    pub listen: SocketAddr,
    pub api_keys: Vec<SecretString>,
    pub password_hash: Option<String>,
    pub max_body_bytes: usize,
    pub record_sessions: bool,
    pub log_format: LogFormat,
    pub shutdown_grace: Duration,
    pub models_cache_ttl: Duration,
    /// Where a client's address comes from behind a reverse proxy (`None`: the TCP peer).
    pub trusted_proxy: Option<super::proxy::TrustedProxy>,
    /// `gateway.cors`: the origins answered with CORS headers (`None`: off).
    pub cors: Option<super::cors::Cors>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Human,
    Json,
}

pub(super) fn gateway(raw: RawGateway, env: Env) -> Result<GatewayConfig, ConfigError> {
    let listen_text = raw.listen.as_deref().unwrap_or(DEFAULT_LISTEN);
    let listen: SocketAddr = listen_text.parse().map_err(|_| {
        ConfigError::invalid(
            "gateway.listen",
            format!("{listen_text:?} is not an address like 127.0.0.1:18790"),
        )
    })?;
    let mut api_keys = Vec::new();
    for (index, key) in raw.auth.api_keys.into_iter().enumerate() {
        if key.trim().is_empty() {
            continue;
        }
        if key.len() < 16 {
            let path = format!("gateway.auth.apiKeys[{index}]");
            return Err(ConfigError::invalid(
                path,
                "an API key must be at least 16 characters",
            ));
        }
        api_keys.push(SecretString::from(key));
    }
    // `$ONYX_PASSWORD_HASH` works on its own, as `$ONYX_API_KEY` does; the
    // config's value wins. Empty (an unset "${ONYX_PASSWORD_HASH:-}") means no UI password.
    let set = |hash: &String| !hash.trim().is_empty();
    let password_hash = raw
        .auth
        .password_hash
        .filter(set)
        .or_else(|| env("ONYX_PASSWORD_HASH").filter(set));
    if let Some(hash) = &password_hash
        && !hash.starts_with("$argon2id$")
    {
        return Err(ConfigError::invalid(
            "gateway.auth.passwordHash",
            "not an argon2id hash; make one with `onyx hash-password`",
        ));
    }
    let log_format = match raw.log_format.as_deref() {
        None | Some("human") => LogFormat::Human,
        Some("json") => LogFormat::Json,
        Some(other) => {
            return Err(ConfigError::invalid(
                "gateway.logFormat",
                format!("{other:?} is not \"human\" or \"json\""),
            ));
        }
    };
    let max_body_bytes = match raw.max_body_bytes {
        None => DEFAULT_MAX_BODY_BYTES,
        Some(0) => {
            return Err(ConfigError::invalid(
                "gateway.maxBodyBytes",
                "must be greater than 0",
            ));
        }
        Some(n) => {
            usize::try_from(n).map_err(|_| ConfigError::invalid("gateway.maxBodyBytes", "too large"))?
        }
    };
    Ok(GatewayConfig {
        listen,
        api_keys,
        password_hash,
        max_body_bytes,
        record_sessions: raw.record_sessions.unwrap_or(false),
        log_format,
        shutdown_grace: Duration::from_secs(raw.shutdown_grace_seconds.unwrap_or(30)),
        models_cache_ttl: Duration::from_secs(raw.models_cache_seconds.unwrap_or(300)),
        trusted_proxy: super::proxy::trusted_proxy(raw.trusted_proxy)?,
        cors: super::cors::cors(raw.cors)?,
    })
}
