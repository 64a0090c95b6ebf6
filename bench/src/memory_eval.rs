//! `memory-eval`: retrieval quality of memory search on a corpus, as a table.
//!
//! ```sh
//! memory-eval [--corpus F] [--queries F] [--qrels F]
//!             [--embedder ollama|openai|none] [--url URL] [--model M]
//!             [--api-key K] [--dimensions N]
//! ```
//! Defaults: the dataset in `bench/data/memory-eval/` and Ollama at
//! `$OLLAMA_HOST` (or 127.0.0.1:11434) with `nomic-embed-text`.

use std::path::PathBuf;
use std::process::ExitCode;

use indicatif::{ProgressBar, ProgressStyle};
use onyx::config::ProviderKind;
use onyx_bench::eval::{self, EmbedderSpec};

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn spec(args: &[String]) -> Result<Option<EmbedderSpec>, String> {
    let kind = match arg(args, "--embedder").as_deref().unwrap_or("ollama") {
        "none" => return Ok(None),
        "ollama" => ProviderKind::Ollama,
        "openai" => ProviderKind::OpenAi,
        other => return Err(format!("--embedder: {other:?} is not ollama, openai or none")),
    };
    let url = match arg(args, "--url") {
        Some(url) => url::Url::parse(&url).map_err(|e| format!("--url: {e}"))?,
        None if kind == ProviderKind::Ollama => onyx::config::ollama_url(
            &std::env::var("OLLAMA_HOST").unwrap_or_else(|_| "127.0.0.1:11434".into()),
        )
        .ok_or("OLLAMA_HOST is not a host or URL")?,
        None => url::Url::parse("https://api.openai.com/v1").map_err(|e| e.to_string())?,
    };
    let default_model = if kind == ProviderKind::Ollama {
        "nomic-embed-text"
    } else {
        "text-embedding-3-small"
    };
    Ok(Some(EmbedderSpec {
        kind,
        url,
        model: arg(args, "--model").unwrap_or_else(|| default_model.into()),
        api_key: arg(args, "--api-key").or_else(|| std::env::var("OPENAI_API_KEY").ok()),
        dimensions: arg(args, "--dimensions").and_then(|d| d.parse().ok()),
    }))
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/memory-eval");
    let corpus = arg(&args, "--corpus").map_or_else(|| data.join("corpus.jsonl"), PathBuf::from);
    let queries = arg(&args, "--queries").map_or_else(|| data.join("queries.jsonl"), PathBuf::from);
    let qrels = arg(&args, "--qrels").map(PathBuf::from);
    let run = async {
        let embedder = spec(&args)?;
        let corpus = eval::load_corpus(&corpus)?;
        let queries = eval::load_queries(&queries, qrels.as_deref())?;
        let work = std::env::temp_dir().join(format!("onyx-memory-eval-{}", std::process::id()));
        let bar = ProgressBar::new(0).with_style(
            ProgressStyle::with_template("{msg:<16} {bar:40} {pos}/{len}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        let progress = |stage: &str, done: usize, total: usize| {
            bar.set_message(stage.to_string());
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        };
        let described = embedder.as_ref().map_or_else(
            || "none (text only)".to_string(),
            |e| format!("{} {} at {}", e.kind.as_str(), e.model, e.url),
        );
        let metrics = eval::evaluate(&corpus, &queries, embedder, &work, &progress).await;
        bar.finish_and_clear();
        let _ = std::fs::remove_dir_all(&work);
        let metrics = metrics?;
        println!(
            "{} documents, {} queries; embedder: {described}\n",
            corpus.len(),
            queries.len()
        );
        println!("{}", eval::table(&metrics));
        Ok::<(), String>(())
    };
    match run.await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("memory-eval: {err}");
            ExitCode::FAILURE
        }
    }
}
