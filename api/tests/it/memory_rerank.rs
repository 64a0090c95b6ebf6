//! The reranking stage (`memory.reranker`) against a server that speaks the
//! Cohere / Jina rerank API and scores with a real model
//! (`tests/embedder/server.py`: all-MiniLM-L6-v2 similarity; no cross-encoder
//! ships offline): hits come back in its order with its scores, and a
//! reranker that is down leaves the fused order with a note.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use crate::harness::*;
use serde_json::{Value, json};

struct ModelServer(Child);

impl Drop for ModelServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `tests/embedder/server.py`; its base URL.
fn model_server() -> (ModelServer, String) {
    let python =
        std::env::var("MINILM_PYTHON").expect("MINILM_PYTHON: a Python with the model (tests/run sets it)");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/embedder");
    let mut child = Command::new(python)
        .args(["server.py", "--port", "0"])
        .current_dir(dir)
        .env("HF_HUB_OFFLINE", "1")
        .env("OPENBLAS_NUM_THREADS", "1")
        .stdout(Stdio::piped())
        .spawn()
        .expect("start tests/embedder/server.py");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("server.py said {line:?}"))
        .to_string();
    (ModelServer(child), url)
}

const NOTES: &str = "# Memory

## Park
The dog park closes at dusk: bring the dog leash, the dog whistle and the dog bowl.

## Vet
My dog Rex needs his rabies shots every spring at the clinic on Elm Street.

## Garden
The tomatoes need water every evening in July.
";

fn config(reranker_url: &str) -> String {
    TestConfig::empty()
        .set("gateway.auth.apiKeys", json!([ONYX_KEY]))
        .set(
            "memory",
            json!({
                "embedder": { "type": "none" },
                "reranker": { "url": reranker_url, "model": "all-minilm", "candidates": 10 },
            }),
        )
        .build()
}

async fn search(onyx: &Onyx, query: &str) -> Value {
    let (code, hits) = reply(
        onyx.get("/v1/memory/search")
            .query(&[("q", query), ("agent", "main")]),
    )
    .await;
    assert_eq!(code, 200, "{hits}");
    hits
}

async fn write_notes(onyx: &Onyx) {
    crate::local_embedder::write_notes(onyx, NOTES).await;
    poll_until(secs(20), async || {
        let status = onyx.get_json("/v1/memory/status").await;
        (status["search_index"]["state"] == "ready").then_some(())
    })
    .await
    .expect("the search index loads");
}

/// Each hit's section, by the first line of the notes it covers (`## Vet`).
fn headings(hits: &Value) -> Vec<String> {
    let lines: Vec<&str> = NOTES.lines().collect();
    hits["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            let start = h["start_line"].as_u64().unwrap() as usize;
            lines[start - 1].trim_start_matches('#').trim().to_string()
        })
        .collect()
}

#[tokio::test]
async fn hits_follow_the_rerankers_order_and_a_failing_one_leaves_the_fused_order() {
    let (_server, url) = model_server();
    let query = "when does my dog need his shots";

    // The same notes without a reranker that answers: the fused (BM25) order,
    // where the chunk saying "dog" four times wins, and a note saying why.
    let down = Onyx::start(Some(&config("http://127.0.0.1:9/v1/rerank")), &[]).await;
    write_notes(&down).await;
    let fused = search(&down, query).await;
    assert_eq!(fused["mode"], "text", "{fused}");
    assert!(
        fused["note"]
            .as_str()
            .unwrap_or_default()
            .contains("the reranker is unavailable"),
        "{fused}"
    );
    let fused_order = headings(&fused);
    assert!(fused_order.len() >= 2, "{fused}");

    let onyx = Onyx::start(Some(&config(&format!("{url}/v1/rerank"))), &[]).await;
    write_notes(&onyx).await;
    let reranked = search(&onyx, query).await;
    // (The only note is full-text search's: no embedder is configured.)
    assert!(
        !reranked["note"].as_str().unwrap_or_default().contains("reranker"),
        "{reranked}"
    );
    let order = headings(&reranked);
    assert_eq!(
        order.first().map(String::as_str),
        Some("Vet"),
        "the answer first: {reranked}"
    );
    let mut sorted = fused_order.clone();
    sorted.sort();
    let mut same = order.clone();
    same.sort();
    assert_eq!(same, sorted, "the same hits, reordered: {fused} {reranked}");

    // The scores are the reranker's: asked directly about the same chunks
    // (heading, then the lines), it gives the same, best first.
    let data = reranked["data"].as_array().unwrap();
    let lines: Vec<&str> = NOTES.lines().collect();
    let documents: Vec<String> = data
        .iter()
        .map(|h| {
            let (start, end) = (
                h["start_line"].as_u64().unwrap() as usize,
                h["end_line"].as_u64().unwrap() as usize,
            );
            let text = lines[start - 1..end].join("\n");
            match h["heading"].as_str().unwrap_or_default() {
                "" => text,
                heading => format!("{heading}\n{text}"),
            }
        })
        .collect();
    let direct: Value = reqwest::Client::new()
        .post(format!("{url}/v1/rerank"))
        .json(&json!({"model": "all-minilm", "query": query, "documents": documents}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let results = direct["results"].as_array().unwrap();
    assert_eq!(results.len(), data.len(), "{direct}");
    for (rank, (hit, result)) in data.iter().zip(results).enumerate() {
        assert_eq!(
            result["index"].as_u64(),
            Some(rank as u64),
            "same order: {direct} {reranked}"
        );
        let (ours, theirs) = (
            hit["score"].as_f64().unwrap(),
            result["relevance_score"].as_f64().unwrap(),
        );
        assert!((ours - theirs).abs() < 1e-3, "{ours} vs {theirs}");
    }
}

#[tokio::test]
async fn a_reranker_without_a_model_or_with_a_bad_url_stops_startup_naming_the_key() {
    for (reranker, key) in [
        (
            json!({ "url": "http://127.0.0.1:1/rerank", "model": "" }),
            "memory.reranker.model",
        ),
        (json!({ "url": "not a url", "model": "m" }), "memory.reranker.url"),
        (
            json!({ "url": "http://127.0.0.1:1/rerank", "model": "m", "candidates": 0 }),
            "memory.reranker.candidates",
        ),
    ] {
        let config = TestConfig::empty()
            .set("memory", json!({ "reranker": reranker }))
            .build();
        let (code, stderr) = Onyx::try_start(Some(&config), &[]).await.err().expect("refused");
        assert_ne!(code, Some(0));
        assert!(stderr.contains(key), "{key}: {stderr}");
    }
}
