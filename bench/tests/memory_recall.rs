//! A slice of the memory-recall dataset (one month of daily logs, MEMORY.md and a
//! runbook; 40 questions) with the real all-MiniLM-L6-v2 (`tests/embedder/server.py`):
//! hybrid search recalls at least what its better leg does, and each leg adds to it.
//!
//! Needs a Python with the model (`tests/run` sets up `tests/.venv`): set
//! `MINILM_PYTHON` to it. Without it the test says so and checks nothing, so a plain
//! `cargo test` runs on machines without Python; `tests/run` sets it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use onyx::config::ProviderKind;
use onyx::memory::Mode;
use onyx_bench::eval::EmbedderSpec;
use onyx_bench::recall::{self, Dataset};

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the model server; its URL.
fn start(python: &str) -> (Server, String) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/embedder");
    let mut child = Command::new(python)
        .args(["server.py", "--port", "0"])
        .current_dir(dir)
        .env("HF_HUB_OFFLINE", "1")
        // Requests come one at a time; more BLAS threads only contend on 2 cores.
        .env("OPENBLAS_NUM_THREADS", "1")
        .env("OMP_NUM_THREADS", "1")
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
    (Server(child), url)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hybrid_recalls_at_least_its_better_leg_with_the_real_model() {
    let Ok(python) = std::env::var("MINILM_PYTHON") else {
        eprintln!("MINILM_PYTHON is not set: the real-model recall slice did not run (tests/run runs it)");
        return;
    };
    let (_server, url) = start(&python);
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/memory-recall");
    let dataset = Dataset::load(&data, true).unwrap();
    assert!(dataset.questions.len() >= 30, "{}", dataset.questions.len());
    let spec = EmbedderSpec {
        kind: ProviderKind::Ollama,
        url: url::Url::parse(&url).unwrap(),
        model: "all-minilm".into(),
        api_key: None,
        dimensions: None,
    };
    let work = tempfile::tempdir().unwrap();
    let metrics = recall::evaluate(
        &dataset,
        Some(spec),
        work.path(),
        Default::default(),
        &|_, _, _| {},
    )
    .await
    .unwrap();
    let table = recall::table(&metrics);
    eprintln!("{table}");
    let at5 = |mode| recall::of(&metrics, mode, "all").unwrap().recall[1];
    let (text, vector, hybrid) = (at5(Mode::Text), at5(Mode::Vector), at5(Mode::Hybrid));
    assert!(!table.contains("ran as"), "every mode ran as asked: {table}");
    assert!(hybrid >= text.max(vector), "hybrid below its better leg: {table}");
    // Each leg matters: within ten hits hybrid beats either alone (at five the
    // 40-question slice moves in steps of 2.5 points; the full set: +8 points).
    let at10 = |mode| recall::of(&metrics, mode, "all").unwrap().recall[2];
    assert!(
        at10(Mode::Hybrid) > at10(Mode::Text) && at10(Mode::Hybrid) > at10(Mode::Vector),
        "{table}"
    );
    // Paraphrases share few words with their answer: the vector leg carries them.
    let paraphrase = |mode| recall::of(&metrics, mode, "paraphrase").unwrap().recall[1];
    assert!(paraphrase(Mode::Vector) > paraphrase(Mode::Text), "{table}");
}
