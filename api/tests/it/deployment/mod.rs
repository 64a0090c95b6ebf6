//! The docker-compose deployment, without a Docker engine: the compose file,
//! `.env.example`, the SearXNG settings and the Dockerfile are checked for
//! what a working, pinned and hardened stack needs, including that every
//! path Onyx writes in the container is on a volume; `stack` starts the same
//! topology from installed binaries.

mod stack;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

fn repo_file(path: &str) -> String {
    let full = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

pub fn compose() -> Value {
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
    "ONYX_MASTER_KEY",
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
        interpolate(services["surrealdb"]["image"].as_str().unwrap(), &|_| None),
        "surrealdb/surrealdb:v3.3.5",
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
pub fn interpolate(value: &str, dotenv: &dyn Fn(&str) -> Option<String>) -> String {
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
        let set = dotenv(name).filter(|v| !v.is_empty());
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

/// The pinned images: service, repository, the `.env` variable with its version.
const PINNED: &[(&str, &str, &str)] = &[
    ("surrealdb", "surrealdb/surrealdb", "SURREALDB_VERSION"),
    ("minio", "minio/minio", "MINIO_VERSION"),
    ("ollama", "ollama/ollama", "OLLAMA_VERSION"),
    ("ollama-pull", "ollama/ollama", "OLLAMA_VERSION"),
    ("searxng", "searxng/searxng", "SEARXNG_VERSION"),
];

#[test]
fn every_image_is_pinned_in_one_place_and_onyx_runs_read_only() {
    let compose = compose();
    let services = compose["services"].as_object().unwrap();
    let example = env_example();
    for (name, service) in services {
        let Some(image) = service["image"].as_str() else {
            continue;
        };
        if name == "onyx" {
            assert_eq!(image, "onyx:local", "built here");
            continue;
        }
        let (_, repository, variable) = PINNED
            .iter()
            .find(|(service, _, _)| service == name)
            .unwrap_or_else(|| panic!("{name} runs {image}, which is not pinned"));
        let version = &example[*variable];
        assert!(
            !version.is_empty() && version != "latest",
            "{variable}={version:?}"
        );
        assert_eq!(
            image,
            format!("{repository}:${{{variable}:-{version}}}"),
            "{name}: the version comes from .env, defaulting to .env.example's"
        );
    }
    let onyx = &services["onyx"];
    assert_eq!(
        onyx["read_only"], true,
        "the Onyx container's root filesystem is read-only"
    );
    assert!(
        onyx["tmpfs"].as_array().unwrap().contains(&json!("/tmp")),
        "{onyx}"
    );
}

/// The runtime stage of the Dockerfile (after the last `FROM`).
fn runtime_stage() -> String {
    let dockerfile = repo_file("Dockerfile");
    dockerfile[dockerfile.rfind("\nFROM ").unwrap()..].to_string()
}

/// Every `NAME=value` that the runtime stage's `ENV` instructions set.
fn image_env(runtime: &str) -> BTreeMap<String, String> {
    let joined = runtime.replace("\\\n", " ");
    joined
        .lines()
        .filter_map(|line| line.strip_prefix("ENV "))
        .flat_map(str::split_whitespace)
        .filter_map(|pair| pair.split_once('='))
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect()
}

fn is_within(path: &Path, dir: &Path) -> bool {
    path.starts_with(dir)
}

#[test]
fn everything_onyx_writes_in_the_container_is_on_a_volume() {
    let compose = compose();
    let onyx = &compose["services"]["onyx"];
    let runtime = runtime_stage();
    // The environment Onyx runs with: the image's ENV, then compose's (the
    // required secrets set, as a working .env has them; the rest defaulted).
    let mut env = image_env(&runtime);
    assert_eq!(env.get("HOME").map(String::as_str), Some("/home/onyx"), "{env:?}");
    let dotenv = |name: &str| REQUIRED_SECRETS.contains(&name).then(|| format!("{name}-value"));
    for (name, value) in onyx["environment"].as_object().unwrap() {
        env.insert(name.clone(), interpolate(value.as_str().unwrap(), &dotenv));
    }
    let lookup = |name: &str| env.get(name).cloned();
    // The config as the container reads it: ONYX_CONFIG, mounted from config/.
    let config_path = env["ONYX_CONFIG"].clone();
    let volumes: Vec<&str> = onyx["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let mounted_config = volumes
        .iter()
        .find_map(|v| v.strip_suffix(&format!(":{config_path}:ro")))
        .unwrap_or_else(|| panic!("{config_path} is not mounted read-only: {volumes:?}"));
    let text = repo_file(mounted_config.trim_start_matches("./"));
    let config = onyx::config::parse(Some(&text), Some(Path::new(&config_path)), &lookup).unwrap();

    // Named volumes (kept across a recreate) and the in-memory /tmp.
    let declared = compose["volumes"].as_object().unwrap();
    let named: Vec<PathBuf> = volumes
        .iter()
        .filter_map(|v| {
            let (source, target) = v.split_once(':')?;
            declared
                .contains_key(source)
                .then(|| PathBuf::from(target.split(':').next().unwrap()))
        })
        .collect();
    let tmpfs: Vec<PathBuf> = onyx["tmpfs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| PathBuf::from(t.as_str().unwrap()))
        .collect();
    let written = onyx::cli::written_paths(&config, &lookup);
    let data_dir = &config.storage.data_dir;
    assert_eq!(
        data_dir,
        Path::new("/home/onyx/data"),
        "ONYX_DATA_DIR from the image and compose"
    );
    for must in [
        "data dir",
        "master key (unless ONYX_MASTER_KEY is set)",
        "subscription sign-ins",
        "downloaded embedding models",
        "memory search snapshot",
        "agents' work folders",
        "an agent's workspace",
        "temporary files",
    ] {
        assert!(
            written.iter().any(|w| w.what == must),
            "{must} missing from {written:?}"
        );
    }
    for place in &written {
        let on_volume = named.iter().any(|dir| is_within(&place.path, dir));
        let in_memory = tmpfs.iter().any(|dir| is_within(&place.path, dir));
        if place.what == "temporary files" {
            assert!(
                in_memory,
                "{} ({}) is not a tmpfs: {tmpfs:?}",
                place.what,
                place.path.display()
            );
        } else {
            assert!(
                on_volume,
                "Onyx writes {} at {}, which is on no named volume ({named:?}): recreating the container would lose it",
                place.what,
                place.path.display()
            );
        }
    }
    // Nothing is written to the read-only HOME or WORKDIR itself.
    let workdir = runtime
        .lines()
        .find_map(|l| l.strip_prefix("WORKDIR "))
        .unwrap()
        .trim();
    for place in &written {
        assert!(
            place.path != Path::new(workdir) && place.path != Path::new(&env["HOME"]),
            "{place:?}"
        );
    }
    // Each volume's mount point exists in the image, owned by the onyx user,
    // so a new named volume starts writable by it.
    let setup = runtime.replace("\\\n", " ");
    for dir in &named {
        let dir = dir.display().to_string();
        assert!(
            setup
                .lines()
                .any(|l| l.contains("mkdir -p") && l.split_whitespace().any(|w| w == dir)),
            "the image makes {dir}"
        );
        assert!(
            setup.lines().any(|l| l.contains("chown -R onyx:onyx")
                && l.split_whitespace()
                    .any(|w| dir.starts_with(w) && w.starts_with('/'))),
            "the image gives {dir} to onyx"
        );
    }
    // The backups volume is where `docker compose exec onyx onyx backup /backups/…` writes.
    assert!(named.contains(&PathBuf::from("/backups")), "{named:?}");
}
