//! The Bedrock Runtime SDK client for one provider, made at its first call
//! (loading the AWS chain is async): region from `region` or the chain
//! (`AWS_REGION`, the profile), endpoint from `baseUrl` or the region's,
//! credentials from the chain (environment, profile, SSO, web identity,
//! ECS/IMDS), or `apiKey` as a Bedrock API key sent as a bearer token (so
//! is `AWS_BEARER_TOKEN_BEDROCK`, which the SDK reads itself). The SDK's own
//! retries are off (the router retries) and so is its stalled-stream
//! guard (a model may think for longer than it allows).

use aws_config::BehaviorVersion;
use aws_config::retry::RetryConfig;
use aws_config::stalled_stream_protection::StalledStreamProtectionConfig;
use aws_config::timeout::TimeoutConfig;
use aws_sdk_bedrockruntime::Client;
use aws_sdk_bedrockruntime::config::{Region, Token};
use aws_smithy_runtime_api::client::auth::http::HTTP_BEARER_AUTH_SCHEME_ID;
use secrecy::{ExposeSecret, SecretString};

use crate::config::ProviderConfig;
use crate::providers::ProviderError;

pub struct Settings {
    provider: String,
    region: Option<String>,
    endpoint: Option<String>,
    api_key: Option<SecretString>,
    connect_timeout: std::time::Duration,
}

impl Settings {
    pub fn new(config: &ProviderConfig) -> Self {
        let bedrock = config.bedrock.as_ref();
        Self {
            provider: config.name.clone(),
            region: bedrock.and_then(|b| b.region.clone()),
            endpoint: bedrock
                .and_then(|b| b.endpoint.as_ref())
                .map(|url| url.as_str().trim_end_matches('/').to_string()),
            api_key: config.api_key.clone(),
            connect_timeout: config.connect_timeout,
        }
    }

    pub async fn client(&self) -> Result<Client, ProviderError> {
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .retry_config(RetryConfig::disabled())
            .stalled_stream_protection(StalledStreamProtectionConfig::disabled())
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(self.connect_timeout)
                    .build(),
            );
        if let Some(region) = &self.region {
            loader = loader.region(Region::new(region.clone()));
        }
        let shared = loader.load().await;
        if shared.region().is_none() {
            return Err(ProviderError::Upstream {
                provider: self.provider.clone(),
                status: 500,
                message: format!(
                    "no AWS region: set providers.{}.region or AWS_REGION",
                    self.provider
                ),
                kind: None,
                code: Some("aws_region".into()),
                param: None,
            });
        }
        let mut config = aws_sdk_bedrockruntime::config::Builder::from(&shared);
        if let Some(endpoint) = &self.endpoint {
            config = config.endpoint_url(endpoint);
        }
        if let Some(key) = &self.api_key {
            config = config
                .bearer_token(Token::new(key.expose_secret(), None))
                .auth_scheme_preference([HTTP_BEARER_AUTH_SCHEME_ID]);
        }
        Ok(Client::from_conf(config.build()))
    }
}
