//! Turns the raw file into typed [`Config`], naming the path of every bad value,
//! and adds the zero-config providers found in the environment.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use secrecy::SecretString;
use url::Url;

use super::ConfigError;
use super::fields::{Env, expand_home, parse_url, provider_kind};
use super::raw::{self, OneOrMany, RawConfig};
use super::types::*;
use crate::model_ref::ModelRef;

pub fn validate(raw: RawConfig, source: Option<PathBuf>, env: Env) -> Result<Config, ConfigError> {
    let mut providers = BTreeMap::new();
    for (name, provider) in raw.providers {
        let path = format!("providers.{name}");
        check_name(&name, &path)?;
        providers.insert(name.clone(), provider_config(name, provider, &path)?);
    }
    add_env_providers(&mut providers, env)?;
    let aliases = aliases(raw.models.aliases, &providers)?;
    let context_windows = context_windows(raw.models.context_window, &providers)?;
    let mcp = super::mcp::mcp(raw.mcp, env)?;
    let mut agents = agents(raw.agents, &mcp.servers)?;
    let storage = storage(raw.storage, env)?;
    super::workspace::check_workspaces(&mut agents, &storage.data_dir, source.as_deref(), env)?;
    let mut tools = tools(raw.tools, env)?;
    let knowledge = super::knowledge::knowledge(raw.knowledge, env)?;
    tools.menos_search = knowledge.menos.is_some();
    super::mcp::check_tool_entries(&tools.allow, &mcp.servers, "tools.allow")?;
    super::mcp::check_tool_entries(&tools.deny, &mcp.servers, "tools.deny")?;
    // What a sandboxed command must never read.
    tools.exec_sandbox.hidden = [
        Some(storage.data_dir.clone()),
        source.clone(),
        env("HOME").map(PathBuf::from),
    ]
    .into_iter()
    .flatten()
    .collect();
    let gateway = gateway(raw.gateway, env)?;
    tools.exec_sandbox.resolve_require(gateway.listen);
    Ok(Config {
        source,
        gateway,
        providers,
        aliases,
        context_windows,
        storage,
        memory: memory(raw.memory, env)?,
        scheduler: super::scheduling::scheduler(raw.scheduler, agents.timezone)?,
        agents,
        bindings: raw.bindings.into_iter().map(binding).collect(),
        plugins: PluginsConfig {
            enabled: raw.plugins.enabled,
            settings: raw.plugins.settings,
        },
        tools,
        usage: super::usage::usage(raw.usage)?,
        mcp,
        orchestration: orchestration(raw.orchestration)?,
        knowledge,
    })
}

fn orchestration(raw: raw::RawOrchestration) -> Result<OrchestrationConfig, ConfigError> {
    let defaults = OrchestrationConfig::default();
    let positive = |value: Option<u64>, path: &str| match value {
        Some(0) => Err(ConfigError::invalid(path, "must be at least 1")),
        other => Ok(other),
    };
    Ok(OrchestrationConfig {
        enabled: raw.enabled.unwrap_or(defaults.enabled),
        worker: raw.worker.unwrap_or(defaults.worker),
        lease: positive(raw.lease_seconds, "orchestration.leaseSeconds")?
            .map_or(defaults.lease, Duration::from_secs),
        max_attempts: positive(raw.max_attempts.map(u64::from), "orchestration.maxAttempts")?
            .map_or(defaults.max_attempts, |n| u32::try_from(n).unwrap_or(u32::MAX)),
        max_parallel_steps: positive(
            raw.max_parallel_steps.map(|n| n as u64),
            "orchestration.maxParallelSteps",
        )?
        .map_or(defaults.max_parallel_steps, |n| {
            usize::try_from(n).unwrap_or(usize::MAX)
        }),
        step_timeout: positive(raw.step_timeout_seconds, "orchestration.stepTimeoutSeconds")?
            .map_or(defaults.step_timeout, Duration::from_secs),
        reaction_seed: raw.reaction_seed,
    })
}

/// A window below this cannot hold a system prompt and a turn.
const MIN_CONTEXT_WINDOW: u32 = 1024;

fn context_windows(
    models: BTreeMap<String, u32>,
    providers: &BTreeMap<String, ProviderConfig>,
) -> Result<ContextWindows, ConfigError> {
    let check = |tokens: u32, path: String| {
        if tokens < MIN_CONTEXT_WINDOW {
            return Err(ConfigError::invalid(
                path,
                format!("{tokens} tokens is too small a context window (at least {MIN_CONTEXT_WINDOW})"),
            ));
        }
        Ok(tokens)
    };
    let mut windows = ContextWindows::default();
    for (model, tokens) in models {
        let tokens = check(tokens, format!("models.contextWindow.{model}"))?;
        windows.models.insert(model, tokens);
    }
    for provider in providers.values() {
        if let Some(tokens) = provider.context_window {
            let tokens = check(tokens, format!("providers.{}.contextWindow", provider.name))?;
            windows.providers.insert(provider.name.clone(), tokens);
        }
    }
    Ok(windows)
}

fn compaction(raw: raw::RawCompaction) -> Result<CompactionConfig, ConfigError> {
    let defaults = CompactionConfig::default();
    let threshold = raw.threshold.unwrap_or(defaults.threshold);
    if !(0.2..=0.95).contains(&threshold) {
        return Err(ConfigError::invalid(
            "agents.defaults.compaction.threshold",
            format!("{threshold} is not a share of the context window from 0.2 to 0.95"),
        ));
    }
    Ok(CompactionConfig {
        enabled: raw.enabled.unwrap_or(defaults.enabled),
        threshold,
        timeout: raw
            .timeout_seconds
            .filter(|s| *s > 0)
            .map_or(defaults.timeout, Duration::from_secs),
    })
}

fn tools(raw: raw::RawTools, env: Env) -> Result<ToolsConfig, ConfigError> {
    let defaults = ToolsConfig::default();
    let searxng = raw
        .web_search
        .searxng_url
        .or_else(|| env("SEARXNG_URL"))
        .filter(|u| !u.is_empty());
    Ok(ToolsConfig {
        // Set from `knowledge.menos` once that is read.
        menos_search: false,
        searxng_url: searxng
            .as_deref()
            .map(|u| parse_url(u, "tools.webSearch.searxngUrl"))
            .transpose()?,
        fetch_allow_private: raw.web_fetch.allow_private,
        fetch_max_bytes: raw.web_fetch.max_bytes.unwrap_or(defaults.fetch_max_bytes),
        fetch_timeout: raw
            .web_fetch
            .timeout_seconds
            .map_or(defaults.fetch_timeout, Duration::from_secs),
        exec_timeout: raw
            .exec
            .timeout_seconds
            .map_or(defaults.exec_timeout, Duration::from_secs),
        exec_max_output: raw.exec.max_output_bytes.unwrap_or(defaults.exec_max_output),
        exec_sandbox: exec_sandbox(&raw.exec)?,
        approval_timeout: raw
            .approval_timeout_seconds
            .map_or(defaults.approval_timeout, Duration::from_secs),
        allow: super::tool_names::trimmed(raw.allow),
        deny: super::tool_names::trimmed(raw.deny),
    })
}

fn exec_sandbox(raw: &raw::RawExec) -> Result<ExecSandbox, ConfigError> {
    let defaults = crate::sandbox::Limits::default();
    let positive = |value: Option<u64>, default: u64, path: &str, scale: u64| match value {
        None => Ok(default),
        Some(0) => Err(ConfigError::invalid(
            format!("tools.exec.limits.{path}"),
            "must be at least 1",
        )),
        Some(n) => Ok(n.saturating_mul(scale)),
    };
    let l = &raw.limits;
    const MB: u64 = 1 << 20;
    let read_only = raw
        .read_only
        .iter()
        .map(|path| {
            let path = PathBuf::from(path);
            if path.is_absolute() {
                Ok(path)
            } else {
                Err(ConfigError::invalid(
                    "tools.exec.readOnly",
                    format!("{path:?} must be an absolute path"),
                ))
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ExecSandbox {
        network: raw.network.unwrap_or(false),
        require: raw.require_sandbox.unwrap_or(false),
        require_setting: raw.require_sandbox,
        read_only,
        limits: crate::sandbox::Limits {
            cpu_seconds: positive(l.cpu_seconds, defaults.cpu_seconds, "cpuSeconds", 1)?,
            memory_bytes: positive(l.memory_mb, defaults.memory_bytes, "memoryMb", MB)?,
            processes: positive(l.processes, defaults.processes, "processes", 1)?,
            file_bytes: positive(l.file_size_mb, defaults.file_bytes, "fileSizeMb", MB)?,
        },
        hidden: Vec::new(),
    })
}

fn check_name(name: &str, path: &str) -> Result<(), ConfigError> {
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
    if ok {
        Ok(())
    } else {
        Err(ConfigError::invalid(
            path,
            "names may use only letters, digits, '-', '_' and '.'",
        ))
    }
}

fn gateway(raw: raw::RawGateway, env: Env) -> Result<GatewayConfig, ConfigError> {
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
pub fn provider_from_spec(name: &str, spec: raw::RawProvider) -> Result<ProviderConfig, ConfigError> {
    check_name(name, "name")?;
    provider_config(name.to_string(), spec, "").map_err(|err| match err {
        ConfigError::Invalid { path, message } => ConfigError::Invalid {
            path: path.trim_start_matches('.').to_string(),
            message,
        },
        other => other,
    })
}

fn provider_config(name: String, raw: raw::RawProvider, path: &str) -> Result<ProviderConfig, ConfigError> {
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

/// Deployment names go into the URL path: Azure allows letters, digits, `-`, `_` and `.`.
pub fn is_deployment_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && name != "."
        && name != ".."
}

fn check_deployments(
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

fn vertex_config(
    raw: &raw::RawProvider,
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
fn bedrock_config(
    raw: &raw::RawProvider,
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

fn circuit_breaker(
    raw: Option<&raw::RawCircuitBreaker>,
    path: &str,
) -> Result<Option<CircuitBreakerConfig>, ConfigError> {
    let defaults = CircuitBreakerConfig::default();
    let settings = match raw {
        None | Some(raw::RawCircuitBreaker::Enabled(true)) => return Ok(Some(defaults)),
        Some(raw::RawCircuitBreaker::Enabled(false)) => return Ok(None),
        Some(raw::RawCircuitBreaker::Settings(settings)) => settings,
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

/// A provider detected from the environment, with defaults for everything else.
pub fn detected_provider(
    name: &str,
    kind: ProviderKind,
    base_url: Url,
    api_key: Option<String>,
) -> ProviderConfig {
    let responses = kind == ProviderKind::OpenAi && base_url.host_str() == Some("api.openai.com");
    ProviderConfig {
        name: name.to_string(),
        kind,
        base_url,
        api_key: api_key.map(SecretString::from),
        headers: Vec::new(),
        timeout: Duration::from_secs(600),
        connect_timeout: Duration::from_secs(10),
        max_retries: 2,
        models: Vec::new(),
        api_version: None,
        deployments: BTreeMap::new(),
        vertex: None,
        bedrock: None,
        context_window: None,
        prompt_cache_key: true,
        responses,
        detected: true,
        circuit_breaker: Some(CircuitBreakerConfig::default()),
        command: None,
    }
}

/// `OLLAMA_HOST` accepts `host`, `host:port` or a URL, like the ollama CLI does.
pub fn ollama_url(host: &str) -> Option<Url> {
    let with_scheme = if host.contains("://") {
        host.to_string()
    } else {
        format!("http://{host}")
    };
    let mut url = Url::parse(&with_scheme).ok()?;
    if url.port().is_none() && !host.contains("://") {
        url.set_port(Some(11434)).ok()?;
    }
    Some(url)
}

fn add_env_providers(providers: &mut BTreeMap<String, ProviderConfig>, env: Env) -> Result<(), ConfigError> {
    let detected = [
        (
            "openai",
            ProviderKind::OpenAi,
            "OPENAI_API_KEY",
            "OPENAI_BASE_URL",
        ),
        (
            "anthropic",
            ProviderKind::Anthropic,
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_BASE_URL",
        ),
        (
            "openrouter",
            ProviderKind::OpenAi,
            "OPENROUTER_API_KEY",
            "OPENROUTER_BASE_URL",
        ),
    ];
    for (name, kind, key_var, url_var) in detected {
        let Some(key) = env(key_var)
            .map(|k| k.trim().to_string())
            .filter(|k| !k.is_empty())
        else {
            continue;
        };
        if !key.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(ConfigError::invalid(
                key_var,
                "contains spaces or control characters",
            ));
        }
        if providers.contains_key(name) {
            continue;
        }
        let url_text = env(url_var)
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| default_base_url(name, kind).into());
        let base_url = parse_url(&url_text, url_var)?;
        providers.insert(name.into(), detected_provider(name, kind, base_url, Some(key)));
    }
    if let Some(host) = env("OLLAMA_HOST").filter(|h| !h.is_empty())
        && !providers.contains_key("ollama")
    {
        let url = ollama_url(&host)
            .ok_or_else(|| ConfigError::invalid("OLLAMA_HOST", format!("not a host or URL: {host:?}")))?;
        providers.insert(
            "ollama".into(),
            detected_provider("ollama", ProviderKind::Ollama, url, None),
        );
    }
    Ok(())
}

fn aliases(
    raw: BTreeMap<String, OneOrMany>,
    providers: &BTreeMap<String, ProviderConfig>,
) -> Result<BTreeMap<String, Vec<ModelRef>>, ConfigError> {
    let mut out = BTreeMap::new();
    for (alias, targets) in raw {
        let path = format!("models.aliases.{alias}");
        if alias.contains('/') || alias.starts_with("onyx:") {
            return Err(ConfigError::invalid(
                path,
                "an alias may not contain '/' or start with 'onyx:'",
            ));
        }
        let targets = match targets {
            OneOrMany::One(target) => vec![target],
            OneOrMany::Many(targets) => targets,
        };
        if targets.is_empty() {
            return Err(ConfigError::invalid(path, "needs at least one model"));
        }
        let mut refs = Vec::with_capacity(targets.len());
        for (index, target) in targets.iter().enumerate() {
            let entry_path = format!("{path}[{index}]");
            let model_ref =
                ModelRef::parse(target).map_err(|err| ConfigError::invalid(&entry_path, err.to_string()))?;
            if !providers.contains_key(&model_ref.provider) {
                let known: Vec<&str> = providers.keys().map(String::as_str).collect();
                return Err(ConfigError::invalid(
                    entry_path,
                    format!(
                        "unknown provider {:?} (configured: {})",
                        model_ref.provider,
                        known.join(", ")
                    ),
                ));
            }
            refs.push(model_ref);
        }
        out.insert(alias, refs);
    }
    Ok(out)
}

fn storage(raw: raw::RawStorage, env: Env) -> Result<StorageConfig, ConfigError> {
    let data_dir = match raw
        .data_dir
        .or_else(|| env("ONYX_DATA_DIR").filter(|d| !d.is_empty()))
    {
        Some(dir) => expand_home(&dir, env),
        None => expand_home("~/.local/share/onyx", env),
    };
    let objects = match raw.objects {
        None => ObjectStoreConfig::Local,
        Some(objects) => match objects.kind.as_str() {
            "local" => ObjectStoreConfig::Local,
            "s3" => ObjectStoreConfig::S3 {
                endpoint: objects
                    .endpoint
                    .as_deref()
                    .map(|e| parse_url(e, "storage.objects.endpoint"))
                    .transpose()?,
                region: objects.region.unwrap_or_else(|| "us-east-1".into()),
                access_key: objects.access_key.map(SecretString::from),
                secret_key: objects.secret_key.map(SecretString::from),
                bucket_prefix: objects.bucket_prefix.unwrap_or_default(),
            },
            other => {
                return Err(ConfigError::invalid(
                    "storage.objects.type",
                    format!("{other:?} is not \"local\" or \"s3\""),
                ));
            }
        },
    };
    let surreal = raw.surrealdb;
    let default_url = format!("surrealkv://{}", data_dir.join("db").display());
    let url = surreal
        .as_ref()
        .and_then(|s| s.url.clone())
        .unwrap_or(default_url);
    let scheme_ok = ["mem://", "surrealkv://", "ws://", "wss://", "http://", "https://"]
        .iter()
        .any(|s| url.starts_with(s));
    if !scheme_ok {
        return Err(ConfigError::invalid(
            "storage.surrealdb.url",
            format!("{url:?} must start with mem://, surrealkv://, ws:// or wss://"),
        ));
    }
    let defaults = EmbeddedStore::default();
    let size = |value: Option<u64>, default: u64, min: u64, field: &str| match value {
        None => Ok(default),
        Some(mb) if (min..=1 << 20).contains(&mb) => Ok(mb),
        Some(mb) => Err(ConfigError::invalid(
            format!("storage.surrealdb.{field}"),
            format!("{mb} must be between {min} and 1048576 (MB)"),
        )),
    };
    let embedded = EmbeddedStore {
        cache_mb: size(
            surreal.as_ref().and_then(|s| s.cache_mb),
            defaults.cache_mb,
            1,
            "cacheMb",
        )?,
        memtable_mb: size(
            surreal.as_ref().and_then(|s| s.memtable_mb),
            defaults.memtable_mb,
            8,
            "memtableMb",
        )?,
    };
    Ok(StorageConfig {
        data_dir,
        objects,
        surrealdb: SurrealConfig {
            embedded,
            url,
            user: surreal.as_ref().and_then(|s| s.user.clone()),
            pass: surreal
                .as_ref()
                .and_then(|s| s.pass.clone())
                .map(SecretString::from),
            namespace: surreal
                .as_ref()
                .and_then(|s| s.namespace.clone())
                .unwrap_or_else(|| "onyx".into()),
            database: surreal.and_then(|s| s.database).unwrap_or_else(|| "main".into()),
        },
    })
}

fn unit_interval(value: Option<f64>, default: f64, path: &str) -> Result<f64, ConfigError> {
    let value = value.unwrap_or(default);
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(ConfigError::invalid(
            path,
            format!("{value} is not between 0 and 1"),
        ))
    }
}

fn memory(raw: raw::RawMemory, env: Env) -> Result<MemoryConfig, ConfigError> {
    let fusion = match raw.fusion.as_deref() {
        None | Some("adaptive") => Fusion::Adaptive,
        Some("rrf") => Fusion::Rrf,
        Some("linear") => Fusion::Linear,
        Some(other) => {
            return Err(ConfigError::invalid(
                "memory.fusion",
                format!("{other:?} is not \"adaptive\", \"linear\" or \"rrf\""),
            ));
        }
    };
    let embedder = raw
        .embedder
        .map(|embedder| super::embedder::embedder(embedder, env))
        .transpose()?;
    let reranker = raw.reranker.map(super::embedder::reranker).transpose()?;
    let chunk_tokens = raw.chunk_tokens.unwrap_or(400);
    let chunk_overlap = raw.chunk_overlap.unwrap_or(80);
    if chunk_tokens < 32 {
        return Err(ConfigError::invalid("memory.chunkTokens", "must be at least 32"));
    }
    if chunk_overlap >= chunk_tokens {
        return Err(ConfigError::invalid(
            "memory.chunkOverlap",
            "must be smaller than memory.chunkTokens",
        ));
    }
    let half_life_days = raw.half_life_days.unwrap_or(365.0);
    if half_life_days <= 0.0 {
        return Err(ConfigError::invalid(
            "memory.halfLifeDays",
            "must be greater than 0",
        ));
    }
    Ok(MemoryConfig {
        embedder,
        fusion,
        vector_weight: unit_interval(raw.vector_weight, 0.6, "memory.vectorWeight")?,
        text_weight: unit_interval(raw.text_weight, 0.4, "memory.textWeight")?,
        min_score: unit_interval(raw.min_score, 0.0, "memory.minScore")?,
        half_life_days,
        chunk_tokens,
        chunk_overlap,
        sync_interval: std::time::Duration::from_secs(match raw.sync_interval_seconds {
            Some(0) => {
                return Err(ConfigError::invalid(
                    "memory.syncIntervalSeconds",
                    "must be at least 1",
                ));
            }
            Some(seconds) => seconds,
            None => 60,
        }),
        resident_budget_mb: match raw.resident_budget_mb {
            Some(0) => {
                return Err(ConfigError::invalid(
                    "memory.residentBudgetMb",
                    "must be at least 1",
                ));
            }
            Some(mb) if mb > 1 << 20 => {
                return Err(ConfigError::invalid(
                    "memory.residentBudgetMb",
                    "must be at most 1048576 (1 TiB)",
                ));
            }
            Some(mb) => mb,
            None => DEFAULT_RESIDENT_BUDGET_MB,
        },
        reranker,
    })
}

fn permission_mode(text: &str, path: &str) -> Result<PermissionMode, ConfigError> {
    match text {
        "safe" => Ok(PermissionMode::Safe),
        "ask" => Ok(PermissionMode::Ask),
        "allow-all" | "allowAll" => Ok(PermissionMode::AllowAll),
        other => Err(ConfigError::invalid(
            path,
            format!("{other:?} is not \"safe\", \"ask\" or \"allow-all\""),
        )),
    }
}

fn agents(
    raw: raw::RawAgents,
    mcp_servers: &BTreeMap<String, McpServerConfig>,
) -> Result<AgentsConfig, ConfigError> {
    let defaults = raw.defaults.unwrap_or_default();
    let timezone = super::scheduling::timezone(
        defaults.timezone.as_deref(),
        "agents.defaults.timezone",
        crate::clock::host_timezone,
    )?;
    let default_permission_mode = match &defaults.permission_mode {
        Some(mode) => permission_mode(mode, "agents.defaults.permissionMode")?,
        None => PermissionMode::Ask,
    };
    let mut list = Vec::with_capacity(raw.list.len());
    let mut seen = std::collections::BTreeSet::new();
    for (index, agent) in raw.list.into_iter().enumerate() {
        let path = format!("agents.list[{index}]");
        check_name(&agent.id, &format!("{path}.id"))?;
        if !seen.insert(agent.id.clone()) {
            return Err(ConfigError::invalid(
                format!("{path}.id"),
                format!("duplicate agent id {:?}", agent.id),
            ));
        }
        let permission_mode = agent
            .permission_mode
            .as_deref()
            .map(|m| permission_mode(m, &format!("{path}.permissionMode")))
            .transpose()?;
        let (tools_allow, tools_deny) = agent.tools.map(|t| (t.allow, t.deny)).unwrap_or_default();
        let tools_allow = super::tool_names::trimmed(tools_allow);
        let tools_deny = super::tool_names::trimmed(tools_deny);
        super::mcp::check_tool_entries(&tools_allow, mcp_servers, &format!("{path}.tools.allow"))?;
        super::mcp::check_tool_entries(&tools_deny, mcp_servers, &format!("{path}.tools.deny"))?;
        list.push(AgentConfig {
            id: agent.id,
            name: agent.name,
            default: agent.default,
            model: agent.model,
            workspace: agent.workspace,
            tools_allow,
            tools_deny,
            temperature: agent.temperature,
            max_tokens: agent.max_tokens,
            permission_mode,
            heartbeat: super::scheduling::heartbeat(agent.heartbeat.as_ref(), &format!("{path}.heartbeat"))?,
            timezone: super::scheduling::timezone(
                agent.timezone.as_deref(),
                &format!("{path}.timezone"),
                || timezone,
            )?,
            limits: super::usage::limits(agent.limits, &format!("{path}.limits"))?,
            mcp: super::mcp::agent_servers(agent.mcp, mcp_servers, &format!("{path}.mcp"))?,
        });
    }
    if list.iter().filter(|a| a.default).count() > 1 {
        return Err(ConfigError::invalid(
            "agents.list",
            "more than one agent is marked default",
        ));
    }
    Ok(AgentsConfig {
        default_model: defaults.model,
        default_permission_mode,
        timezone,
        max_iterations: defaults.max_iterations.unwrap_or(20),
        run_lease: match defaults.run_lease_seconds.unwrap_or(30) {
            0 => {
                return Err(ConfigError::invalid(
                    "agents.defaults.runLeaseSeconds",
                    "must be at least 1",
                ));
            }
            seconds => Duration::from_secs(seconds),
        },
        compaction: compaction(defaults.compaction)?,
        list,
    })
}

fn binding(raw: raw::RawBinding) -> Binding {
    Binding {
        agent_id: raw.agent_id,
        channel: raw.matcher.channel,
        account_id: raw.matcher.account_id,
        guild_id: raw.matcher.guild_id,
        chat_id: raw.matcher.chat_id,
        peer: raw.matcher.peer.map(|p| (p.kind, p.id)),
    }
}
