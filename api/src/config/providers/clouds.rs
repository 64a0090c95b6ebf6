//! The settings only one cloud vendor's providers take: Azure's deployments,
//! Vertex AI's project, location and credentials, Bedrock's region. Each is
//! refused on a provider of another type.

use std::collections::BTreeMap;
use std::path::PathBuf;

use url::Url;

use super::{ProviderKind, RawProvider};
use crate::config::ConfigError;

/// A Vertex AI provider's project, region and credentials.
#[derive(Debug, Clone)]
pub struct VertexConfig {
    pub project: String,
    /// `us-central1`, …, or `global`.
    pub location: String,
    /// A service account's JSON key file; without one, `apiKey` is a static
    /// OAuth2 access token.
    pub credentials_file: Option<PathBuf>,
}

/// An AWS Bedrock provider's region and endpoint; credentials come from the
/// AWS chain (environment, profile, IMDS…) or `apiKey` (a Bedrock API key).
#[derive(Debug, Clone)]
pub struct BedrockConfig {
    /// `us-east-1`, …; without one, the AWS chain's (`AWS_REGION`, the profile).
    pub region: Option<String>,
    /// `baseUrl` when set: the endpoint instead of the region's.
    pub endpoint: Option<Url>,
}

/// Deployment names go into the URL path: Azure allows letters, digits, `-`, `_` and `.`.
pub fn is_deployment_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && name != "."
        && name != ".."
}

pub(super) fn check_deployments(
    deployments: &BTreeMap<String, String>,
    kind: ProviderKind,
    path: &str,
) -> Result<(), ConfigError> {
    if deployments.is_empty() {
        return Ok(());
    }
    if kind != ProviderKind::Azure {
        return Err(ConfigError::invalid(
            format!("{path}.deployments"),
            "only for type azure",
        ));
    }
    match deployments.iter().find(|(_, d)| !is_deployment_name(d)) {
        Some((model, deployment)) => Err(ConfigError::invalid(
            format!("{path}.deployments.{model}"),
            format!("{deployment:?} is not a deployment name (letters, digits, '-', '_', '.')"),
        )),
        None => Ok(()),
    }
}

pub(super) fn vertex_config(
    raw: &RawProvider,
    kind: ProviderKind,
    path: &str,
) -> Result<Option<VertexConfig>, ConfigError> {
    if kind != ProviderKind::Vertex {
        for (key, set) in [
            ("project", raw.project.is_some()),
            ("location", raw.location.is_some()),
            ("credentialsFile", raw.credentials_file.is_some()),
        ] {
            if set {
                return Err(ConfigError::invalid(
                    format!("{path}.{key}"),
                    "only for type vertex",
                ));
            }
        }
        return Ok(None);
    }
    let Some(project) = raw.project.clone().filter(|p| !p.is_empty()) else {
        return Err(ConfigError::invalid(
            format!("{path}.project"),
            "required for vertex: the Google Cloud project id",
        ));
    };
    let location = raw.location.clone().unwrap_or_else(|| "us-central1".into());
    for (key, value) in [("project", &project), ("location", &location)] {
        if value.is_empty() || !value.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
            return Err(ConfigError::invalid(
                format!("{path}.{key}"),
                format!("{value:?} is not a Google Cloud {key} (letters, digits, '-')"),
            ));
        }
    }
    let credentials_file = raw
        .credentials_file
        .as_deref()
        .filter(|f| !f.is_empty())
        .map(PathBuf::from);
    if credentials_file.is_none() && raw.api_key.as_deref().is_none_or(str::is_empty) {
        return Err(ConfigError::invalid(
            format!("{path}.credentialsFile"),
            "vertex needs a service account's JSON key file (or an OAuth2 access token as apiKey)",
        ));
    }
    Ok(Some(VertexConfig {
        project,
        location,
        credentials_file,
    }))
}

/// Bedrock's region (letters, digits and `-`: it goes into the host name).
pub(super) fn bedrock_config(
    raw: &RawProvider,
    kind: ProviderKind,
    path: &str,
) -> Result<Option<BedrockConfig>, ConfigError> {
    let region = raw.region.clone().filter(|r| !r.is_empty());
    if kind != ProviderKind::Bedrock {
        return match region {
            Some(_) => Err(ConfigError::invalid(
                format!("{path}.region"),
                "only for type bedrock",
            )),
            None => Ok(None),
        };
    }
    if let Some(region) = &region
        && !region
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err(ConfigError::invalid(
            format!("{path}.region"),
            format!("{region:?} is not an AWS region (like \"us-east-1\")"),
        ));
    }
    Ok(Some(BedrockConfig {
        region,
        endpoint: None,
    }))
}
