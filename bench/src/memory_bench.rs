//! `memory-bench`: memory search speed at scale. Ingests N chunks with
//! precomputed 384-dimension vectors (so the embedder is not measured) into
//! the real memory index (SurrealDB's `memory_chunk` rows, and the resident
//! index every write also updates), writes every file again unchanged (what
//! content-derived chunk ids make nearly free), saves the resident index's
//! snapshot, then times a restarted replica's load: from SurrealDB alone
//! (a new replica) and from the snapshot. Times searches per mode in the
//! resident index, checks both loads answer the same, and reports RSS.
//!
//! ```sh
//! memory-bench CHUNKS [DB_URL] [QUERIES]
//! # DB_URL: surrealkv://DIR (default: a temp dir) or mem://
//! MEMORY_BENCH_RESTART=SNAPSHOT memory-bench CHUNKS surrealkv://DIR [QUERIES]
//! # a replica restarting on an existing database: loads, searches, RSS only
//! ```

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use futures::StreamExt;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use onyx::config::SurrealConfig;
use onyx::memory::chunker::Chunk;
use onyx::memory::paths::FileKind;
use onyx::memory::search::{self, Legs};
use onyx::memory::{ChunkRow, FileRow, Index, Settings, resident};
use onyx::storage::Db;
use onyx_bench::{machine, ms, percentile, rss_mb};

const DIMENSIONS: usize = 384;
const TOPICS: usize = 64;
const VOCABULARY: usize = 20_000;
const WORDS_PER_CHUNK: usize = 60;
/// Chunks per file by default: the unit the sync path writes in one
/// transaction (`MEMORY_BENCH_CHUNKS_PER_FILE` changes it).
const CHUNKS_PER_FILE: usize = 50;

fn chunks_per_file() -> usize {
    std::env::var("MEMORY_BENCH_CHUNKS_PER_FILE")
        .ok()
        .and_then(|n| n.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(CHUNKS_PER_FILE)
}

/// A small deterministic generator (splitmix64), so runs are comparable.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }

    /// Zipf-ish word ids: small ids are much more common, like real text.
    fn word(&mut self) -> usize {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        ((VOCABULARY as f64).powf(u) as usize).min(VOCABULARY - 1)
    }
}

fn normalise(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(f32::EPSILON);
    v.iter_mut().for_each(|x| *x /= norm);
}

/// A vector near one of the topic centroids.
fn vector_near(centroids: &[Vec<f32>], topic: usize, rng: &mut Rng) -> Vec<f32> {
    let mut v: Vec<f32> = centroids[topic].iter().map(|c| c + 0.6 * rng.unit()).collect();
    normalise(&mut v);
    v
}

fn text(rng: &mut Rng) -> String {
    (0..WORDS_PER_CHUNK)
        .map(|_| format!("w{}", rng.word()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// One file of the synthetic corpus: its row and its chunks with vectors.
fn bench_file(file: usize, chunks: usize, centroids: &[Vec<f32>], rng: &mut Rng) -> (FileRow, Vec<ChunkRow>) {
    let agent = format!("agent{}", file % 4);
    let path = format!("memory/bench-{file:06}.md");
    let per_file = chunks_per_file();
    let count = per_file.min(chunks - file * per_file);
    let rows: Vec<ChunkRow> = (0..count)
        .map(|i| {
            let topic = (file * per_file + i) % TOPICS;
            let body = format!("topic{topic} {}", text(rng));
            let mut row = ChunkRow::new(
                &agent,
                &path,
                FileKind::Note,
                Chunk {
                    start_line: i * 3 + 1,
                    end_line: i * 3 + 3,
                    heading: String::new(),
                    hash: format!("{file}-{i}"),
                    text: body,
                },
                0,
            );
            row.embedding = Some(vector_near(centroids, topic, rng));
            row.pending = false;
            row
        })
        .collect();
    let file_row = FileRow {
        agent,
        path,
        checksum: format!("{file}"),
        etag: String::new(),
        size: 0,
        chunks: count,
        version: String::new(),
    };
    (file_row, rows)
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let Some(chunks) = args.get(1).and_then(|n| n.parse::<usize>().ok()) else {
        eprintln!("usage: memory-bench CHUNKS [DB_URL] [QUERIES]");
        return ExitCode::FAILURE;
    };
    let temp = std::env::temp_dir().join(format!("onyx-memory-bench-{}", std::process::id()));
    let url = args
        .get(2)
        .cloned()
        .unwrap_or_else(|| format!("surrealkv://{}", temp.display()));
    let queries = args.get(3).and_then(|n| n.parse().ok()).unwrap_or(500);
    let result = match std::env::var("MEMORY_BENCH_RESTART") {
        Ok(snapshot) => run_restart(&url, queries, Path::new(&snapshot)).await,
        Err(_) => {
            let kept = std::env::var("MEMORY_BENCH_SNAPSHOT").ok().map(PathBuf::from);
            let snapshot = kept.clone().unwrap_or_else(|| temp.with_extension("snapshot"));
            let result = run(chunks, &url, queries, &snapshot).await;
            if kept.is_none() {
                let _ = std::fs::remove_file(&snapshot);
            }
            result
        }
    };
    let _ = std::fs::remove_dir_all(&temp);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("memory-bench: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn connect(url: &str) -> Result<Db, String> {
    let db = Db::connect(&SurrealConfig::at(url, "bench"))
        .await
        .map_err(|e| e.to_string())?;
    db.migrate().await.map_err(|e| e.to_string())?;
    Ok(db)
}

/// Loads a fresh resident index as a restarted replica does; prints and returns it.
async fn restart(db: &Db, snapshot: Option<&Path>, label: &str) -> Result<Index, String> {
    let index = Index::new(db.clone());
    let started = Instant::now();
    let loaded = resident::load(index.db(), index.resident(), snapshot)
        .await
        .map_err(|e| e.to_string())?;
    let (rss, _) = rss_mb();
    println!(
        "restart {label}: searchable after {:.2} s ({} chunks, {} from the snapshot, {} files read from SurrealDB); rss {rss:.0} MB",
        started.elapsed().as_secs_f64(),
        loaded.chunks,
        loaded.from_snapshot,
        loaded.files_read
    );
    if let Some(bytes) = index.resident().bytes() {
        let per = |part: usize| part as f64 / loaded.chunks.max(1) as f64;
        println!(
            "resident index per chunk: vectors {:.0} B, postings {:.0} B, text {:.0} B, metadata {:.0} B; total {:.0} B ({:.1} MB)",
            per(bytes.vectors),
            per(bytes.postings),
            per(bytes.text),
            per(bytes.metadata),
            per(bytes.total()),
            bytes.total() as f64 / 1_048_576.0
        );
    }
    Ok(index)
}

async fn run(chunks: usize, url: &str, queries: usize, snapshot: &Path) -> Result<(), String> {
    println!("machine: {}", machine());
    println!("database: {url}; {chunks} chunks of ~{WORDS_PER_CHUNK} words, {DIMENSIONS}-d vectors");
    let db = connect(url).await?;
    let index = Index::new(db.clone());
    // Loaded (empty) before ingesting, as in a running replica: each write
    // also updates the resident index, and ingest pays for that.
    resident::load(index.db(), index.resident(), None)
        .await
        .map_err(|e| e.to_string())?;

    let mut rng = Rng(42);
    let centroids = centroids(&mut rng);
    let concurrency: usize = std::env::var("MEMORY_BENCH_CONCURRENCY")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    let files: Vec<(FileRow, Vec<ChunkRow>)> = (0..chunks.div_ceil(chunks_per_file()))
        .map(|file| bench_file(file, chunks, &centroids, &mut rng))
        .collect();
    for pass in ["ingest", "unchanged rewrite"] {
        let bar = ProgressBar::new(chunks as u64).with_style(
            ProgressStyle::with_template(&format!(
                "{pass} {{bar:40}} {{pos}}/{{len}} ({{per_sec}}, {{eta}})"
            ))
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        let started = Instant::now();
        let mut writes = futures::stream::iter(files.iter().map(|(file, rows)| {
            let index = &index;
            async move { index.replace_file(file, rows).await.map(|()| rows.len()) }
        }))
        .buffer_unordered(concurrency.max(1));
        while let Some(written) = writes.next().await {
            bar.inc(written.map_err(|e| e.to_string())? as u64);
        }
        drop(writes);
        let took = started.elapsed();
        bar.finish_and_clear();
        let (rss, _) = rss_mb();
        println!(
            "{pass}: {chunks} chunks in {:.1} s = {:.0} chunks/s (files of {} chunks, one transaction each, {concurrency} at a time); rss {rss:.0} MB",
            took.as_secs_f64(),
            chunks as f64 / took.as_secs_f64(),
            chunks_per_file(),
        );
    }
    let started = Instant::now();
    index.resident().save(snapshot).map_err(|e| e.to_string())?;
    let size = std::fs::metadata(snapshot).map(|m| m.len()).unwrap_or(0);
    println!(
        "snapshot: saved in {:.2} s, {:.0} MB",
        started.elapsed().as_secs_f64(),
        size as f64 / 1e6
    );
    let reference = search_results(&index, &centroids).await?;
    drop(index);

    let cold = restart(&db, None, "from SurrealDB alone").await?;
    let same = search_results(&cold, &centroids).await? == reference;
    drop(cold);
    let warm = restart(&db, Some(snapshot), "from the snapshot").await?;
    let same_warm = search_results(&warm, &centroids).await? == reference;
    println!("same top 10 as the writing replica: from SurrealDB {same}, from the snapshot {same_warm}");
    report_searches(&warm, &centroids, queries).await?;
    // Closed as `onyx serve` closes it on shutdown: the last handle dropped,
    // then wait for SurrealKV to flush and release its lock.
    let dir = db.embedded_dir();
    drop(warm);
    drop(db);
    if let Some(dir) = dir {
        let started = Instant::now();
        let closed = onyx::storage::wait_closed(&dir, Duration::from_secs(60)).await;
        println!(
            "database closed: {closed} after {:.2} s",
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

/// A replica restarting on an existing database and snapshot.
async fn run_restart(url: &str, queries: usize, snapshot: &Path) -> Result<(), String> {
    println!("machine: {}", machine());
    let db = connect(url).await?;
    let index = restart(&db, Some(snapshot), "from the snapshot").await?;
    let centroids = centroids(&mut Rng(42));
    report_searches(&index, &centroids, queries).await
}

fn centroids(rng: &mut Rng) -> Vec<Vec<f32>> {
    (0..TOPICS)
        .map(|_| {
            let mut c: Vec<f32> = (0..DIMENSIONS).map(|_| rng.unit()).collect();
            normalise(&mut c);
            c
        })
        .collect()
}

/// The hits of 20 searches per mode, to compare replicas.
async fn search_results(index: &Index, centroids: &[Vec<f32>]) -> Result<Vec<Vec<(String, usize)>>, String> {
    let found = time_searches(index, centroids, &mut Rng(7), 20, true).await?;
    Ok(found.into_iter().flat_map(|(_, _, _, hits)| hits).collect())
}

async fn report_searches(index: &Index, centroids: &[Vec<f32>], queries: usize) -> Result<(), String> {
    println!("search: top 10 of 30 candidates per leg, one agent of four (plus _shared)");
    println!("| mode | queries | p50 | p99 | hits/query |");
    println!("| --- | --- | --- | --- | --- |");
    for (label, mut samples, hits, _) in time_searches(index, centroids, &mut Rng(11), queries, false).await?
    {
        let n = samples.len();
        println!(
            "| {label} | {n} | {} | {} | {:.1} |",
            ms(percentile(&mut samples, 0.5)),
            ms(percentile(&mut samples, 0.99)),
            hits as f64 / n.max(1) as f64
        );
    }
    let (rss, peak) = rss_mb();
    println!("rss after searching: {rss:.0} MB, peak {peak:.0} MB");
    Ok(())
}

/// Per mode: the search times, the number of hits and (when kept) the hits.
type Timed = (&'static str, Vec<Duration>, usize, Vec<Vec<(String, usize)>>);

/// Times `count` searches per mode (after up to 10 warm-up rounds), the modes
/// taking turns so each sees the same conditions.
async fn time_searches(
    index: &Index,
    centroids: &[Vec<f32>],
    rng: &mut Rng,
    count: usize,
    keep: bool,
) -> Result<Vec<Timed>, String> {
    // The shipped defaults.
    let ranking = Settings::default().ranking;
    let agents = ["agent1", "_shared"];
    let mut modes: Vec<Timed> = ["vector", "text", "hybrid"]
        .into_iter()
        .map(|label| (label, Vec::with_capacity(count), 0, Vec::new()))
        .collect();
    let warm_up = (count / 10).clamp(1, 10);
    for q in 0..count + warm_up {
        let vector = vector_near(centroids, q % TOPICS, rng);
        // Query words as people type them: two mid-frequency words and a topic word.
        let words = format!(
            "w{} w{} topic{}",
            50 + rng.word() % 2000,
            50 + rng.word() % 2000,
            q % TOPICS
        );
        for (label, samples, hits_total, kept) in &mut modes {
            let legs = Legs {
                agents: &agents,
                hidden: &[],
                vector: (*label != "text").then_some(vector.as_slice()),
                text: (*label != "vector").then_some(words.as_str()),
                candidates: 30,
            };
            let started = Instant::now();
            let hits = search::run(index.resident(), legs, ranking, 10, "2026-11-22")
                .ok_or("the resident index is not loaded")?;
            if q >= warm_up {
                samples.push(started.elapsed());
                *hits_total += hits.len();
                if keep {
                    kept.push(hits.into_iter().map(|h| (h.path, h.start_line)).collect());
                }
            }
        }
    }
    Ok(modes)
}
