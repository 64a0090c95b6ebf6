//! Hybrid search over the resident index: a vector leg (exact cosine) and a
//! text leg (BM25, any query word may match), fused by weighted linear
//! combination or reciprocal rank fusion, with daily logs decaying by age.
//! Linear fusion adds calibrated scores: cosine similarity, and BM25 as the
//! share of the query a chunk matches (not scaled per result set, so a leg
//! that finds nothing good adds little); a chunk missing from one leg's
//! candidates gets that leg's weakest score. Measured in `bench/README.md`.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::chunker::indexed_text;
use super::index::Index;
use super::resident::{Candidate, Query, Shown, analyzer};
use crate::clock::day_number;
use crate::config::Fusion;

const SNIPPET_CHARS: usize = 300;
/// Reciprocal rank fusion's k: small, so rank 1 in a leg counts much more
/// than rank 5 (k = 60, the usual value, flattened the legs' ranks and lost
/// 14 points of recall@5 on the memory-recall dataset; see bench/README.md).
const RRF_K: f64 = 1.0;
const HIGHLIGHT: &str = "**";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "SearchMode"))]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Hybrid,
    Vector,
    Text,
}

impl Mode {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "hybrid" => Some(Self::Hybrid),
            "vector" => Some(Self::Vector),
            "text" => Some(Self::Text),
            _ => None,
        }
    }
}

/// How hits are scored; from `memory` config.
#[derive(Debug, Clone, Copy)]
pub struct Ranking {
    pub fusion: Fusion,
    pub vector_weight: f64,
    pub text_weight: f64,
    pub min_score: f64,
    pub half_life_days: f64,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Hit {
    pub agent: String,
    pub path: String,
    pub start_line: usize,
    pub end_line: usize,
    pub heading: String,
    /// Part of the chunk, query words wrapped in `**`.
    pub snippet: String,
    pub score: f64,
    /// Which legs found it: `vector`, `text`.
    pub legs: Vec<&'static str>,
    #[serde(skip)]
    pub text: String,
}

/// English words that carry no meaning for BM25 (the analyzer has no stop list).
const STOPWORDS: &[&str] = &[
    "a", "an", "the", "and", "or", "but", "of", "to", "in", "on", "at", "for", "with", "is", "are", "was",
    "were", "be", "been", "it", "its", "this", "that", "i", "my", "me", "we", "our", "you", "your", "he",
    "she", "they", "them", "his", "her", "their", "what", "which", "who", "when", "where", "how", "do",
    "does", "did", "about", "from", "by", "as", "so", "if", "not", "no", "have", "has", "had", "will",
    "would", "can", "could", "should", "there", "any", "some",
];

/// The words of a query worth matching, space-separated (punctuation dropped,
/// so `OX-1234` searches `ox 1234`).
pub fn text_query(query: &str) -> String {
    query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .filter(|w| !STOPWORDS.contains(&w.as_str()))
        .collect::<Vec<_>>()
        .join(" ")
}

pub struct Legs<'a> {
    pub agents: &'a [&'a str],
    /// `_shared` folders (`projects/{name}/`) left out: projects the agent may not read.
    pub hidden: &'a [String],
    pub vector: Option<&'a [f32]>,
    pub text: Option<&'a str>,
    pub candidates: usize,
}

/// Runs the requested legs in the resident index, fuses them and shows the
/// winners; `None` until the index has loaded.
pub fn run(index: &Index, legs: Legs<'_>, ranking: Ranking, limit: usize, today: &str) -> Option<Vec<Hit>> {
    let k = legs.candidates.max(limit);
    let words = legs.text.map(analyzer::query_terms).unwrap_or_default();
    let query = Query {
        agents: legs.agents,
        hidden: legs.hidden,
        vector: legs.vector,
        words: legs.text.map(|_| words.as_slice()),
        k,
    };
    let found = index.resident().search(&query)?;
    let ranked = fuse(found.vector, found.text, ranking, limit, today);
    show(index, ranked, &words)
}

/// A fused result before its text is read.
#[derive(Debug)]
struct Ranked {
    id: String,
    score: f64,
    legs: Vec<&'static str>,
}

/// Builds the hits from the ranked chunks' text, held by the resident index
/// (a chunk replaced since it was ranked is left out).
fn show(index: &Index, ranked: Vec<Ranked>, words: &[String]) -> Option<Vec<Hit>> {
    if ranked.is_empty() {
        return Some(Vec::new());
    }
    let ids: Vec<&str> = ranked.iter().map(|r| r.id.as_str()).collect();
    let rows = index.resident().shown(&ids)?;
    let mut by_id: HashMap<String, Shown> = rows.into_iter().map(|r| (r.id.clone(), r)).collect();
    Some(
        ranked
            .into_iter()
            .filter_map(|r| {
                let row = by_id.remove(&r.id)?;
                let highlighted = (!words.is_empty())
                    .then(|| analyzer::highlight(&indexed_text(&row.heading, &row.text), words, HIGHLIGHT));
                Some(Hit {
                    snippet: snippet(highlighted.as_deref(), &row.text),
                    agent: row.agent,
                    path: row.path,
                    start_line: row.start_line,
                    end_line: row.end_line,
                    heading: row.heading,
                    score: r.score,
                    legs: r.legs,
                    text: row.text,
                })
            })
            .collect(),
    )
}

struct Scored {
    candidate: Candidate,
    vector: Option<(usize, f64)>,
    text: Option<(usize, f64)>,
}

/// Fuses the legs' candidates (best first) into the best `limit`.
fn fuse(
    vector_hits: Vec<Candidate>,
    text_hits: Vec<Candidate>,
    ranking: Ranking,
    limit: usize,
    today: &str,
) -> Vec<Ranked> {
    let both = !vector_hits.is_empty() && !text_hits.is_empty();
    // A chunk a leg did not return scores there as the leg's weakest
    // candidate, not zero: being outside one leg's list must not sink what the
    // other leg is sure of (zero let weak matches of one leg reorder the
    // other's confident hits). At most half the leg's best, so a leg that found
    // only a few strong matches still lifts them.
    let weakest = |hits: &[Candidate]| {
        let scores = hits.iter().map(|c| c.score.clamp(0.0, 1.0));
        let (low, high) = scores.fold((1.0, 0.0), |(lo, hi): (f64, f64), s| (lo.min(s), hi.max(s)));
        if hits.is_empty() { 0.0 } else { low.min(high / 2.0) }
    };
    let (vector_floor, text_floor) = (weakest(&vector_hits), weakest(&text_hits));
    let mut by_id: HashMap<String, Scored> = HashMap::new();
    for (rank, candidate) in vector_hits.into_iter().enumerate() {
        let similarity = candidate.score.clamp(0.0, 1.0);
        by_id.insert(
            candidate.id.clone(),
            Scored {
                candidate,
                vector: Some((rank, similarity)),
                text: None,
            },
        );
    }
    for (rank, candidate) in text_hits.into_iter().enumerate() {
        // The share of the query matched (see `Candidate::score`).
        let normalised = candidate.score.clamp(0.0, 1.0);
        by_id
            .entry(candidate.id.clone())
            .or_insert(Scored {
                candidate,
                vector: None,
                text: None,
            })
            .text = Some((rank, normalised));
    }
    let today = day_number(today);
    let mut scored: Vec<(Candidate, Ranked, Option<usize>)> = by_id
        .into_values()
        .map(|s| {
            let fused = match ranking.fusion {
                // One leg: its own calibrated score (similarity, share of the
                // query matched), so a weak match looks weak.
                _ if !both => s.vector.or(s.text).map_or(0.0, |l| l.1),
                Fusion::Linear => {
                    let total = (ranking.vector_weight + ranking.text_weight).max(f64::EPSILON);
                    (ranking.vector_weight * s.vector.map_or(vector_floor, |v| v.1)
                        + ranking.text_weight * s.text.map_or(text_floor, |t| t.1))
                        / total
                }
                Fusion::Rrf => {
                    // A candidate with no similarity at all (orthogonal) is
                    // not a match, whatever its rank.
                    let rrf = |leg: Option<(usize, f64)>| {
                        leg.filter(|(_, score)| *score > 0.0)
                            .map_or(0.0, |(rank, _)| 1.0 / (RRF_K + rank as f64 + 1.0))
                    };
                    // Weighted by the legs' weights (ties go to the stronger
                    // leg), scaled so rank 1 in both legs scores 1.0.
                    let total = (ranking.vector_weight + ranking.text_weight).max(f64::EPSILON);
                    (ranking.vector_weight * rrf(s.vector) + ranking.text_weight * rrf(s.text))
                        * (RRF_K + 1.0)
                        / total
                }
            };
            let score = fused * decay(s.candidate.daily, ranking.half_life_days, today);
            let mut legs = Vec::new();
            if s.vector.is_some() {
                legs.push("vector");
            }
            if s.text.is_some() {
                legs.push("text");
            }
            let ranked = Ranked {
                id: s.candidate.id.clone(),
                score: (score * 10_000.0).round() / 10_000.0,
                legs,
            };
            // On equal scores the legs' own order decides (a clamped text
            // score ties a full match with a partial one).
            let best_rank = [s.vector, s.text].into_iter().flatten().map(|l| l.0).min();
            (s.candidate, ranked, best_rank)
        })
        .filter(|(_, r, _)| r.score >= ranking.min_score && r.score > 0.0)
        .collect();
    scored.sort_by(|(a, ra, a_rank), (b, rb, b_rank)| {
        rb.score
            .total_cmp(&ra.score)
            .then_with(|| a_rank.cmp(b_rank))
            .then_with(|| a.path.cmp(&b.path))
            .then_with(|| a.start_line.cmp(&b.start_line))
    });
    scored.truncate(limit);
    scored.into_iter().map(|(_, ranked, _)| ranked).collect()
}

/// Daily logs lose half their weight every `half_life_days`; other files keep it.
fn decay(daily: Option<i64>, half_life_days: f64, today: Option<i64>) -> f64 {
    let (Some(day), Some(today)) = (daily, today) else {
        return 1.0;
    };
    let age = (today - day).max(0) as f64;
    0.5_f64.powf(age / half_life_days)
}

/// Up to ~300 characters around the first highlight, or the start of the text.
fn snippet(highlighted: Option<&str>, text: &str) -> String {
    let Some(marked) = highlighted.filter(|h| h.contains(HIGHLIGHT)) else {
        return clip(text, 0, SNIPPET_CHARS);
    };
    let first = marked.find(HIGHLIGHT).unwrap_or(0);
    let chars_before = marked[..first].chars().count();
    let start = chars_before.saturating_sub(SNIPPET_CHARS / 3);
    let mut out = clip(marked, start, SNIPPET_CHARS);
    if out.matches(HIGHLIGHT).count() % 2 == 1 {
        // A highlight cut in half: close it.
        let trailing = out.ends_with('…');
        if trailing {
            out.pop();
        }
        out.push_str(HIGHLIGHT);
        if trailing {
            out.push('…');
        }
    }
    out
}

fn clip(text: &str, start: usize, length: usize) -> String {
    let total = text.chars().count();
    let body: String = text.chars().skip(start).take(length).collect();
    let mut out = String::with_capacity(body.len() + 8);
    if start > 0 {
        out.push('…');
    }
    out.push_str(body.trim());
    if start + length < total {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_words() {
        assert_eq!(text_query("What is ticket OX-1234 about?"), "ticket ox 1234");
        assert_eq!(text_query("the of !!"), "");
    }

    fn row(id: &str, kind: &str, day: Option<&str>, distance: Option<f64>, ft: Option<f64>) -> Candidate {
        Candidate {
            id: id.into(),
            path: format!("{id}.md"),
            start_line: 1,
            daily: (kind == "daily").then(|| day.and_then(day_number)).flatten(),
            score: distance.map_or_else(|| ft.unwrap_or(0.0), |d| 1.0 - d),
        }
    }

    const LINEAR: Ranking = Ranking {
        fusion: Fusion::Linear,
        vector_weight: 0.7,
        text_weight: 0.3,
        min_score: 0.0,
        half_life_days: 30.0,
    };

    #[test]
    fn linear_fusion_weighs_legs_and_records_them() {
        let hits = fuse(
            vec![
                row("a", "curated", None, Some(0.1), None),
                row("b", "curated", None, Some(0.5), None),
            ],
            vec![
                row("b", "curated", None, None, Some(4.0)),
                row("c", "curated", None, None, Some(2.0)),
            ],
            LINEAR,
            10,
            "2026-11-22",
        );
        let summary: Vec<_> = hits
            .iter()
            .map(|h| (h.id.as_str(), h.score, h.legs.clone()))
            .collect();
        assert_eq!(
            summary,
            // Text scores are shares of the query matched (clamped to 1); a
            // chunk one leg missed gets its weakest score there, at most half
            // its best: a's text 0.5, c's similarity 0.45.
            vec![
                ("a", 0.78, vec!["vector"]),
                ("b", 0.65, vec!["vector", "text"]),
                ("c", 0.615, vec!["text"]),
            ]
        );
    }

    #[test]
    fn a_chunk_outside_a_leg_gets_its_weakest_score() {
        let hits = fuse(
            vec![
                row("a", "note", None, Some(0.2), None),
                row("b", "note", None, Some(0.6), None),
            ],
            vec![
                row("c", "note", None, None, Some(1.0)),
                row("b", "note", None, None, Some(0.5)),
            ],
            LINEAR,
            10,
            "2026-11-22",
        );
        let summary: Vec<_> = hits.iter().map(|h| (h.id.as_str(), h.score)).collect();
        // a: 0.7 * 0.8 + 0.3 * 0.5 (the text leg's weakest); c: 0.7 * 0.4
        // (the vector leg's weakest, under half its best) + 0.3.
        assert_eq!(summary, vec![("a", 0.71), ("c", 0.58), ("b", 0.43)]);
    }

    #[test]
    fn daily_logs_decay_and_curated_memory_does_not() {
        let ranking = Ranking {
            half_life_days: 30.0,
            ..LINEAR
        };
        let hits = fuse(
            vec![
                row("old", "daily", Some("2026-10-23"), Some(0.0), None),
                row("kept", "curated", None, Some(0.0), None),
            ],
            Vec::new(),
            ranking,
            10,
            "2026-11-22",
        );
        let score = |id: &str| hits.iter().find(|h| h.id == id).unwrap().score;
        assert_eq!(score("kept"), 1.0);
        assert_eq!(score("old"), 0.5);
    }

    #[test]
    fn rrf_scores_rank_one_in_both_legs_as_one() {
        let ranking = Ranking {
            fusion: Fusion::Rrf,
            ..LINEAR
        };
        let hits = fuse(
            vec![row("a", "note", None, Some(0.2), None)],
            vec![row("a", "note", None, None, Some(1.0))],
            ranking,
            10,
            "2026-11-22",
        );
        assert_eq!(hits[0].score, 1.0);
    }

    #[test]
    fn min_score_drops_weak_hits() {
        let ranking = Ranking {
            min_score: 0.5,
            ..LINEAR
        };
        let hits = fuse(
            vec![
                row("near", "note", None, Some(0.1), None),
                row("far", "note", None, Some(0.9), None),
            ],
            Vec::new(),
            ranking,
            10,
            "2026-11-22",
        );
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].id, "near");
    }

    #[test]
    fn snippets_center_on_the_first_highlight_and_stay_balanced() {
        let long = format!("{} **needle** {}", "x ".repeat(400), "y ".repeat(400));
        let s = snippet(Some(&long), "");
        assert!(s.starts_with('…') && s.ends_with('…'));
        assert!(s.contains("**needle**"));
        assert_eq!(s.matches("**").count() % 2, 0);
        assert_eq!(snippet(None, "short text"), "short text");
    }
}

/// The resident index and SurrealDB's own indexes find the same chunks.
#[cfg(test)]
mod engines {
    use super::*;
    use crate::memory::index::test_file;

    const DOCS: &[(&str, &str, &str, [f32; 3])] = &[
        (
            "main",
            "MEMORY.md",
            "Deployment ticket OX-4711 tracks the flaky migration",
            [1.0, 0.0, 0.0],
        ),
        (
            "main",
            "MEMORY.md",
            "My dog Rex needs his rabies vaccination",
            [0.0, 1.0, 0.0],
        ),
        (
            "main",
            "USER.md",
            "Deploys happen on Fridays after the review",
            [0.9, 0.1, 0.0],
        ),
        (
            "other",
            "MEMORY.md",
            "Deployment of the other agent's services",
            [1.0, 0.0, 0.0],
        ),
        (
            "_shared",
            "travel.md",
            "Book flights through the airline portal",
            [0.0, 0.0, 1.0],
        ),
    ];

    async fn indexed() -> Index {
        let index = Index::new(crate::storage::Db::scratch().await);
        for (agent, path) in [
            ("main", "MEMORY.md"),
            ("main", "USER.md"),
            ("other", "MEMORY.md"),
            ("_shared", "travel.md"),
        ] {
            let chunks: Vec<(&str, Option<Vec<f32>>)> = DOCS
                .iter()
                .filter(|d| d.0 == agent && d.1 == path)
                .map(|(_, _, text, vector)| (*text, Some(vector.to_vec())))
                .collect();
            let (file, rows) = test_file(agent, path, &chunks);
            index.replace_file(&file, &rows).await.unwrap();
        }
        index
    }

    fn found(
        index: &Index,
        vector: Option<&[f32]>,
        text: Option<&str>,
    ) -> Option<Vec<(String, Vec<&'static str>)>> {
        let legs = Legs {
            agents: &["main", "_shared"],
            hidden: &[],
            vector,
            text,
            candidates: 10,
        };
        let ranking = crate::memory::Settings::default().ranking;
        Some(
            run(index, legs, ranking, 10, "2026-11-22")?
                .into_iter()
                .map(|h| (h.snippet, h.legs))
                .collect(),
        )
    }

    const QUERIES: [(Option<&[f32]>, Option<&str>); 4] = [
        (None, Some("ox 4711")),
        (None, Some("deploying")),
        (Some(&[0.0, 0.9, 0.1]), None),
        (Some(&[0.1, 0.0, 1.0]), Some("deployment flights")),
    ];

    #[tokio::test]
    async fn searches_run_once_loaded_and_find_the_same_after_a_restart_from_a_snapshot() {
        use crate::memory::resident::load;
        let index = indexed().await;
        assert!(found(&index, None, Some("ox 4711")).is_none(), "not loaded yet");
        let loaded = load(index.db(), index.resident(), None).await.unwrap();
        assert_eq!((loaded.chunks, loaded.from_snapshot), (DOCS.len(), 0));
        let before: Vec<_> = QUERIES
            .iter()
            .map(|(v, t)| found(&index, *v, *t).unwrap())
            .collect();
        // Spot checks, so agreeing on nothing would fail.
        assert_eq!(
            before[0][0].0,
            "Deployment ticket **OX**-**4711** tracks the flaky migration"
        );
        assert_eq!(before[1].len(), 2, "{:?}", before[1]);
        assert!(
            before[2][0].0.contains("Rex") && before[2].len() == 3,
            "orthogonal chunks score 0: {:?}",
            before[2]
        );

        let dir = tempfile::tempdir().unwrap();
        let snapshot = dir.path().join("memory-index.snapshot");
        assert!(index.resident().save(&snapshot).unwrap());
        assert!(
            !index.resident().save(&snapshot).unwrap(),
            "nothing changed since"
        );
        let restarted = Index::new(index.db().clone());
        let loaded = load(restarted.db(), restarted.resident(), Some(&snapshot))
            .await
            .unwrap();
        assert_eq!((loaded.from_snapshot, loaded.files_read), (DOCS.len(), 0));
        for ((vector, text), expected) in QUERIES.iter().zip(&before) {
            assert_eq!(&found(&restarted, *vector, *text).unwrap(), expected, "{text:?}");
        }

        // A file rewritten while this replica was down is read again; the rest is not.
        let (file, rows) = test_file(
            "main",
            "USER.md",
            &[("Deploys moved to Thursdays", Some(vec![0.9, 0.1, 0.0]))],
        );
        index.replace_file(&file, &rows).await.unwrap();
        let again = Index::new(index.db().clone());
        let loaded = load(again.db(), again.resident(), Some(&snapshot)).await.unwrap();
        assert_eq!(loaded.files_read, 1);
        assert_eq!(loaded.from_snapshot, DOCS.len() - 1);
        let thursday = found(&again, None, Some("thursdays")).unwrap();
        assert_eq!(thursday[0].0, "Deploys moved to **Thursdays**");
        assert!(found(&again, None, Some("fridays")).unwrap().is_empty());
    }
}
