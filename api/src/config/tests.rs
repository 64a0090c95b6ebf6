use std::collections::HashMap;
use std::path::Path;

use secrecy::ExposeSecret;

use super::*;

fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    move |name| map.get(name).cloned()
}

#[test]
fn onyx_password_hash_works_without_a_config_reference() {
    let hash = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA";
    let config = parse(None, None, &env(&[("ONYX_PASSWORD_HASH", hash)])).unwrap();
    assert_eq!(config.gateway.password_hash.as_deref(), Some(hash));
    let config = parse(
        Some(include_str!("../../../config/onyx.example.json5")),
        None,
        &env(&[("HOME", "/home/u"), ("ONYX_PASSWORD_HASH", hash)]),
    )
    .unwrap();
    assert_eq!(config.gateway.password_hash.as_deref(), Some(hash));
    let invalid = parse(None, None, &env(&[("ONYX_PASSWORD_HASH", "plain")])).unwrap_err();
    assert!(invalid.to_string().starts_with("gateway.auth.passwordHash:"));
    assert!(
        parse(None, None, &env(&[]))
            .unwrap()
            .gateway
            .password_hash
            .is_none()
    );
}

#[test]
fn the_example_config_loads_and_documents_every_section() {
    let text = include_str!("../../../config/onyx.example.json5");
    let config = parse(
        Some(text),
        Some(Path::new("onyx.example.json5")),
        &env(&[("HOME", "/home/u")]),
    )
    .unwrap();
    assert_eq!(config.gateway.listen.to_string(), DEFAULT_LISTEN);
    assert!(
        config.gateway.api_keys.is_empty(),
        "an unset ${{ONYX_API_KEY:-}} adds no key"
    );
    assert_eq!(config.providers.len(), 12);
    assert_eq!(config.providers["anthropic"].kind, ProviderKind::Anthropic);
    assert_eq!(config.providers["azure"].kind, ProviderKind::Azure);
    assert_eq!(
        config.providers["azure"].deployments["gpt-4o-mini"],
        "my-gpt-4o-mini"
    );
    let vertex = config.providers["vertex"].vertex.as_ref().unwrap();
    assert_eq!(
        (vertex.project.as_str(), vertex.location.as_str()),
        ("my-project", "us-central1")
    );
    assert_eq!(
        config.providers["vertex"].base_url.as_str(),
        "https://us-central1-aiplatform.googleapis.com/"
    );
    assert_eq!(config.providers["gemini"].kind, ProviderKind::Gemini);
    let bedrock = &config.providers["bedrock"];
    assert_eq!(bedrock.kind, ProviderKind::Bedrock);
    assert_eq!(
        bedrock.base_url.as_str(),
        "https://bedrock-runtime.us-east-1.amazonaws.com/"
    );
    let settings = bedrock.bedrock.as_ref().unwrap();
    assert_eq!(settings.region.as_deref(), Some("us-east-1"));
    assert!(
        settings.endpoint.is_none(),
        "the region's endpoint is not an override"
    );
    let claude = &config.providers["claude-subscription"];
    assert_eq!(claude.kind, ProviderKind::ClaudeSubscription);
    assert_eq!(claude.command.as_deref(), Some("claude"));
    assert_eq!(config.providers["chatgpt"].kind, ProviderKind::Codex);
    let copilot = &config.providers["copilot"];
    assert_eq!(copilot.kind, ProviderKind::Copilot);
    assert_eq!(
        copilot.base_url.as_str(),
        "https://api.githubcopilot.com/",
        "the signed-in account, no BYOK upstream"
    );
    assert!(config.providers["openai"].prompt_cache_key);
    assert!(!config.providers["mistral"].prompt_cache_key);
    assert!(
        config.providers["openai"].headers.is_empty(),
        "empty header values are dropped"
    );
    assert_eq!(config.aliases["fast"].len(), 2);
    assert_eq!(
        config.storage.surrealdb.url,
        "surrealkv:///home/u/.local/share/onyx/db"
    );
    assert_eq!(config.memory.fusion, Fusion::Adaptive);
    let menos = config.knowledge.menos.as_ref().unwrap();
    assert_eq!(menos.key_file, Path::new("/home/u/.ssh/onyx_menos"));
    assert!(
        config.tools.menos_search,
        "menos_search is offered with knowledge.menos"
    );
    assert_eq!(config.agents.list[0].id, "main");
    assert_eq!(
        config.agents.list[0]
            .heartbeat
            .as_ref()
            .and_then(|h| h.deliver_to.as_deref()),
        Some("telegram:123456789")
    );
    assert_eq!(config.agents.list[0].tools_allow[0], "group:memory");
    assert_eq!(config.bindings.len(), 3);
    assert!(config.plugins.settings.contains_key("telegram"));
}

#[test]
fn no_file_is_the_embedded_default() {
    let config = parse(None, None, &env(&[("HOME", "/home/u")])).unwrap();
    assert_eq!(config.gateway.listen.to_string(), "127.0.0.1:18790");
    assert_eq!(config.gateway.max_body_bytes, 20 * 1024 * 1024);
    assert!(config.providers.is_empty());
    assert_eq!(config.storage.data_dir, Path::new("/home/u/.local/share/onyx"));
    assert!(matches!(config.storage.objects, ObjectStoreConfig::Local));
}

#[test]
fn providers_come_from_the_environment_unless_configured() {
    let vars = env(&[
        ("OPENAI_API_KEY", "sk-env"),
        ("OPENROUTER_API_KEY", "or-env"),
        ("OLLAMA_HOST", "10.0.0.5"),
        ("ANTHROPIC_API_KEY", "ant-env"),
    ]);
    let text = r#"{ providers: { anthropic: { type: "anthropic", apiKey: "from-file" } } }"#;
    let config = parse(Some(text), None, &vars).unwrap();
    assert_eq!(
        config.providers["openai"].base_url.as_str(),
        "https://api.openai.com/v1"
    );
    assert_eq!(
        config.providers["openai"]
            .api_key
            .as_ref()
            .unwrap()
            .expose_secret(),
        "sk-env"
    );
    assert_eq!(
        config.providers["openrouter"].base_url.as_str(),
        "https://openrouter.ai/api/v1"
    );
    assert_eq!(
        config.providers["ollama"].base_url.as_str(),
        "http://10.0.0.5:11434/"
    );
    let anthropic = &config.providers["anthropic"];
    assert!(!anthropic.detected);
    assert_eq!(anthropic.api_key.as_ref().unwrap().expose_secret(), "from-file");
}

#[test]
fn agents_take_the_default_timezone_unless_they_name_their_own() {
    let text = r#"{ agents: { defaults: { timezone: "Asia/Tokyo" },
        list: [{ id: "a" }, { id: "b", timezone: "America/Los_Angeles" }] } }"#;
    let config = parse(Some(text), None, &env(&[])).unwrap();
    let zones: Vec<&str> = config.agents.list.iter().map(|a| a.timezone.name()).collect();
    assert_eq!(zones, ["Asia/Tokyo", "America/Los_Angeles"]);
    assert_eq!(config.scheduler.timezone.name(), "Asia/Tokyo");
    let unset = parse(Some("{ agents: { list: [{ id: \"a\" }] } }"), None, &env(&[])).unwrap();
    assert_eq!(unset.agents.timezone, crate::clock::host_timezone());
    assert_eq!(unset.agents.list[0].timezone, unset.agents.timezone);
}

#[test]
fn bad_values_name_their_path() {
    let cases = [
        (r#"{ gateway: { listen: "localhost" } }"#, "gateway.listen:"),
        (
            r#"{ gateway: { auth: { apiKeys: ["short"] } } }"#,
            "gateway.auth.apiKeys[0]:",
        ),
        (
            r#"{ gateway: { auth: { passwordHash: "plain" } } }"#,
            "gateway.auth.passwordHash:",
        ),
        (
            r#"{ storage: { objects: { type: "ftp" } } }"#,
            "storage.objects.type:",
        ),
        (
            r#"{ storage: { surrealdb: { blockKb: 0 } } }"#,
            "storage.surrealdb.blockKb:",
        ),
        (
            r#"{ storage: { surrealdb: { connections: 0 } } }"#,
            "storage.surrealdb.connections:",
        ),
        (r#"{ memory: { vectorWeight: 2 } }"#, "memory.vectorWeight:"),
        (
            r#"{ memory: { chunkTokens: 100, chunkOverlap: 100 } }"#,
            "memory.chunkOverlap:",
        ),
        (
            r#"{ agents: { list: [{ id: "a" }, { id: "a" }] } }"#,
            "agents.list[1].id:",
        ),
        (
            r#"{ agents: { list: [{ id: "a", permissionMode: "yolo" }] } }"#,
            "agents.list[0].permissionMode:",
        ),
        (
            r#"{ agents: { list: [{ id: "a", sandbox: {} }] } }"#,
            "agents.list[0].sandbox: unknown field",
        ),
        (
            r#"{ providers: { "bad name": { type: "openai" } } }"#,
            "providers.bad name:",
        ),
        (
            r#"{ models: { aliases: { "a/b": "x/y" } } }"#,
            "models.aliases.a/b:",
        ),
        (
            r#"{ agents: { list: [{ id: "a", timezone: "Mars/Olympus" }] } }"#,
            "agents.list[0].timezone:",
        ),
        (
            r#"{ agents: { defaults: { timezone: "PST8PDT-ish" } } }"#,
            "agents.defaults.timezone:",
        ),
        (
            r#"{ agents: { list: [{ id: "a", heartbeat: { every: "1m", deliverTo: "pigeon:1" } }] } }"#,
            "agents.list[0].heartbeat.deliverTo:",
        ),
        (r#"[1]"#, "<root>:"),
    ];
    for (text, prefix) in cases {
        let err = parse(Some(text), None, &env(&[])).unwrap_err().to_string();
        assert!(err.starts_with(prefix), "{text}: {err}");
    }
}

/// Every key path of a config value; maps whose keys the user chooses (and
/// their children) are written `<name>`, list items `[]`.
fn key_paths(value: &serde_json::Value, path: &str, out: &mut Vec<String>) {
    const USER_NAMED: &[&str] = &[
        "providers",
        "models.aliases",
        "models.contextWindow",
        "providers.<name>.headers",
        "providers.<name>.deployments",
        "plugins",
        "usage.prices",
        "mcp.servers",
        "mcp.servers.<name>.env",
        "mcp.servers.<name>.headers",
    ];
    match value {
        serde_json::Value::Object(map) => {
            for (key, child) in map {
                let key = if USER_NAMED.contains(&path) && !(path == "plugins" && key == "enabled") {
                    "<name>"
                } else {
                    key.as_str()
                };
                let next = if path.is_empty() {
                    key.to_string()
                } else {
                    format!("{path}.{key}")
                };
                key_paths(child, &next, out);
            }
        }
        serde_json::Value::Array(items) if items.first().is_some_and(serde_json::Value::is_object) => {
            for item in items {
                key_paths(item, &format!("{path}[]"), out);
            }
        }
        _ => {
            if !out.iter().any(|p| p == path) {
                out.push(path.to_string());
            }
        }
    }
}

#[test]
fn the_readme_configuration_reference_lists_every_example_key() {
    let example: serde_json::Value =
        json5::from_str(include_str!("../../../config/onyx.example.json5")).unwrap();
    let readme = include_str!("../../../docs/configuration.md");
    let reference = &readme[readme.find("## Configuration reference").unwrap()..];
    let reference = &reference[..reference[3..].find("\n## ").map_or(reference.len(), |i| i + 3)];
    let mut paths = Vec::new();
    key_paths(&example, "", &mut paths);
    assert!(paths.len() > 80, "{paths:?}");
    let missing: Vec<&String> = paths
        .iter()
        .filter(|p| !reference.contains(&format!("| `{p}` |")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/configuration.md's reference lacks {missing:?}"
    );
    // And it documents nothing the example lacks.
    for line in reference.lines().filter(|l| l.starts_with("| `")) {
        let key = line.split('`').nth(1).unwrap();
        assert!(
            paths.iter().any(|p| p == key),
            "docs/configuration.md documents {key}, which the example lacks"
        );
    }
}

#[test]
fn the_local_embedder_defaults_to_minilm_downloaded_once() {
    let home = env(&[("HOME", "/home/u")]);
    let config = parse(Some(r#"{memory: {embedder: {type: "local"}}}"#), None, &home).unwrap();
    let Some(EmbedderConfig::Local(local)) = &config.memory.embedder else {
        panic!("{:?}", config.memory.embedder)
    };
    assert_eq!(local.model, "all-MiniLM-L6-v2");
    assert_eq!(local.path, None);
    assert_eq!(
        local.download_url.as_str(),
        "https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2/resolve/main/"
    );
    assert_eq!(local.threads, None);

    let text = r#"{memory: {embedder: {type: "local", model: "all-MiniLM-L12-v2", path: "~/models/l12", threads: 2}}}"#;
    let config = parse(Some(text), None, &home).unwrap();
    let Some(EmbedderConfig::Local(local)) = &config.memory.embedder else {
        panic!("{:?}", config.memory.embedder)
    };
    assert_eq!(local.path.as_deref(), Some(Path::new("/home/u/models/l12")));
    assert_eq!(local.threads, Some(2));
    assert!(local.download_url.as_str().contains("/all-MiniLM-L12-v2/"));

    for (text, path) in [
        (
            r#"{memory: {embedder: {type: "local", threads: 0}}}"#,
            "memory.embedder.threads",
        ),
        (
            r#"{memory: {embedder: {type: "local", model: "../etc"}}}"#,
            "memory.embedder.model",
        ),
        (
            r#"{memory: {embedder: {type: "local", downloadUrl: "ftp://x/"}}}"#,
            "memory.embedder.downloadUrl",
        ),
        (r#"{memory: {embedder: {type: "onnx"}}}"#, "memory.embedder.type"),
    ] {
        let err = parse(Some(text), None, &home).unwrap_err().to_string();
        assert!(err.starts_with(path), "{text}: {err}");
    }
    let err = parse(Some(r#"{memory: {embedder: {type: "onnx"}}}"#), None, &home).unwrap_err();
    assert!(err.to_string().contains("\"local\""), "{err}");
}

#[test]
fn syntax_errors_at_the_end_and_empty_keys_still_say_where() {
    // Found by the fuzzer: an unexpected end of input had no position (0:0),
    // and an unknown key "" at the root had an empty path.
    match parse(Some("\n  "), None, &env(&[])).unwrap_err() {
        ConfigError::Syntax { line, column, .. } => assert_eq!((line, column), (2, 3)),
        other => panic!("{other}"),
    }
    let err = parse(Some(r#"{"": null}"#), None, &env(&[])).unwrap_err();
    assert!(err.to_string().starts_with("<root>: unknown field ``"), "{err}");
}

#[test]
fn circuit_breakers_default_on_and_take_settings_or_false() {
    let text = r#"{providers: {
        a: {type: "openai"},
        b: {type: "openai", circuitBreaker: false},
        c: {type: "openai", circuitBreaker: {failures: 2, coolSeconds: 10}},
        d: {type: "openai", circuitBreaker: true},
    }}"#;
    let config = parse(Some(text), None, &env(&[])).unwrap();
    let breaker = |name: &str| config.providers[name].circuit_breaker;
    assert_eq!(breaker("a"), Some(CircuitBreakerConfig::default()));
    assert_eq!(breaker("b"), None);
    assert_eq!(
        breaker("c"),
        Some(CircuitBreakerConfig {
            failures: 2,
            cool: std::time::Duration::from_secs(10),
            max_cool: std::time::Duration::from_secs(300),
        })
    );
    assert_eq!(breaker("d"), Some(CircuitBreakerConfig::default()));
    for (settings, path) in [
        ("{failures: 0}", "providers.x.circuitBreaker.failures"),
        ("{coolSeconds: 0}", "providers.x.circuitBreaker.coolSeconds"),
        (
            "{coolSeconds: 60, maxCoolSeconds: 30}",
            "providers.x.circuitBreaker.maxCoolSeconds",
        ),
    ] {
        let text = format!(r#"{{providers: {{x: {{type: "openai", circuitBreaker: {settings}}}}}}}"#);
        let err = parse(Some(&text), None, &env(&[])).unwrap_err().to_string();
        assert!(err.starts_with(&format!("{path}:")), "{settings}: {err}");
    }
    let text = r#"{providers: {x: {type: "openai", circuitBreaker: {cool: 5}}}}"#;
    assert!(parse(Some(text), None, &env(&[])).is_err());
}

#[test]
fn bedrock_takes_a_region_and_an_endpoint_override() {
    let home = env(&[("HOME", "/home/u")]);
    let text = r#"{providers: {aws: {type: "bedrock"}, eu: {type: "bedrock", region: "eu-west-3"},
        test: {type: "bedrock", region: "us-west-2", baseUrl: "http://127.0.0.1:9000"}}}"#;
    let config = parse(Some(text), None, &home).unwrap();
    let aws = &config.providers["aws"];
    assert_eq!(aws.kind, ProviderKind::Bedrock);
    assert_eq!(aws.bedrock.as_ref().unwrap().region, None);
    let eu = &config.providers["eu"];
    assert_eq!(
        eu.base_url.as_str(),
        "https://bedrock-runtime.eu-west-3.amazonaws.com/"
    );
    assert!(eu.bedrock.as_ref().unwrap().endpoint.is_none());
    let test = config.providers["test"].bedrock.as_ref().unwrap();
    assert_eq!(test.endpoint.as_ref().unwrap().as_str(), "http://127.0.0.1:9000/");
    assert_eq!(test.region.as_deref(), Some("us-west-2"));

    for (text, path) in [
        (
            r#"{providers: {x: {type: "openai", region: "us-east-1"}}}"#,
            "providers.x.region",
        ),
        (
            r#"{providers: {x: {type: "bedrock", region: "us-east-1.evil.com/"}}}"#,
            "providers.x.region",
        ),
        (
            r#"{providers: {x: {type: "bedrock", headers: {"x-a": "b"}}}}"#,
            "providers.x.headers",
        ),
    ] {
        let err = parse(Some(text), None, &home).unwrap_err().to_string();
        assert!(err.starts_with(&format!("{path}:")), "{text}: {err}");
    }
}
