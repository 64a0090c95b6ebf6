//! `resident-bench`: how a search's cost grows with the chunks held, on the
//! soak's own data (`bench/soak.py`): notes of eight words drawn from ten,
//! embedded by the fake Ollama's `fake-embed` (16 dimensions), all of one
//! agent. Queries: one such word (the soak's memory searches) and eight (a
//! sentence, as a turn with `include_memory` asks), 20 candidates a leg.
//! No HTTP and no SurrealDB: the resident index alone,
//! filled through the changes a write applies, so the time per search is the
//! index's. Prints each leg's mean and p99 at each size, and the vector
//! leg's recall: the share of its hits as similar as the exact top 20 (by
//! scoring every note's vector; the soak's notes repeat, so similarity, not
//! the chunk, is what a hit is checked by).
//!
//! ```sh
//! resident-bench [MAX_CHUNKS] [QUERIES]     # default 400000 and 300
//! ```

use std::time::{Duration, Instant};

use onyx::memory::resident::{Change, Query, ResidentChunk, State, analyzer, unit};
use onyx_bench::{machine, percentile, rss_mb};

/// The soak's words (`bench/soak.py`, WORDS).
const WORDS: [&str; 10] = [
    "garden", "river", "piano", "coffee", "mountain", "invoice", "dentist", "bicycle", "passport", "recipe",
];
const SIZES: [usize; 6] = [10_000, 30_000, 100_000, 200_000, 300_000, 400_000];
/// The soak's agent turns ask for `limit * 3` candidates, at least 20.
const CANDIDATES: usize = 20;
const NOTES_PER_FILE: usize = 500;

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }

    fn sentence(&mut self) -> String {
        self.words(8)
    }

    fn words(&mut self, n: usize) -> String {
        (0..n)
            .map(|_| WORDS[self.below(WORDS.len())])
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn note(n: usize, text: String) -> ResidentChunk {
    ResidentChunk {
        id: format!("{:016x}", (n as u64).wrapping_mul(0x9e3779b97f4a7c15)),
        agent: "main".into(),
        path: format!("memory/notes-{}.md", n / NOTES_PER_FILE),
        kind: "note".into(),
        day: None,
        start_line: n % NOTES_PER_FILE + 1,
        end_line: n % NOTES_PER_FILE + 1,
        heading: String::new(),
        embedding: Some(onyx_test_fakes::topics::embed(&text, 16)),
        text,
        rev: 0,
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let max: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(400_000);
    let queries: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(300);
    println!(
        "resident-bench on {}: soak-shaped notes, {queries} hybrid queries a size",
        machine()
    );
    println!();
    println!(
        "| chunks | vector mean | vector p99 | vector recall | text, 1 word: mean | p99 | text, 8 words: mean | p99 | hybrid, 8 words: mean | RSS MB |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let mut state = State::default();
    let mut embeddings: Vec<Vec<f32>> = Vec::new();
    let mut rng = Rng(7);
    let mut held = 0;
    for size in SIZES.into_iter().filter(|s| *s <= max) {
        while held < size {
            let file = held / NOTES_PER_FILE;
            let chunks: Vec<ResidentChunk> = (held..size.min((file + 1) * NOTES_PER_FILE))
                .map(|n| note(n, rng.sentence()))
                .collect();
            held += chunks.len();
            embeddings.extend(
                chunks
                    .iter()
                    .filter_map(|c| c.embedding.as_deref().and_then(unit)),
            );
            for chunk in chunks {
                state.apply(Change::Upsert(chunk));
            }
        }
        let (mut vector, mut word, mut text, mut both) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut as_similar, mut hits) = (0, 0);
        let agents = ["main", "_shared"];
        for _ in 0..queries {
            let one = analyzer::query_terms(&rng.words(1));
            let query = Query {
                agents: &agents,
                hidden: &[],
                vector: None,
                words: Some(&one),
                k: CANDIDATES,
            };
            let started = Instant::now();
            let found = state.search(&query);
            word.push(started.elapsed());
            assert!(found.text.len() >= CANDIDATES, "nothing found");
        }
        for _ in 0..queries {
            let sentence = rng.sentence();
            let embedding = onyx_test_fakes::topics::embed(&sentence, 16);
            let words = analyzer::query_terms(&sentence);
            let query = |vector: bool, text: bool| Query {
                agents: &agents,
                hidden: &[],
                vector: vector.then_some(embedding.as_slice()),
                words: text.then_some(words.as_slice()),
                k: CANDIDATES,
            };
            for (times, legs) in [
                (&mut vector, (true, false)),
                (&mut text, (false, true)),
                (&mut both, (true, true)),
            ] {
                let started = Instant::now();
                let found = state.search(&query(legs.0, legs.1));
                times.push(started.elapsed());
                if legs == (true, false) {
                    let bar = kth_similarity(&embeddings, &embedding, CANDIDATES);
                    hits += found.vector.len();
                    as_similar += found
                        .vector
                        .iter()
                        .filter(|c| c.score >= f64::from(bar) - 1e-3)
                        .count();
                }
                assert!(
                    found.vector.len() + found.text.len() >= CANDIDATES,
                    "nothing found"
                );
            }
        }
        let mean = |times: &[Duration]| times.iter().sum::<Duration>() / times.len() as u32;
        let ms = |d: Duration| format!("{:.2}", d.as_secs_f64() * 1000.0);
        println!(
            "| {size} | {} | {} | {:.3} | {} | {} | {} | {} | {} | {:.0} |",
            ms(mean(&vector)),
            ms(percentile(&mut vector, 0.99)),
            as_similar as f64 / hits.max(1) as f64,
            ms(mean(&word)),
            ms(percentile(&mut word, 0.99)),
            ms(mean(&text)),
            ms(percentile(&mut text, 0.99)),
            ms(mean(&both)),
            rss_mb().0
        );
    }
}

/// The `k`-th highest cosine of `query` against every (unit) vector.
fn kth_similarity(vectors: &[Vec<f32>], query: &[f32], k: usize) -> f32 {
    let query = unit(query).unwrap_or_else(|| vec![0.0; query.len()]);
    let mut scores: Vec<f32> = vectors
        .iter()
        .map(|v| v.iter().zip(&query).map(|(a, b)| a * b).sum())
        .collect();
    let k = k.min(scores.len());
    scores.select_nth_unstable_by(k - 1, |a, b| b.total_cmp(a));
    scores[k - 1]
}
