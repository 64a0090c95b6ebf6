//! `memory-eval`: retrieval quality of memory search on a corpus, as a table.
//!
//! ```sh
//! memory-eval [--corpus F] [--queries F] [--qrels F]
//!             [--embedder ollama|openai|local|none] [--url URL] [--model M]
//!             [--api-key K] [--dimensions N] [--model-dir DIR]
//! memory-eval --dataset DIR [--slice] [--dump FILE] [--fusion linear|rrf]
//!             [--vector-weight W] [--text-weight W] [--half-life DAYS] [--embedder …]
//! ```
//! Defaults: the dataset in `bench/data/memory-eval/` and Ollama at
//! `$OLLAMA_HOST` (or 127.0.0.1:11434) with `nomic-embed-text`. With
//! `--dataset` (e.g. `bench/data/memory-recall`) it scores hits by evidence
//! lines instead (`onyx_bench::recall`); `--slice` keeps the dataset's small part,
//! `--dump` writes every hit list to a file, with each question's text, kind
//! and evidence (for recomputing fusions offline). `--embedder local
//! --model-dir DIR` runs the built-in embedder over the all-MiniLM-L6-v2 files
//! in DIR.

use std::path::PathBuf;
use std::process::ExitCode;

use indicatif::{ProgressBar, ProgressStyle};
use onyx::config::ProviderKind;
use onyx_bench::eval::{self, EmbedderSpec, Embedding};
use onyx_bench::gateway::Gateway;
use onyx_bench::{locomo, recall};

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn spec(args: &[String]) -> Result<Option<Embedding>, String> {
    let kind = match arg(args, "--embedder").as_deref().unwrap_or("ollama") {
        "none" => return Ok(None),
        "local" => {
            let dir = arg(args, "--model-dir").ok_or("--embedder local needs --model-dir DIR")?;
            return Ok(Some(Embedding::Local(PathBuf::from(dir))));
        }
        "ollama" => ProviderKind::Ollama,
        "openai" => ProviderKind::OpenAi,
        other => {
            return Err(format!(
                "--embedder: {other:?} is not ollama, openai, local or none"
            ));
        }
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
    Ok(Some(
        EmbedderSpec {
            kind,
            url,
            model: arg(args, "--model").unwrap_or_else(|| default_model.into()),
            api_key: arg(args, "--api-key").or_else(|| std::env::var("OPENAI_API_KEY").ok()),
            dimensions: arg(args, "--dimensions").and_then(|d| d.parse().ok()),
        }
        .into(),
    ))
}

/// The default ranking with `--fusion linear|rrf`, `--vector-weight W`,
/// `--text-weight W` and `--half-life DAYS` applied; `None` without any of them.
fn ranking(args: &[String]) -> Result<Option<onyx::memory::Ranking>, String> {
    let mut ranking = onyx::memory::Settings::default().ranking;
    let mut changed = false;
    if let Some(fusion) = arg(args, "--fusion") {
        ranking.fusion = match fusion.as_str() {
            "linear" => onyx::config::Fusion::Linear,
            "rrf" => onyx::config::Fusion::Rrf,
            "adaptive" => onyx::config::Fusion::Adaptive,
            other => return Err(format!("--fusion: {other:?} is not adaptive, linear or rrf")),
        };
        changed = true;
    }
    for (name, slot) in [
        ("--vector-weight", &mut ranking.vector_weight),
        ("--text-weight", &mut ranking.text_weight),
        ("--half-life", &mut ranking.half_life_days),
    ] {
        if let Some(value) = arg(args, name) {
            *slot = value.parse().map_err(|e| format!("{name}: {e}"))?;
            changed = true;
        }
    }
    Ok(changed.then_some(ranking))
}

/// The `memory` config block for `--gateway`: the embedder as given (an
/// Ollama-style server) and any ranking options.
fn gateway_memory(embedder: Option<&Embedding>, args: &[String]) -> String {
    let mut memory = serde_json::Map::new();
    match embedder {
        Some(Embedding::Provider(spec)) => {
            memory.insert(
                "embedder".into(),
                serde_json::json!({"type": spec.kind.as_str(), "model": spec.model, "baseUrl": spec.url.as_str()}),
            );
        }
        Some(Embedding::Local(dir)) => {
            memory.insert(
                "embedder".into(),
                serde_json::json!({"type": "local", "path": dir.display().to_string()}),
            );
        }
        None => {
            memory.insert("embedder".into(), serde_json::json!({"type": "none"}));
        }
    }
    for (flag, key) in [
        ("--fusion", "fusion"),
        ("--vector-weight", "vectorWeight"),
        ("--text-weight", "textWeight"),
    ] {
        if let Some(value) = arg(args, flag) {
            let value = value
                .parse::<f64>()
                .map_or_else(|_| serde_json::json!(value), |n| serde_json::json!(n));
            memory.insert(key.into(), value);
        }
    }
    serde_json::Value::Object(memory).to_string()
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
            |e| match e {
                Embedding::Provider(e) => format!("{} {} at {}", e.kind.as_str(), e.model, e.url),
                Embedding::Local(dir) => format!("local all-MiniLM-L6-v2 from {}", dir.display()),
            },
        );
        let datasets = if let Some(dir) = arg(&args, "--dataset") {
            Some(vec![recall::Dataset::load(
                &PathBuf::from(dir),
                args.iter().any(|a| a == "--slice"),
            )?])
        } else if args.iter().any(|a| a == "--locomo") {
            let dir = arg(&args, "--locomo-dir").map_or_else(locomo::default_dir, PathBuf::from);
            let mut all = locomo::load_dir(&dir)?;
            if let Some(only) = arg(&args, "--conversations") {
                let wanted: Vec<String> = only.split(',').map(|c| format!("locomo-{c}")).collect();
                all.retain(|d| wanted.contains(&d.agent));
            }
            Some(all)
        } else {
            None
        };
        if let Some(datasets) = datasets {
            let started = std::time::Instant::now();
            let dump = arg(&args, "--dump").map(PathBuf::from);
            let default_limit = if args.iter().any(|a| a == "--locomo") {
                10
            } else {
                recall::Options::default().limit
            };
            let options = recall::Options {
                dump: dump.as_deref(),
                limit: match arg(&args, "--limit") {
                    Some(n) => n.parse().map_err(|e| format!("--limit: {e}"))?,
                    None => default_limit,
                },
            };
            let metrics = match arg(&args, "--gateway") {
                Some(binary) => {
                    let memory = gateway_memory(embedder.as_ref(), &args);
                    let gateway = Gateway::start(&PathBuf::from(binary), &memory).await?;
                    recall::evaluate(&gateway, &datasets, options, &progress).await
                }
                None => {
                    let backend = recall::InProcess::new(embedder, &work, ranking(&args)?).await?;
                    recall::evaluate(&backend, &datasets, options, &progress).await
                }
            };
            bar.finish_and_clear();
            let _ = std::fs::remove_dir_all(&work);
            let metrics = metrics?;
            println!(
                "{} agents, {} files, {} questions, {} hits each; embedder: {described}; {}; {}; {:.0} s\n",
                datasets.len(),
                datasets.iter().map(|d| d.files.len()).sum::<usize>(),
                datasets.iter().map(|d| d.questions.len()).sum::<usize>(),
                options.limit,
                if args.iter().any(|a| a == "--gateway") {
                    "through /v1/memory/search"
                } else {
                    "in process"
                },
                onyx_bench::machine(),
                started.elapsed().as_secs_f64()
            );
            println!("{}", recall::table(&metrics));
            return Ok(());
        }
        let corpus = eval::load_corpus(&corpus)?;
        let queries = eval::load_queries(&queries, qrels.as_deref())?;
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
