//! Azure OpenAI: OpenAI's wire format at
//! `{baseUrl}/openai/deployments/{deployment}/…?api-version=…` with an
//! `api-key` header. A model name is sent to its deployment
//! (`deployments`, by default the deployment of the same name); the rest is
//! [`super::openai_compat`], through an async-openai [`Config`] per deployment.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_openai::config::Config;
use http::{HeaderMap, HeaderName, HeaderValue};
use secrecy::{ExposeSecret, SecretString};

use super::ProviderError;
use crate::config::ProviderConfig;

/// Azure's current GA data-plane version, when the config names none.
pub const DEFAULT_API_VERSION: &str = "2024-10-21";

/// What every deployment of one resource shares.
struct Resource {
    /// The endpoint without a trailing `/`.
    base: String,
    api_version: String,
    api_key: SecretString,
    headers: HeaderMap,
}

/// The Azure resource's deployments, each reached through its own client.
pub struct Deployments {
    resource: Arc<Resource>,
    deployments: BTreeMap<String, String>,
}

/// One deployment's URLs (or, without one, the resource's own: `/openai/models`).
struct Deployment {
    resource: Arc<Resource>,
    deployment: Option<String>,
}

impl Config for Deployment {
    fn headers(&self) -> HeaderMap {
        self.resource.headers.clone()
    }

    fn url(&self, path: &str) -> String {
        match &self.deployment {
            Some(deployment) => format!("{}/openai/deployments/{deployment}{path}", self.resource.base),
            None => format!("{}/openai{path}", self.resource.base),
        }
    }

    fn query(&self) -> Vec<(&str, &str)> {
        vec![("api-version", self.resource.api_version.as_str())]
    }

    fn api_base(&self) -> &str {
        &self.resource.base
    }

    fn api_key(&self) -> &SecretString {
        &self.resource.api_key
    }
}

impl Deployments {
    pub fn new(config: &ProviderConfig) -> Result<Self, ProviderError> {
        let invalid = |field: &str, detail: String| {
            ProviderError::InvalidRequest(format!("providers.{}.{field}: {detail}", config.name))
        };
        let mut headers = HeaderMap::new();
        if let Some(key) = &config.api_key {
            let value = HeaderValue::from_str(key.expose_secret())
                .map_err(|err| invalid("apiKey", err.to_string()))?;
            headers.insert("api-key", value);
        }
        for (name, value) in &config.headers {
            let name =
                HeaderName::try_from(name.as_str()).map_err(|err| invalid("headers", err.to_string()))?;
            let value = HeaderValue::from_str(value.expose_secret())
                .map_err(|err| invalid("headers", err.to_string()))?;
            headers.insert(name, value);
        }
        Ok(Self {
            resource: Arc::new(Resource {
                base: config.base_url.as_str().trim_end_matches('/').to_string(),
                api_version: config
                    .api_version
                    .clone()
                    .unwrap_or_else(|| DEFAULT_API_VERSION.into()),
                api_key: config
                    .api_key
                    .clone()
                    .unwrap_or_else(|| SecretString::from(String::new())),
                headers,
            }),
            deployments: config.deployments.clone(),
        })
    }

    /// The deployment serving `model`.
    pub fn config_for(&self, model: &str) -> Result<Arc<dyn Config>, ProviderError> {
        let deployment = self.deployments.get(model).map_or(model, String::as_str);
        if !crate::config::is_deployment_name(deployment) {
            return Err(ProviderError::InvalidRequest(format!(
                "model: {model:?} is not an Azure deployment name (letters, digits, '-', '_', '.'); map it in the provider's deployments"
            )));
        }
        Ok(Arc::new(Deployment {
            resource: self.resource.clone(),
            deployment: Some(deployment.to_string()),
        }))
    }

    /// The resource itself (its model list).
    pub fn resource_config(&self) -> Arc<dyn Config> {
        Arc::new(Deployment {
            resource: self.resource.clone(),
            deployment: None,
        })
    }

    /// The model names configured to a deployment.
    pub fn models(&self) -> impl Iterator<Item = &String> {
        self.deployments.keys()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_go_to_their_deployment_with_the_api_version_and_key() {
        let text = r#"{providers: {az: {type: "azure", baseUrl: "https://res.openai.azure.com/", apiKey: "k1",
            headers: {"x-ms-client": "onyx"}, deployments: {"gpt-4o": "prod-4o"}}}}"#;
        let config = crate::config::parse(Some(text), None, &|_| None).unwrap();
        let deployments = Deployments::new(&config.providers["az"]).unwrap();
        let mapped = deployments.config_for("gpt-4o").unwrap();
        assert_eq!(
            mapped.url("/chat/completions"),
            "https://res.openai.azure.com/openai/deployments/prod-4o/chat/completions"
        );
        assert_eq!(mapped.query(), vec![("api-version", DEFAULT_API_VERSION)]);
        assert_eq!(mapped.headers()["api-key"], "k1");
        assert_eq!(mapped.headers()["x-ms-client"], "onyx");
        let same = deployments.config_for("gpt-4o-mini").unwrap();
        assert!(
            same.url("/embeddings")
                .ends_with("/openai/deployments/gpt-4o-mini/embeddings")
        );
        assert_eq!(
            deployments.resource_config().url("/models"),
            "https://res.openai.azure.com/openai/models"
        );
        let Err(ProviderError::InvalidRequest(message)) = deployments.config_for("a/../b") else {
            panic!("a model that is no deployment name")
        };
        assert!(message.starts_with("model: "), "{message}");
    }
}
