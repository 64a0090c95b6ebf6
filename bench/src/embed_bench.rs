//! `embed-bench`: the built-in local embedder's speed. Cuts the memory-recall
//! dataset's files into ~60-word chunks, embeds them with 1 and with N threads
//! (batches of 64, as the memory worker sends them), and times a one-line query;
//! prints a markdown table.
//!
//! ```sh
//! embed-bench MODEL_DIR [CHUNKS] [THREADS]
//! # MODEL_DIR: the all-MiniLM-L6-v2 files (tests/run's $MINILM_DIR); CHUNKS: 256;
//! # THREADS: the cores (the local embedder's default, at most 4)
//! ```

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use onyx_bench::eval::local_embedder;
use onyx_bench::{machine, ms, percentile, rss_mb};

const WORDS_PER_CHUNK: usize = 60;
const BATCH: usize = 64;
const QUERIES: usize = 50;

/// ~60-word chunks of the dataset's files, in a stable order.
fn chunks(count: usize) -> Result<Vec<String>, String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/memory-recall/files");
    let mut files = Vec::new();
    let mut pending = vec![dir];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))? {
            let path = entry.map_err(|e| e.to_string())?.path();
            if path.is_dir() {
                pending.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files.sort();
    let words: Vec<String> = files
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .flat_map(|text| text.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .collect();
    let out: Vec<String> = words
        .chunks(WORDS_PER_CHUNK)
        .filter(|c| c.len() == WORDS_PER_CHUNK)
        .take(count)
        .map(|c| c.join(" "))
        .collect();
    if out.len() < count {
        return Err(format!(
            "the dataset has only {} chunks of {WORDS_PER_CHUNK} words",
            out.len()
        ));
    }
    Ok(out)
}

async fn throughput(dir: &Path, texts: &[String], threads: usize) -> Result<(f64, Duration), String> {
    let embedder = local_embedder(dir.to_path_buf(), Some(threads))?;
    let started = Instant::now();
    embedder.prepare(&|_, _| {}).await.map_err(|e| e.to_string())?;
    let load = started.elapsed();
    // Warm-up: the first products fault the weights in.
    embedder.embed(&texts[..4]).await.map_err(|e| e.to_string())?;
    let started = Instant::now();
    for batch in texts.chunks(BATCH) {
        embedder.embed(batch).await.map_err(|e| e.to_string())?;
    }
    Ok((texts.len() as f64 / started.elapsed().as_secs_f64(), load))
}

async fn run(args: &[String]) -> Result<(), String> {
    let dir = PathBuf::from(
        args.first()
            .ok_or("usage: embed-bench MODEL_DIR [CHUNKS] [THREADS]")?,
    );
    let count: usize = args
        .get(1)
        .map_or(Ok(256), |n| n.parse())
        .map_err(|e| format!("CHUNKS: {e}"))?;
    let threads: usize = match args.get(2) {
        Some(n) => n.parse().map_err(|e| format!("THREADS: {e}"))?,
        None => std::thread::available_parallelism().map_or(1, usize::from).min(4),
    };
    let texts = chunks(count)?;
    let embedder = local_embedder(dir.clone(), Some(1))?;
    let tokens = embedder.input_tokens().await.ok_or("the model did not load")?;
    let mut latencies = Vec::new();
    for i in 0..QUERIES {
        let query = vec![format!("when did we move the standup to {i} o'clock?")];
        let started = Instant::now();
        embedder.embed(&query).await.map_err(|e| e.to_string())?;
        latencies.push(started.elapsed());
    }
    println!(
        "local embedder (all-MiniLM-L6-v2, {tokens}-word-piece input), {}",
        machine()
    );
    println!("{count} chunks of {WORDS_PER_CHUNK} words, batches of {BATCH}\n");
    println!("| threads | chunks/s | model load |");
    println!("| --- | --- | --- |");
    for n in if threads > 1 { vec![1, threads] } else { vec![1] } {
        let (rate, load) = throughput(&dir, &texts, n).await?;
        println!("| {n} | {rate:.1} | {} |", ms(load));
    }
    let (rss, peak) = rss_mb();
    println!(
        "\none-line query: p50 {}, p99 {}; RSS {rss:.0} MB (peak {peak:.0} MB)",
        ms(percentile(&mut latencies, 0.5)),
        ms(percentile(&mut latencies, 0.99)),
    );
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("embed-bench: {err}");
            ExitCode::FAILURE
        }
    }
}
