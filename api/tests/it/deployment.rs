//! The docker-compose deployment, without a Docker engine: the compose file,
//! `.env.example`, the SearXNG settings and the Dockerfile are checked for
//! what a working stack needs, and the same topology is started from
//! installed binaries — a SurrealDB server, an S3 server standing in for
//! MinIO, the fake Ollama — with `onyx` configured by
//! `config/onyx.compose.json5` through the environment the compose file sets.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use crate::harness::services::{S3_ACCESS_KEY, S3_SECRET_KEY, Service};
use crate::harness::*;
use serde_json::{Value, json};

fn repo_file(path: &str) -> String {
    let full = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

fn compose() -> Value {
    let yaml: serde_yaml::Value = serde_yaml::from_str(&repo_file("docker-compose.yml")).unwrap();
    serde_json::to_value(yaml).unwrap()
}

/// Every `${VAR…}` the text refers to, with the form it is used in.
fn variables(text: &str) -> BTreeMap<String, BTreeSet<char>> {
    let mut found: BTreeMap<String, BTreeSet<char>> = BTreeMap::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        rest = &rest[start + 2..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let form = match rest[name.len()..].chars().next() {
            Some(':') => rest[name.len() + 1..].chars().next().unwrap_or('}'),
            other => other.unwrap_or('}'),
        };
        found.entry(name).or_default().insert(form);
    }
    found
}

/// `.env.example` as a map (comments and blank lines skipped).
fn env_example() -> BTreeMap<String, String> {
    repo_file(".env.example")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
        .collect()
}

const REQUIRED_SECRETS: &[&str] = &[
    "ONYX_API_KEY",
    "SURREAL_PASS",
    "MINIO_ROOT_USER",
    "MINIO_ROOT_PASSWORD",
    "SEARXNG_SECRET",
];

#[test]
fn the_compose_file_describes_a_complete_healthy_stack() {
    let compose = compose();
    let services = compose["services"].as_object().unwrap();
    let names: BTreeSet<&str> = services.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        BTreeSet::from(["onyx", "surrealdb", "minio", "ollama", "ollama-pull", "searxng"])
    );
    for (name, service) in services {
        // Only Onyx publishes a port.
        assert_eq!(service.get("ports").is_some(), name == "onyx", "{name}: ports");
        assert_eq!(service["networks"], json!(["onyx"]), "{name}: one shared network");
        if name != "ollama-pull" {
            assert!(service["healthcheck"]["test"].is_array(), "{name}: healthcheck");
            assert_eq!(service["restart"], "unless-stopped", "{name}: restart");
        }
    }
    for dependency in ["surrealdb", "minio", "ollama", "searxng"] {
        assert_eq!(
            services["onyx"]["depends_on"][dependency]["condition"], "service_healthy",
            "onyx waits for {dependency}"
        );
    }
    assert_eq!(
        services["ollama-pull"]["depends_on"]["ollama"]["condition"],
        "service_healthy"
    );
    assert_eq!(services["ollama-pull"]["restart"], "no");
    // Persistent data lives in named volumes.
    for (service, volume) in [
        ("surrealdb", "surrealdb-data:/data"),
        ("minio", "minio-data:/data"),
        ("ollama", "ollama-models:/root/.ollama"),
    ] {
        assert!(
            services[service]["volumes"]
                .as_array()
                .unwrap()
                .contains(&json!(volume)),
            "{service} keeps {volume}"
        );
        let name = volume.split(':').next().unwrap();
        assert!(compose["volumes"].get(name).is_some(), "volume {name} declared");
    }
    assert!(
        services["onyx"]["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v.as_str().unwrap().starts_with("./config/onyx.compose.json5:"))
    );
    assert_eq!(
        services["surrealdb"]["image"], "surrealdb/surrealdb:v3.3.5",
        "SurrealDB 3, as tested"
    );
    assert!(
        services["surrealdb"]["command"].to_string().contains("--pass"),
        "authenticated"
    );
}

#[test]
fn secrets_have_no_defaults_and_every_variable_is_in_env_example() {
    let text = repo_file("docker-compose.yml");
    let used = variables(&text);
    let example = env_example();
    for (name, forms) in &used {
        assert!(
            example.contains_key(name),
            "{name} is used by docker-compose.yml but missing from .env.example"
        );
        if REQUIRED_SECRETS.contains(&name.as_str()) {
            assert_eq!(
                forms,
                &BTreeSet::from(['?']),
                "{name} must be required (${{{name}:?…}}) everywhere"
            );
        } else {
            assert!(!forms.contains(&'?') || name == "MINIO_ROOT_USER", "{name}");
        }
    }
    for secret in REQUIRED_SECRETS {
        assert!(used.contains_key(*secret), "{secret} unused");
        if *secret != "MINIO_ROOT_USER" {
            assert_eq!(
                example[*secret], "",
                "{secret} ships without a value in .env.example"
            );
        }
    }
    // The onyx config reads only what the compose file gives it.
    let onyx_env: BTreeSet<String> = compose()["services"]["onyx"]["environment"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    for name in variables(&repo_file("config/onyx.compose.json5")).keys() {
        assert!(
            onyx_env.contains(name),
            "config/onyx.compose.json5 reads ${name}, which compose does not set"
        );
    }
}

#[test]
fn searxng_answers_json_and_the_dockerfile_builds_a_small_non_root_image() {
    let settings: serde_yaml::Value =
        serde_yaml::from_str(&repo_file("config/searxng/settings.yml")).unwrap();
    let formats = serde_json::to_value(&settings["search"]["formats"]).unwrap();
    assert!(formats.as_array().unwrap().contains(&json!("json")), "{formats}");

    let dockerfile = repo_file("Dockerfile");
    let stages: Vec<&str> = dockerfile.lines().filter(|l| l.starts_with("FROM ")).collect();
    assert!(
        stages.iter().any(|s| s.contains("node:")),
        "a Node stage builds the UI: {stages:?}"
    );
    assert!(
        dockerfile.contains("cargo chef cook"),
        "dependencies are cached with cargo-chef"
    );
    assert!(
        stages.last().unwrap().contains("debian:") && stages.last().unwrap().contains("slim"),
        "{stages:?}"
    );
    let runtime = &dockerfile[dockerfile.rfind("FROM ").unwrap()..];
    assert!(
        runtime
            .lines()
            .any(|l| l.starts_with("USER ") && !l.contains("root")),
        "runs as non-root"
    );
    assert!(runtime.contains("HEALTHCHECK") && runtime.contains("/health"));
    assert!(runtime.contains("COPY config/"), "the image carries config/");
    // The subscription CLIs, at the versions the CLI suite tests against.
    let pinned: Value = serde_json::from_str(&repo_file("tests/cli/package.json")).unwrap();
    for (package, arg) in [
        ("@anthropic-ai/claude-code", "CLAUDE_CODE_VERSION"),
        ("@openai/codex", "CODEX_VERSION"),
        ("@github/copilot", "COPILOT_VERSION"),
    ] {
        let version = pinned["dependencies"][package].as_str().unwrap();
        assert!(
            runtime.contains(&format!("ARG {arg}={version}")),
            "the image pins {package} {version} as tests/cli does"
        );
        assert!(
            runtime.contains(&format!("\"{package}@${{{arg}}}\"")),
            "the image installs {package}"
        );
    }
    assert!(
        runtime.contains("npm install -g"),
        "the CLIs are installed globally"
    );
    // Every path the Dockerfile copies from the build context exists.
    for line in dockerfile
        .lines()
        .filter(|l| l.starts_with("COPY ") && !l.contains("--from="))
    {
        let parts: Vec<&str> = line.split_whitespace().collect();
        for source in &parts[1..parts.len() - 1] {
            let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join(source);
            assert!(path.exists() || *source == ".", "COPY source {source} is missing");
        }
    }
}

/// Resolves compose's `${VAR}`, `${VAR:-default}` and `${VAR:?message}` from `dotenv`.
fn interpolate(value: &str, dotenv: &BTreeMap<&str, String>) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find('}').unwrap() + start;
        let inner = &rest[start + 2..end];
        let (name, fallback) = match inner.split_once(":-") {
            Some((name, fallback)) => (name, Some(fallback)),
            None => (inner.split(":?").next().unwrap(), None),
        };
        let set = dotenv.get(name).filter(|v| !v.is_empty()).cloned();
        out.push_str(&set.or(fallback.map(String::from)).unwrap_or_else(|| {
            assert!(
                !inner.contains(":?"),
                "compose would refuse to start without {name}"
            );
            String::new()
        }));
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

#[tokio::test]
async fn the_compose_topology_serves_chat_sessions_and_memory_from_installed_binaries() {
    let fakes = Fakes::start().await;
    let (surreal, s3) = (Service::surreal().await, Service::s3().await);
    // What a user's .env would hold (the test servers' credentials).
    let dotenv = BTreeMap::from([
        ("ONYX_API_KEY", ONYX_KEY.to_string()),
        ("SURREAL_PASS", "root".to_string()),
        ("MINIO_ROOT_USER", S3_ACCESS_KEY.to_string()),
        ("MINIO_ROOT_PASSWORD", S3_SECRET_KEY.to_string()),
        ("SEARXNG_SECRET", "test-secret".to_string()),
        ("ONYX_DEFAULT_MODEL", "ollama/fake-echo".to_string()),
    ]);
    // The services' names on the compose network, and where they run here.
    let hosts = [
        ("ws://surrealdb:8000", format!("ws://{}", surreal.addr)),
        ("http://minio:9000", s3.url()),
        ("http://ollama:11434", fakes.ollama.url()),
        ("http://searxng:8080", fakes.openai.url()),
        (
            "/etc/onyx/onyx.compose.json5",
            format!("{}/../config/onyx.compose.json5", env!("CARGO_MANIFEST_DIR")),
        ),
    ];
    let compose = compose();
    let env: Vec<(String, String)> = compose["services"]["onyx"]["environment"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, value)| {
            let mut value = interpolate(value.as_str().unwrap(), &dotenv);
            for (inside, here) in &hosts {
                value = value.replace(inside, here);
            }
            (name.clone(), value)
        })
        .collect();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();

    let onyx = Onyx::start(None, &env).await;
    let health = onyx.health().await;
    assert_eq!(health["status"], "ok", "{health}");
    let kinds = pluck(&health["dependencies"], "/kind");
    assert!(
        kinds.iter().any(|k| k.contains("surrealdb")) && kinds.iter().any(|k| k.contains("s3")),
        "{health}"
    );
    assert!(kinds.iter().any(|k| k == "embedder:ollama"), "{health}");

    // Chat through the default agent on Ollama; the session is kept.
    let response = onyx
        .post("/v1/chat/completions")
        .json(&json!({"model": "onyx:main", "messages": [{"role": "user", "content": "hello compose"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let session = session_id(&response);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], "echo: hello compose");

    // Memory: a note written through the API is found by hybrid search.
    let note = json!({"content": "The compose stack keeps its backups on the NAS in the garage.", "target": "memory"});
    let (status, body) = reply(onyx.post("/v1/memory").json(&note)).await;
    assert_eq!(status, 200, "{body}");
    let hits = onyx
        .get_json("/v1/memory/search?q=where%20are%20the%20backups&mode=hybrid")
        .await;
    assert!(
        hits["data"][0]["snippet"]
            .as_str()
            .unwrap_or_default()
            .contains("NAS"),
        "{hits}"
    );

    // A restart (a new container) finds the session in SurrealDB and the bucket.
    let (_, logs) = onyx.stop().await;
    assert!(
        logs.contains("created bucket"),
        "Onyx creates its buckets in MinIO: {logs}"
    );
    let onyx = Onyx::start(None, &env).await;
    let kept = onyx.get_json(&format!("/v1/sessions/{session}")).await;
    assert!(kept["messages"].to_string().contains("hello compose"), "{kept}");
}
