//! `memory-bench`: memory search speed at scale. Ingests N chunks with
//! precomputed 384-dimension vectors (so the embedder is not measured) into
//! the real memory index (SurrealDB's `memory_chunk` rows, and the resident
//! index every write also updates) while SurrealDB's own search indexes
//! (`memory_search`, HNSW + FULLTEXT) catch up alongside as in `onyx serve`,
//! and times how long they take to finish. Then times loading the resident
//! index from SurrealDB as a restarted replica does, searches per mode in the
//! resident index and, for comparison, a few in SurrealDB (what answers while
//! a replica's resident index loads). Reports RSS.
//!
//! ```sh
//! memory-bench CHUNKS [DB_URL] [QUERIES] [SURREALDB_QUERIES]
//! # DB_URL: surrealkv://DIR (default: a temp dir) or mem://
//! # MEMORY_BENCH_CATCH_UP=after: SurrealDB's indexes catch up only once ingest ends
//! ```

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
    let surrealdb_queries = args.get(4).and_then(|n| n.parse().ok()).unwrap_or(20);
    let result = run(chunks, &url, queries, surrealdb_queries).await;
    let _ = std::fs::remove_dir_all(&temp);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("memory-bench: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run(chunks: usize, url: &str, queries: usize, surrealdb_queries: usize) -> Result<(), String> {
    println!("machine: {}", machine());
    println!("database: {url}; {chunks} chunks of ~{WORDS_PER_CHUNK} words, {DIMENSIONS}-d vectors");
    let db = Db::connect(&SurrealConfig {
        url: url.into(),
        user: None,
        pass: None,
        namespace: "onyx".into(),
        database: "bench".into(),
    })
    .await
    .map_err(|e| e.to_string())?;
    db.migrate().await.map_err(|e| e.to_string())?;
    let index = Index::new(db.clone());
    index
        .reset_vectors(Some(DIMENSIONS))
        .await
        .map_err(|e| e.to_string())?;
    // Loaded (empty) before ingesting, as in a running replica: each write
    // also updates the resident index, and ingest pays for that.
    resident::load(index.db(), index.resident())
        .await
        .map_err(|e| e.to_string())?;

    let mut rng = Rng(42);
    let centroids: Vec<Vec<f32>> = (0..TOPICS)
        .map(|_| {
            let mut c: Vec<f32> = (0..DIMENSIONS).map(|_| rng.unit()).collect();
            normalise(&mut c);
            c
        })
        .collect();
    let bar = ProgressBar::new(chunks as u64).with_style(
        ProgressStyle::with_template("ingest {bar:40} {pos}/{len} ({per_sec}, {eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    // Which SurrealDB indexes to keep while ingesting, to attribute the cost.
    let without = std::env::var("MEMORY_BENCH_WITHOUT").unwrap_or_default();
    for (name, surreal_index) in [
        ("fulltext", "memory_search_body"),
        ("hnsw", "memory_search_embedding"),
    ] {
        if without == name || without == "both" {
            let sql = format!("REMOVE INDEX {surreal_index} ON memory_search");
            index
                .db()
                .execute(&sql, serde_json::json!({}))
                .await
                .map_err(|e| e.to_string())?;
        }
    }
    // Or any schema change to try (e.g. other index parameters).
    if let Ok(sql) = std::env::var("MEMORY_BENCH_SETUP_SQL") {
        index
            .db()
            .execute(&sql, serde_json::json!({}))
            .await
            .map_err(|e| e.to_string())?;
    }
    let concurrency: usize = std::env::var("MEMORY_BENCH_CONCURRENCY")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    let files: Vec<(FileRow, Vec<ChunkRow>)> = (0..chunks.div_ceil(chunks_per_file()))
        .map(|file| bench_file(file, chunks, &centroids, &mut rng))
        .collect();
    let catch_up_during = std::env::var("MEMORY_BENCH_CATCH_UP").as_deref() != Ok("after");
    let follower = catch_up_during.then(|| {
        let index = index.clone();
        tokio::spawn(async move { index.follow_writes().await })
    });
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
    let ingest_time = started.elapsed();
    bar.finish_and_clear();
    let (rss_after_ingest, _) = rss_mb();
    let rate = chunks as f64 / ingest_time.as_secs_f64();
    println!(
        "ingest: {chunks} chunks in {:.1} s = {rate:.0} chunks/s (files of {} chunks, one transaction each, {concurrency} at a time; SurrealDB's search indexes catching up {}{})",
        ingest_time.as_secs_f64(),
        chunks_per_file(),
        if catch_up_during {
            "alongside"
        } else {
            "afterwards"
        },
        if without.is_empty() {
            String::new()
        } else {
            format!(", without its {without} index")
        }
    );
    if let Some(follower) = follower {
        follower.abort();
        let _ = follower.await;
    }
    let behind_at_end = index.files_behind().await.map_err(|e| e.to_string())?;
    let bar = ProgressBar::new(0).with_style(
        ProgressStyle::with_template("surrealdb search indexes {bar:40} {pos}/{len} files ({eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let finishing = Instant::now();
    index
        .catch_up_all(&|done, total| {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        })
        .await
        .map_err(|e| e.to_string())?;
    bar.finish_and_clear();
    let behind_time = finishing.elapsed();
    let caught_up = started.elapsed();
    println!(
        "surrealdb search indexes: {behind_at_end} of {} files still queued when ingest ended, caught up {:.1} s later; all {chunks} chunks indexed {:.1} s after ingest began = {:.0} chunks/s",
        chunks.div_ceil(chunks_per_file()),
        behind_time.as_secs_f64(),
        caught_up.as_secs_f64(),
        chunks as f64 / caught_up.as_secs_f64()
    );

    // A restarted replica: a fresh resident index read from SurrealDB.
    drop(index);
    let loaded = Index::new(db.clone());
    let started = Instant::now();
    resident::load(loaded.db(), loaded.resident())
        .await
        .map_err(|e| e.to_string())?;
    let load_time = started.elapsed();
    let (rss_after_load, _) = rss_mb();
    println!(
        "resident index: loaded {} chunks from SurrealDB in {:.1} s",
        loaded.resident().chunks().unwrap_or(0),
        load_time.as_secs_f64()
    );

    let mut rng = Rng(7);
    let in_surrealdb = Index::new(db.clone());
    let mut report = Vec::new();
    for (engine, index, count) in [
        ("resident", &loaded, queries),
        ("surrealdb", &in_surrealdb, surrealdb_queries),
    ] {
        if count == 0 {
            continue;
        }
        for (label, samples, hits) in time_searches(index, &centroids, &mut rng, count).await? {
            report.push((engine, label, samples, hits));
        }
    }
    println!("search: top 10 of 30 candidates per leg, one agent of four (plus _shared)");
    println!("| engine | mode | queries | p50 | p99 | hits/query |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for (engine, label, mut samples, hits) in report {
        let n = samples.len();
        println!(
            "| {engine} | {label} | {n} | {} | {} | {:.1} |",
            ms(percentile(&mut samples, 0.5)),
            ms(percentile(&mut samples, 0.99)),
            hits as f64 / n.max(1) as f64
        );
    }
    let (rss, peak) = rss_mb();
    println!(
        "rss: {rss_after_ingest:.0} MB after ingest, {rss_after_load:.0} MB after loading, {rss:.0} MB after searching, peak {peak:.0} MB"
    );
    Ok(())
}

/// Times `count` searches per mode (after up to 10 warm-up rounds), the modes
/// taking turns so each sees the same conditions; per mode, the samples and
/// the total number of hits.
async fn time_searches(
    index: &Index,
    centroids: &[Vec<f32>],
    rng: &mut Rng,
    count: usize,
) -> Result<Vec<(&'static str, Vec<Duration>, usize)>, String> {
    // The shipped defaults: linear fusion, vector 0.7, text 0.3.
    let ranking = Settings::default().ranking;
    let agents = ["agent1", "_shared"];
    let mut modes = vec![
        ("vector", Vec::with_capacity(count), 0),
        ("text", Vec::with_capacity(count), 0),
        ("hybrid", Vec::with_capacity(count), 0),
    ];
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
        for (label, samples, hits_total) in &mut modes {
            let legs = Legs {
                agents: &agents,
                vector: (*label != "text").then_some(vector.as_slice()),
                text: (*label != "vector").then_some(words.as_str()),
                candidates: 30,
            };
            let started = Instant::now();
            let hits = search::run(index, legs, ranking, 10, "2026-11-22")
                .await
                .map_err(|e| e.to_string())?;
            if q >= warm_up {
                samples.push(started.elapsed());
                *hits_total += hits.len();
            }
        }
    }
    Ok(modes)
}
