//! Vertex AI credentials: a static OAuth2 access token (`apiKey`), or a
//! service account's JSON key exchanged for one: a JWT signed RS256 with ring
//! and posted to the key's `token_uri` (so tests can point it at a fake), the
//! token cached until a minute before it expires.

use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::json;

use crate::providers::ProviderError;

const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
const GOOGLE_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";
/// A token is renewed this long before Google says it expires.
const RENEW_EARLY: Duration = Duration::from_secs(60);

pub enum Credentials {
    Static(SecretString),
    ServiceAccount(Box<TokenSource>),
    /// The key file could not be read when the provider was built.
    Unreadable(String),
}

#[derive(Deserialize)]
struct KeyFile {
    client_email: String,
    private_key: String,
    token_uri: Option<String>,
}

pub struct TokenSource {
    provider: String,
    email: String,
    key: RsaKeyPair,
    token_uri: String,
    http: reqwest::Client,
    timeout: Duration,
    cached: tokio::sync::Mutex<Option<(SecretString, Instant)>>,
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    #[serde(default = "an_hour")]
    expires_in: u64,
}

fn an_hour() -> u64 {
    3600
}

impl Credentials {
    /// From a key file's text (`path` names it in errors; its content never appears).
    pub fn service_account(
        provider: &str,
        path: &str,
        text: &str,
        http: reqwest::Client,
        timeout: Duration,
    ) -> Result<Self, ProviderError> {
        let invalid = |detail: String| {
            ProviderError::InvalidRequest(format!("providers.{provider}.credentialsFile: {path}: {detail}"))
        };
        let key: KeyFile = serde_json::from_str(text)
            .map_err(|err| invalid(format!("not a service account key ({err})")))?;
        let der = pem_body(&key.private_key)
            .ok_or_else(|| invalid("private_key is not a PEM private key".into()))?;
        let pair = RsaKeyPair::from_pkcs8(&der)
            .map_err(|err| invalid(format!("private_key is not an RSA PKCS#8 key ({err})")))?;
        Ok(Self::ServiceAccount(Box::new(TokenSource {
            provider: provider.to_string(),
            email: key.client_email,
            key: pair,
            token_uri: key.token_uri.unwrap_or_else(|| GOOGLE_TOKEN_URI.into()),
            http,
            timeout,
            cached: tokio::sync::Mutex::new(None),
        })))
    }

    /// The bearer token for the next call.
    pub async fn bearer(&self, provider: &str) -> Result<SecretString, ProviderError> {
        match self {
            Self::Static(token) => Ok(token.clone()),
            Self::ServiceAccount(source) => source.token().await,
            Self::Unreadable(detail) => Err(ProviderError::Connect {
                provider: provider.to_string(),
                detail: detail.clone(),
            }),
        }
    }
}

fn pem_body(pem: &str) -> Option<Vec<u8>> {
    let body: String = pem
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("-----"))
        .collect();
    base64::engine::general_purpose::STANDARD.decode(body).ok()
}

impl TokenSource {
    async fn token(&self) -> Result<SecretString, ProviderError> {
        let mut cached = self.cached.lock().await;
        if let Some((token, until)) = cached.as_ref()
            && Instant::now() < *until
        {
            return Ok(token.clone());
        }
        let started = Instant::now();
        let answer = self.exchange().await?;
        let lifetime = Duration::from_secs(answer.expires_in).saturating_sub(RENEW_EARLY);
        let token = SecretString::from(answer.access_token);
        *cached = Some((token.clone(), started + lifetime));
        Ok(token)
    }

    /// The signed JWT assertion for the token endpoint.
    pub fn assertion(&self, now: u64) -> Result<String, ProviderError> {
        let header = URL_SAFE_NO_PAD.encode(json!({"alg": "RS256", "typ": "JWT"}).to_string());
        let claims = URL_SAFE_NO_PAD.encode(
            json!({"iss": self.email, "scope": SCOPE, "aud": self.token_uri, "iat": now, "exp": now + 3600})
                .to_string(),
        );
        let message = format!("{header}.{claims}");
        let mut signature = vec![0; self.key.public().modulus_len()];
        self.key
            .sign(
                &RSA_PKCS1_SHA256,
                &ring::rand::SystemRandom::new(),
                message.as_bytes(),
                &mut signature,
            )
            .map_err(|_| {
                ProviderError::InvalidRequest(format!("{}: could not sign the token request", self.provider))
            })?;
        Ok(format!("{message}.{}", URL_SAFE_NO_PAD.encode(signature)))
    }

    async fn exchange(&self) -> Result<TokenAnswer, ProviderError> {
        let now = crate::chat::unix_now();
        let body = format!(
            "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion={}",
            self.assertion(now)?
        );
        let request = self
            .http
            .post(&self.token_uri)
            .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(body)
            .send();
        let map = |err| ProviderError::from_reqwest(&self.provider, err, self.timeout);
        let response = crate::providers::within(&self.provider, self.timeout, request, map).await?;
        let status = response.status().as_u16();
        let bytes = response.bytes().await.map_err(map)?;
        if !(200..300).contains(&status) {
            let error: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
            let detail = error["error_description"]
                .as_str()
                .or(error["error"].as_str())
                .unwrap_or("no detail");
            return Err(ProviderError::Upstream {
                provider: self.provider.clone(),
                // A refused key is the gateway's credentials, not the client's request.
                status: if status >= 500 { status } else { 401 },
                message: format!("the service account's token request was refused ({status}: {detail})"),
                kind: Some("authentication_error".into()),
                code: None,
                param: None,
            });
        }
        serde_json::from_slice(&bytes).map_err(|err| ProviderError::BadResponse {
            provider: self.provider.clone(),
            detail: format!("token endpoint: {err}"),
        })
    }
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Static(token) => write!(f, "Static({} chars)", token.expose_secret().len()),
            Self::ServiceAccount(source) => write!(f, "ServiceAccount({})", source.email),
            Self::Unreadable(detail) => write!(f, "Unreadable({detail})"),
        }
    }
}
