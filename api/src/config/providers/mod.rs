//! `providers`: the upstreams models are served from, as written in the file
//! or posted to `POST /v1/providers` ([`ProviderSpec`](super::ProviderSpec)),
//! checked into [`ProviderConfig`]. The cloud vendors' own settings (Azure
//! deployments, Vertex, Bedrock) are in `clouds`; the providers found in the
//! environment without any config are in `detected`.

mod clouds;
mod detected;

use std::collections::BTreeMap;
use std::time::Duration;

use secrecy::SecretString;
use serde::{Deserialize, Serialize};
use url::Url;

use super::ConfigError;
use super::fields::{check_name, parse_url};

pub use clouds::{BedrockConfig, VertexConfig, is_deployment_name};
use clouds::{bedrock_config, check_deployments, vertex_config};
pub(super) use detected::add_env_providers;
pub use detected::{detected_provider, ollama_url};

/// One provider as written in the config file, and as `POST /v1/providers` takes it.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawProvider {
    #[serde(rename = "type")]
    pub kind: String,
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    pub timeout_seconds: Option<u64>,
    pub connect_timeout_seconds: Option<u64>,
    pub max_retries: Option<u32>,
    #[serde(default)]
    pub models: Vec<String>,
    pub api_version: Option<String>,
    /// Azure: model name → deployment name.
    #[serde(default)]
    pub deployments: BTreeMap<String, String>,
    /// Vertex: the Google Cloud project, region and service-account key file.
    pub project: Option<String>,
    pub location: Option<String>,
    pub credentials_file: Option<String>,
    /// Bedrock: the AWS region.
    pub region: Option<String>,
    /// The context window of this provider's models, where the shipped table
    /// does not know them.
    pub context_window: Option<u32>,
    /// Whether agent runs send OpenAI's `prompt_cache_key` (servers that
    /// reject unknown fields need `false`).
    pub prompt_cache_key: Option<bool>,
    /// Whether `/v1/responses` goes to this provider's own Responses API.
    pub responses: Option<bool>,
    /// `false`, `true` (the defaults) or the breaker's settings.
    pub circuit_breaker: Option<RawCircuitBreaker>,
    /// The vendor CLI a subscription provider runs.
    pub command: Option<String>,
}

/// `circuitBreaker`: on or off, or its settings.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
pub enum RawCircuitBreaker {
    Enabled(bool),
    Settings(RawBreakerSettings),
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawBreakerSettings {
    pub failures: Option<u32>,
    pub cool_seconds: Option<u64>,
    pub max_cool_seconds: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    /// Any server speaking OpenAI's chat completions API.
    OpenAi,
    Anthropic,
    Ollama,
    /// OpenAI models deployed on Azure (deployments, `api-version`, `api-key`).
    Azure,
    /// Google AI Studio's Gemini API (`generateContent`, `x-goog-api-key`).
    Gemini,
    /// Gemini on Google Cloud Vertex AI (project, location, OAuth2 bearer).
    Vertex,
    /// AWS Bedrock's Converse API (SigV4 from the AWS credential chain, or a Bedrock API key).
    Bedrock,
    /// Claude Pro/Max through the Claude Code CLI (`providers::subscription`).
    ClaudeSubscription,
    /// ChatGPT Plus/Pro through the Codex CLI (`providers::subscription`).
    Codex,
    /// A GitHub Copilot subscription through the Copilot CLI (`providers::subscription`).
    Copilot,
}

impl ProviderKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::Anthropic => "anthropic",
            Self::Ollama => "ollama",
            Self::Azure => "azure",
            Self::Gemini => "gemini",
            Self::Vertex => "vertex",
            Self::Bedrock => "bedrock",
            Self::ClaudeSubscription => "claude-subscription",
            Self::Codex => "codex",
            Self::Copilot => "copilot",
        }
    }
}

#[derive(Debug)]
pub struct ProviderConfig {
    pub name: String,
    pub kind: ProviderKind,
    pub base_url: Url,
    pub api_key: Option<SecretString>,
    /// Extra headers sent with every upstream request (values may be secrets).
    pub headers: Vec<(String, SecretString)>,
    /// Whole-request limit for non-streaming calls; time to first byte for streams.
    pub timeout: Duration,
    pub connect_timeout: Duration,
    /// Retries on 429/5xx/connect errors/timeouts before the next fallback.
    pub max_retries: u32,
    /// Models listed when the upstream cannot be asked (or in addition to it).
    pub models: Vec<String>,
    /// Anthropic's `anthropic-version` header; Azure's `api-version` query.
    pub api_version: Option<String>,
    /// Azure: the deployment serving each model name (default: the same name).
    pub deployments: BTreeMap<String, String>,
    /// Vertex: where the models run.
    pub vertex: Option<VertexConfig>,
    /// Bedrock: the region and endpoint.
    pub bedrock: Option<BedrockConfig>,
    /// The context window of its models where the shipped table has none.
    pub context_window: Option<u32>,
    /// Send `prompt_cache_key` upstream (OpenAI-compatible providers).
    pub prompt_cache_key: bool,
    /// `/v1/responses` is passed through to the provider's own Responses API
    /// (OpenAI-compatible providers only).
    pub responses: bool,
    /// Whether this provider was added from the environment rather than the file.
    pub detected: bool,
    /// None when `circuitBreaker: false`.
    pub circuit_breaker: Option<CircuitBreakerConfig>,
    /// The vendor CLI a subscription provider drives (default: its name on `PATH`).
    pub command: Option<String>,
}

/// When a provider's circuit opens, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CircuitBreakerConfig {
    /// Consecutive transient failures that open it.
    pub failures: u32,
    /// The first cooling period; it doubles after each failed probe…
    pub cool: Duration,
    /// …up to this.
    pub max_cool: Duration,
}

impl Default for CircuitBreakerConfig {
    fn default() -> Self {
        Self {
            failures: 5,
            cool: Duration::from_secs(30),
            max_cool: Duration::from_secs(300),
        }
    }
}

/// A provider `type` (the embedder's `type` takes the same names).
pub(super) fn provider_kind(text: &str, path: &str) -> Result<ProviderKind, ConfigError> {
    match text {
        "openai" | "openai-compatible" => Ok(ProviderKind::OpenAi),
        "anthropic" => Ok(ProviderKind::Anthropic),
        "ollama" => Ok(ProviderKind::Ollama),
        "azure" => Ok(ProviderKind::Azure),
        "gemini" => Ok(ProviderKind::Gemini),
        "vertex" => Ok(ProviderKind::Vertex),
        "bedrock" => Ok(ProviderKind::Bedrock),
        "claude-subscription" => Ok(ProviderKind::ClaudeSubscription),
        "codex" | "chatgpt" => Ok(ProviderKind::Codex),
        "copilot" => Ok(ProviderKind::Copilot),
        other => Err(ConfigError::invalid(
            format!("{path}.type"),
            format!(
                "unknown provider type {other:?}; expected \"openai\", \"anthropic\", \"ollama\", \"azure\", \"gemini\", \"vertex\", \"bedrock\", \"claude-subscription\", \"codex\" or \"copilot\""
            ),
        )),
    }
}

fn default_base_url(name: &str, kind: ProviderKind) -> &'static str {
    match (name, kind) {
        ("openrouter", _) => "https://openrouter.ai/api/v1",
        ("groq", _) => "https://api.groq.com/openai/v1",
        ("together", _) => "https://api.together.xyz/v1",
        (_, ProviderKind::OpenAi | ProviderKind::Codex) => "https://api.openai.com/v1",
        (_, ProviderKind::Anthropic | ProviderKind::ClaudeSubscription) => "https://api.anthropic.com",
        (_, ProviderKind::Ollama) => "http://127.0.0.1:11434",
        // Means "the signed-in GitHub account"; any other is a BYOK upstream.
        (_, ProviderKind::Copilot) => "https://api.githubcopilot.com",
        (_, ProviderKind::Gemini) => "https://generativelanguage.googleapis.com",
        // Without a region the AWS chain's is used, found at the first call.
        (_, ProviderKind::Bedrock) => "https://bedrock-runtime.amazonaws.com",
        // Checked before: an Azure resource has no default; Vertex's depends on the location.
        (_, ProviderKind::Azure | ProviderKind::Vertex) => "",
    }
}

/// A provider added through the API, checked as the config file's would be;
/// errors name the field (`baseUrl`, `apiKey`, …) or `name`.
pub fn provider_from_spec(name: &str, spec: RawProvider) -> Result<ProviderConfig, ConfigError> {
    check_name(name, "name")?;
    provider_config(name.to_string(), spec, "").map_err(|err| match err {
        ConfigError::Invalid { path, message } => ConfigError::Invalid {
            path: path.trim_start_matches('.').to_string(),
            message,
        },
        other => other,
    })
}

pub(super) fn provider_config(
    name: String,
    raw: RawProvider,
    path: &str,
) -> Result<ProviderConfig, ConfigError> {
    let kind = provider_kind(&raw.kind, path)?;
    if kind == ProviderKind::Azure && raw.base_url.is_none() {
        return Err(ConfigError::invalid(
            format!("{path}.baseUrl"),
            "required for azure: the resource endpoint (https://<resource>.openai.azure.com)",
        ));
    }
    check_deployments(&raw.deployments, kind, path)?;
    let vertex = vertex_config(&raw, kind, path)?;
    let vertex_base = vertex.as_ref().map(|v| match v.location.as_str() {
        "global" => "https://aiplatform.googleapis.com".to_string(),
        location => format!("https://{location}-aiplatform.googleapis.com"),
    });
    let bedrock = bedrock_config(&raw, kind, path)?;
    let bedrock_base = bedrock
        .as_ref()
        .and_then(|b| b.region.as_ref())
        .map(|region| format!("https://bedrock-runtime.{region}.amazonaws.com"));
    let base_text = raw
        .base_url
        .as_deref()
        .or(vertex_base.as_deref())
        .or(bedrock_base.as_deref())
        .unwrap_or(default_base_url(&name, kind));
    let base_url = parse_url(base_text, &format!("{path}.baseUrl"))?;
    let bedrock = bedrock.map(|b| BedrockConfig {
        endpoint: raw.base_url.is_some().then(|| base_url.clone()),
        ..b
    });
    let timeout = raw.timeout_seconds.unwrap_or(600);
    if timeout == 0 {
        return Err(ConfigError::invalid(
            format!("{path}.timeoutSeconds"),
            "must be greater than 0",
        ));
    }
    if kind == ProviderKind::Bedrock && !raw.headers.is_empty() {
        return Err(ConfigError::invalid(
            format!("{path}.headers"),
            "not for type bedrock (its requests are signed; extra headers are not sent)",
        ));
    }
    for header in raw.headers.keys() {
        if http::HeaderName::try_from(header.as_str()).is_err() {
            return Err(ConfigError::invalid(
                format!("{path}.headers"),
                format!("{header:?} is not a header name"),
            ));
        }
    }
    if let Some(key) = &raw.api_key
        && !key.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(ConfigError::invalid(
            format!("{path}.apiKey"),
            "contains spaces or control characters",
        ));
    }
    let prompt_cache_key = raw
        .prompt_cache_key
        .unwrap_or_else(|| !STRICT_HOSTS.contains(&base_url.host_str().unwrap_or_default()));
    let circuit_breaker = circuit_breaker(raw.circuit_breaker.as_ref(), path)?;
    let responses = kind == ProviderKind::OpenAi
        && raw
            .responses
            .unwrap_or_else(|| base_url.host_str() == Some("api.openai.com"));
    Ok(ProviderConfig {
        name,
        kind,
        base_url,
        api_key: raw.api_key.filter(|k| !k.is_empty()).map(SecretString::from),
        // An empty value (an unset `${VAR:-}`) means "do not send this header".
        headers: raw
            .headers
            .into_iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| (k, SecretString::from(v)))
            .collect(),
        timeout: Duration::from_secs(timeout),
        connect_timeout: Duration::from_secs(raw.connect_timeout_seconds.unwrap_or(10).max(1)),
        max_retries: raw.max_retries.unwrap_or(2).min(10),
        models: raw.models,
        api_version: raw.api_version,
        deployments: raw.deployments,
        vertex,
        bedrock,
        context_window: raw.context_window,
        prompt_cache_key,
        responses,
        detected: false,
        circuit_breaker,
        command: raw.command.filter(|c| !c.is_empty()),
    })
}

fn circuit_breaker(
    raw: Option<&RawCircuitBreaker>,
    path: &str,
) -> Result<Option<CircuitBreakerConfig>, ConfigError> {
    let defaults = CircuitBreakerConfig::default();
    let settings = match raw {
        None | Some(RawCircuitBreaker::Enabled(true)) => return Ok(Some(defaults)),
        Some(RawCircuitBreaker::Enabled(false)) => return Ok(None),
        Some(RawCircuitBreaker::Settings(settings)) => settings,
    };
    let failures = settings.failures.unwrap_or(defaults.failures);
    let cool = settings.cool_seconds.map_or(defaults.cool, Duration::from_secs);
    let max_cool = settings
        .max_cool_seconds
        .map_or(defaults.max_cool.max(cool), Duration::from_secs);
    let invalid = |key: &str, message: &str| {
        Err(ConfigError::invalid(
            format!("{path}.circuitBreaker.{key}"),
            message,
        ))
    };
    if failures == 0 {
        return invalid("failures", "must be at least 1 (or set circuitBreaker: false)");
    }
    if cool.is_zero() {
        return invalid("coolSeconds", "must be greater than 0");
    }
    if max_cool < cool {
        return invalid("maxCoolSeconds", "must be at least coolSeconds");
    }
    Ok(Some(CircuitBreakerConfig {
        failures,
        cool,
        max_cool,
    }))
}

/// OpenAI-compatible APIs known to refuse fields they do not define, so
/// agent runs leave `prompt_cache_key` out unless the config says otherwise.
const STRICT_HOSTS: [&str; 1] = ["api.mistral.ai"];
