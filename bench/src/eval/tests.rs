//! The retrieval-quality harness on its shipped dataset, against the fake
//! Ollama's topic-aware embeddings: every leg answers the questions it should
//! and hybrid answers them all.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use crate::eval::{self, EmbedderSpec};
use onyx::config::ProviderKind;
use onyx::memory::Mode;

#[tokio::test]
async fn the_shipped_dataset_shows_what_each_leg_answers() {
    let ollama = onyx_test_fakes::ollama::start(0).await.unwrap();
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/memory-eval");
    let corpus = eval::load_corpus(&data.join("corpus.jsonl")).unwrap();
    let queries = eval::load_queries(&data.join("queries.jsonl"), None).unwrap();
    let work = tempfile::tempdir().unwrap();
    let spec = EmbedderSpec {
        kind: ProviderKind::Ollama,
        url: url::Url::parse(&ollama.url()).unwrap(),
        model: "all-minilm".into(),
        api_key: None,
        dimensions: Some(128),
    };
    let metrics = eval::evaluate(&corpus, &queries, Some(spec.into()), work.path(), &|_, _, _| {})
        .await
        .unwrap();
    let table = eval::table(&metrics);
    let recall5 = |mode, kind| eval::of_kind(&metrics, mode, kind).unwrap().recall[1];

    assert_eq!(recall5(Mode::Text, "identifier"), 1.0, "{table}");
    assert_eq!(recall5(Mode::Text, "paraphrase"), 0.0, "no shared words: {table}");
    assert!(recall5(Mode::Vector, "paraphrase") >= 0.9, "{table}");
    assert!(recall5(Mode::Vector, "identifier") < 0.5, "{table}");
    let hybrid = eval::overall(&metrics, Mode::Hybrid).unwrap();
    let text = eval::overall(&metrics, Mode::Text).unwrap();
    let vector = eval::overall(&metrics, Mode::Vector).unwrap();
    assert!(hybrid.recall[1] >= 0.95, "{table}");
    assert!(
        hybrid.recall[1] > text.recall[1] && hybrid.recall[1] > vector.recall[1],
        "{table}"
    );
    assert!(hybrid.mrr >= 0.9, "{table}");
    assert!(
        table.contains("| hybrid |") && table.contains("| paraphrase |"),
        "{table}"
    );

    // Without an embedder, only text runs, and the table says so.
    let work = tempfile::tempdir().unwrap();
    let metrics = eval::evaluate(&corpus, &queries, None, work.path(), &|_, _, _| {})
        .await
        .unwrap();
    let table = eval::table(&metrics);
    assert!(table.contains("ran as Text"), "{table}");
}
