//! The built-in local embedder in `onyx serve`: the model downloaded once on
//! first use (from a local HTTP server here, with percentages in the log) and
//! reused after a restart with no server, or read from a configured directory;
//! either way memory search finds paraphrases. Needs the real all-MiniLM-L6-v2
//! files in `MINILM_DIR` (set by `tests/run`).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::harness::*;

fn model_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("MINILM_DIR").map(PathBuf::from);
    if dir.is_none() {
        eprintln!("MINILM_DIR is not set: the local embedder test did not run (tests/run sets it)");
    }
    dir
}

fn config(embedder: Value) -> String {
    TestConfig::empty()
        .set("gateway.auth.apiKeys", json!([ONYX_KEY]))
        .set(
            "memory",
            json!({ "embedder": embedder, "syncIntervalSeconds": 1 }),
        )
        .build()
}

/// Serves the files of `dir` under `/files/`; counts the requests.
async fn model_server(dir: PathBuf) -> (String, Arc<AtomicUsize>) {
    let served = Arc::new(AtomicUsize::new(0));
    let app = axum::Router::new()
        .route(
            "/files/{*name}",
            axum::routing::get(
                async |State((dir, served)): State<(PathBuf, Arc<AtomicUsize>)>, Path(name): Path<String>| {
                    served.fetch_add(1, Ordering::Relaxed);
                    std::fs::read(dir.join(name)).map_err(|_| StatusCode::NOT_FOUND)
                },
            ),
        )
        .with_state((dir, served.clone()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/files/", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, served)
}

const NOTES: &str = "# Memory

## Pets
My dog Rex needs his rabies vaccination every spring at the vet on Elm Street.

## Kitchen
Grandma's lasagna recipe uses fresh garlic and a slow oven.

## Work
The quarterly roadmap review with my manager is on Friday.
";

/// Writes `notes` as main's MEMORY.md.
pub(crate) async fn write_notes(onyx: &Onyx, notes: &str) {
    let written = onyx
        .put("/v1/memory/files/main/MEMORY.md")
        .header("content-type", "text/markdown")
        .body(notes.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(written.status(), 200);
}

/// Waits for the model and the vectors, then asks in other words than the notes use.
async fn finds_paraphrases(onyx: &Onyx) {
    write_notes(onyx, NOTES).await;
    let status = poll_until(secs(180), async || {
        let status = onyx.get_json("/v1/memory/status").await;
        (status["embedder"]["ready"] == true && status["pending"] == 0 && status["chunks"].as_u64() > Some(0))
            .then_some(status)
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "the local embedder never got ready: {}",
            onyx.stderr.lock().unwrap()
        )
    });
    assert_eq!(status["embedder"]["kind"], "local", "{status}");
    assert_eq!(status["embedder"]["model"], "all-MiniLM-L6-v2", "{status}");
    assert_eq!(status["embedder"]["dimensions"], 384, "{status}");
    for (query, heading) in [
        ("when is my puppy due for his shots", "Pets"),
        ("what goes into the pasta bake my grandmother makes", "Kitchen"),
    ] {
        let (code, hits) = reply(onyx.get("/v1/memory/search").query(&[
            ("q", query),
            ("mode", "vector"),
            ("agent", "main"),
        ]))
        .await;
        assert_eq!(code, 200, "{hits}");
        assert_eq!(hits["mode"], "vector", "{hits}");
        let top = hits["data"][0]["snippet"].as_str().unwrap_or_default();
        assert!(top.contains(&format!("## {heading}")), "{query}: {hits}");
    }
    let embedder = dependency(&onyx.health().await, "embedder");
    assert_eq!(embedder["status"], "up", "{embedder}");
}

#[tokio::test]
async fn the_model_is_downloaded_once_with_progress_and_reused_after_a_restart() {
    let Some(dir) = model_dir() else { return };
    let (url, served) = model_server(dir).await;
    let onyx = Onyx::start(Some(&config(json!({ "type": "local", "downloadUrl": url }))), &[]).await;
    finds_paraphrases(&onyx).await;
    let fetched = served.load(Ordering::Relaxed);
    assert!(fetched >= 3, "{fetched} files fetched");
    let (home, logs) = onyx.stop().await;
    for percent in ["0%", "50%", "100%"] {
        assert!(
            logs.contains(&format!(
                "downloading the local embedding model: {percent} of 90 MB"
            )),
            "no {percent} line: {logs}"
        );
    }
    let models = home.path().join("data/models/all-MiniLM-L6-v2");
    assert!(models.join("model.safetensors").is_file());
    assert!(!models.join("model.safetensors.part").exists());

    // Restarted with the download server unreachable: the files on disk serve.
    let onyx = Onyx::start_in(
        home,
        Some(&config(
            json!({ "type": "local", "downloadUrl": "http://127.0.0.1:9/" }),
        )),
        &[],
    )
    .await;
    let search = poll_until(secs(180), async || {
        let (_, hits) = reply(onyx.get("/v1/memory/search").query(&[
            ("q", "vet appointment for the dog"),
            ("mode", "vector"),
            ("agent", "main"),
        ]))
        .await;
        (hits["mode"] == "vector").then_some(hits)
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "no vector search after the restart: {}",
            onyx.stderr.lock().unwrap()
        )
    });
    let top = search["data"][0]["snippet"].as_str().unwrap_or_default();
    assert!(top.contains("## Pets"), "{search}");
    assert_eq!(served.load(Ordering::Relaxed), fetched, "nothing fetched again");
}

#[tokio::test]
async fn a_configured_model_directory_is_used_as_it_is() {
    let Some(dir) = model_dir() else { return };
    let onyx = Onyx::start(
        Some(&config(json!({ "type": "local", "path": dir, "threads": 1 }))),
        &[],
    )
    .await;
    finds_paraphrases(&onyx).await;
    assert!(
        !onyx.dir.path().join("data/models").exists(),
        "nothing downloaded"
    );

    // A directory without the files: the embedder is down and says what lacks.
    let empty = tempfile::tempdir().unwrap();
    let onyx = Onyx::start(
        Some(&config(json!({ "type": "local", "path": empty.path() }))),
        &[],
    )
    .await;
    let detail = poll_until(secs(30), async || {
        let embedder = dependency(&onyx.health().await, "embedder");
        (embedder["status"] == "down").then(|| embedder["detail"].as_str().unwrap_or_default().to_string())
    })
    .await
    .unwrap_or_else(|| panic!("the embedder never went down: {}", onyx.stderr.lock().unwrap()));
    assert!(
        detail.contains("lacks config.json, tokenizer.json, model.safetensors"),
        "{detail}"
    );
}

/// No `memory.embedder` and no provider: a fresh install fetches the built-in
/// all-MiniLM-L6-v2 once (from `ONYX_LOCAL_MODEL_URL` here, Hugging Face by
/// default) and searches hybrid without any configuration.
#[tokio::test]
async fn a_fresh_install_fetches_the_built_in_model_and_searches_hybrid() {
    let dir = model_dir().expect("MINILM_DIR: the real model's files (tests/run sets it)");
    let (url, served) = model_server(dir).await;
    let config = TestConfig::empty()
        .set("gateway.auth.apiKeys", json!([ONYX_KEY]))
        .build();
    let onyx = Onyx::start(Some(&config), &[("ONYX_LOCAL_MODEL_URL", url.as_str())]).await;
    finds_paraphrases(&onyx).await;
    assert!(served.load(Ordering::Relaxed) >= 3, "the model was fetched");
    let (code, hits) = reply(
        onyx.get("/v1/memory/search")
            .query(&[("q", "puppy shots"), ("agent", "main")]),
    )
    .await;
    assert_eq!(code, 200, "{hits}");
    assert_eq!(hits["mode"], "hybrid", "the default mode runs both legs: {hits}");
    let embedder = dependency(&onyx.health().await, "embedder");
    assert_eq!(embedder["kind"], "embedder:local", "{embedder}");
    let logs = onyx.stderr.lock().unwrap().clone();
    assert!(
        logs.contains("downloading the local embedding model: 100% of 90 MB"),
        "the download shows its progress: {logs}"
    );
}

/// While the built-in model cannot be fetched (offline), memory search is
/// full text with a note saying why, and `/health` says so without calling
/// the gateway degraded; `type: "none"` turns embeddings off altogether.
#[tokio::test]
async fn without_its_model_a_fresh_install_searches_full_text_and_says_why() {
    let config = TestConfig::empty()
        .set("gateway.auth.apiKeys", json!([ONYX_KEY]))
        .build();
    // The harness points the download at a closed port.
    let onyx = Onyx::start(Some(&config), &[]).await;
    let noted = poll_until(secs(60), async || {
        let health = onyx.health().await;
        let detail = dependency(&health, "embedder")["detail"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        detail.contains("not available yet").then_some(health)
    })
    .await;
    let Some(health) = noted else {
        panic!("no note about the missing model: {}", onyx.health().await);
    };
    let embedder = dependency(&health, "embedder");
    assert_eq!(embedder["status"], "disabled", "{embedder}");
    assert_eq!(
        health["status"], "ok",
        "a missing default model is no fault: {health}"
    );
    let detail = embedder["detail"].as_str().unwrap();
    assert!(
        detail.contains("all-MiniLM-L6-v2")
            && detail.contains("full-text (BM25) only")
            && detail.contains("127.0.0.1:9"),
        "{detail}"
    );
    // Writing works without the model.
    write_notes(&onyx, NOTES).await;
    let (code, hits) = reply(
        onyx.get("/v1/memory/search")
            .query(&[("q", "rabies vaccination"), ("agent", "main")]),
    )
    .await;
    assert_eq!(code, 200, "{hits}");
    assert_eq!(hits["mode"], "text", "{hits}");
    assert!(hits["note"].as_str().is_some_and(|n| !n.is_empty()), "{hits}");
    assert!(
        hits["data"][0]["snippet"]
            .as_str()
            .unwrap_or_default()
            .contains("rabies"),
        "{hits}"
    );

    let off = TestConfig::empty()
        .set("gateway.auth.apiKeys", json!([ONYX_KEY]))
        .set("memory", json!({ "embedder": { "type": "none" } }))
        .build();
    let onyx = Onyx::start(Some(&off), &[]).await;
    let embedder = dependency(&onyx.health().await, "embedder");
    assert_eq!(embedder["kind"], "embedder:none", "{embedder}");
    assert_eq!(embedder["status"], "disabled", "{embedder}");
}
