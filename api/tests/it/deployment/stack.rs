//! The compose topology from installed binaries: a SurrealDB server, an S3
//! server standing in for MinIO, the fake Ollama, with `onyx` configured by
//! `config/onyx.compose.json5` through the environment the compose file
//! sets from a `.env`. A recreate keeps only what compose keeps: the data-dir
//! volume, the database and the bucket.

use std::collections::BTreeMap;

use onyx_test_fakes::DEFAULT_KEY;
use serde_json::{Value, json};

use super::{compose, interpolate};
use crate::harness::services::{S3_ACCESS_KEY, S3_SECRET_KEY, Service};
use crate::harness::*;

/// A master key as `openssl rand -base64 32` makes one.
const MASTER_KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
const OTHER_MASTER_KEY: &str = "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=";

pub struct Stack {
    pub fakes: Fakes,
    pub surreal: Service,
    s3: Option<Service>,
    /// The `onyx-data` volume.
    pub data_volume: tempfile::TempDir,
    /// What the user's `.env` holds.
    pub dotenv: BTreeMap<&'static str, String>,
}

impl Stack {
    pub async fn start() -> Self {
        let fakes = Fakes::start().await;
        let (surreal, s3) = (Service::surreal().await, Service::s3().await);
        let dotenv = BTreeMap::from([
            ("ONYX_API_KEY", ONYX_KEY.to_string()),
            ("ONYX_MASTER_KEY", MASTER_KEY.to_string()),
            ("SURREAL_PASS", "root".to_string()),
            ("MINIO_ROOT_USER", S3_ACCESS_KEY.to_string()),
            ("MINIO_ROOT_PASSWORD", S3_SECRET_KEY.to_string()),
            ("SEARXNG_SECRET", "test-secret".to_string()),
            ("ONYX_DEFAULT_MODEL", "ollama/fake-echo".to_string()),
        ]);
        Self {
            fakes,
            surreal,
            s3: Some(s3),
            data_volume: tempfile::tempdir().unwrap(),
            dotenv,
        }
    }

    fn s3(&self) -> &Service {
        self.s3.as_ref().unwrap()
    }

    /// The environment compose gives the onyx container, with the services'
    /// names on the compose network and the volume replaced by where they are here.
    pub fn env(&self) -> Vec<(String, String)> {
        let hosts = [
            ("ws://surrealdb:8000", format!("ws://{}", self.surreal.addr)),
            ("http://minio:9000", self.s3().url()),
            ("http://ollama:11434", self.fakes.ollama.url()),
            ("http://searxng:8080", self.fakes.openai.url()),
            (
                "/etc/onyx/onyx.compose.json5",
                format!("{}/../config/onyx.compose.json5", env!("CARGO_MANIFEST_DIR")),
            ),
            ("/home/onyx/data", self.data_volume.path().display().to_string()),
        ];
        let dotenv = |name: &str| self.dotenv.get(name).cloned();
        compose()["services"]["onyx"]["environment"]
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
            .collect()
    }

    /// MinIO's container recreated: the server stops and starts on its volume.
    pub async fn recreate_minio(&mut self) {
        let (dir, addr) = self.s3.take().unwrap().stop().await;
        self.s3 = Some(Service::s3_at(dir, addr).await);
    }
}

pub fn as_refs(env: &[(String, String)]) -> Vec<(&str, &str)> {
    env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

#[tokio::test]
async fn the_compose_topology_serves_chat_sessions_and_memory_from_installed_binaries() {
    let stack = Stack::start().await;
    let env = stack.env();
    let env = as_refs(&env);
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

#[tokio::test]
async fn recreating_the_containers_keeps_a_provider_added_through_the_api() {
    let mut stack = Stack::start().await;
    let env = stack.env();
    let onyx = Onyx::start(None, &as_refs(&env)).await;
    let spec = json!({"name": "hosted", "type": "openai",
        "baseUrl": format!("{}/v1", stack.fakes.openai.url()), "apiKey": DEFAULT_KEY});
    let (status, created) = reply(onyx.post("/v1/providers").json(&spec)).await;
    assert_eq!(status, 201, "{created}");
    let ask = json!({"model": "hosted/fake-echo", "messages": [{"role": "user", "content": "still there?"}]});
    let (status, body) = onyx.chat(ask.clone()).await;
    assert_eq!(status, 200, "{body}");
    let response = onyx
        .post("/v1/chat/completions")
        .json(&json!({"model": "onyx:main", "messages": [{"role": "user", "content": "remember this chat"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let session = session_id(&response);

    // `docker compose up -d --build`: every container is new; only the
    // volumes (the data dir, SurrealDB's, MinIO's) and .env are kept.
    let (container_filesystem, _) = onyx.stop().await;
    drop(container_filesystem);
    assert!(
        !stack.data_volume.path().join("master.key").exists(),
        "the master key comes from .env, so no key file is made"
    );
    stack.recreate_minio().await;
    let onyx = Onyx::start(None, &as_refs(&env)).await;
    let (status, body) = onyx.chat(ask.clone()).await;
    assert_eq!(
        status, 200,
        "the sealed provider opens with the same .env: {body}"
    );
    assert_eq!(body["choices"][0]["message"]["content"], "echo: still there?");
    let kept = onyx.get_json(&format!("/v1/sessions/{session}")).await;
    assert!(
        kept["messages"].to_string().contains("remember this chat"),
        "{kept}"
    );
    let (container_filesystem, _) = onyx.stop().await;
    drop(container_filesystem);

    // What the key protects: with another key in .env the provider's
    // sealed API key cannot be opened, and Onyx says so instead of calling out.
    stack
        .dotenv
        .insert("ONYX_MASTER_KEY", OTHER_MASTER_KEY.to_string());
    let onyx = Onyx::start(None, &as_refs(&stack.env())).await;
    let (status, body) = onyx.chat(ask).await;
    assert_ne!(status, 200, "{body}");
    let providers = onyx.get_json("/v1/providers").await;
    let hosted = providers["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "hosted")
        .cloned()
        .unwrap_or_else(|| panic!("{providers}"));
    assert!(
        hosted["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{hosted}"
    );
}
