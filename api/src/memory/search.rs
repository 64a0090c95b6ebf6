//! Hybrid search over the index: a vector leg (HNSW, cosine) and a text leg
//! (FULLTEXT BM25, any query word may match), fused by weighted linear
//! combination or reciprocal rank fusion, with daily logs decaying by age.
//! Linear fusion adds calibrated scores: cosine similarity, and BM25 as the
//! share of the query a chunk matches (not scaled per result set, so a leg
//! that finds nothing good adds little); a chunk missing from one leg's
//! candidates gets that leg's weakest score. Measured in `bench/README.md`.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::chunker::indexed_text;
use super::index::Index;
use super::resident::{Candidate, LegResults, Query, Shown, analyzer};
use crate::clock::day_number;
use crate::config::Fusion;
use crate::storage::{Db, DbError};

const SNIPPET_CHARS: usize = 300;
/// Reciprocal rank fusion's k: small, so rank 1 in a leg counts much more
/// than rank 5 (k = 60, the usual value, flattened the legs' ranks and lost
/// 14 points of recall@5 on the memory-recall dataset; see bench/README.md).
const RRF_K: f64 = 1.0;
const HIGHLIGHT: &str = "**";
/// How many more vector candidates than needed are fetched before filtering by agent.
const OVERFETCH: usize = 4;
const MAX_OVERFETCH: usize = 400;
/// The text score of the weakest match while SurrealDB answers (see `in_surrealdb`).
const TEXT_FLOOR: f64 = 0.2;

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

/// A SurrealDB leg's row (the fallback while the resident index loads).
#[derive(Debug, Deserialize)]
struct LegRow {
    id: String,
    agent: String,
    path: String,
    kind: String,
    day: Option<String>,
    start_line: usize,
    #[serde(default)]
    distance: Option<f64>,
    #[serde(default)]
    ft_score: Option<f64>,
}

impl LegRow {
    fn candidate(self, score: f64) -> Candidate {
        Candidate {
            daily: (self.kind == "daily")
                .then(|| self.day.as_deref().and_then(day_number))
                .flatten(),
            id: self.id,
            path: self.path,
            start_line: self.start_line,
            score,
        }
    }
}

const LEG_FIELDS: &str = "record::id(id) AS id, agent, path, kind, day, start_line";

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
    pub vector: Option<&'a [f32]>,
    pub text: Option<&'a str>,
    pub candidates: usize,
}

/// Runs the requested legs (in the resident index once it has loaded, else
/// in SurrealDB's search indexes, which catch up behind the writes), fuses
/// them and reads the winners' text.
pub async fn run(
    index: &Index,
    legs: Legs<'_>,
    ranking: Ranking,
    limit: usize,
    today: &str,
) -> Result<Vec<Hit>, DbError> {
    let k = legs.candidates.max(limit);
    let words = legs.text.map(analyzer::query_terms).unwrap_or_default();
    let query = Query {
        agents: legs.agents,
        vector: legs.vector,
        words: legs.text.map(|_| words.as_slice()),
        k,
    };
    let found = match index.resident().search(&query) {
        Some(found) => found,
        None => in_surrealdb(index.db(), &legs, k).await?,
    };
    let ranked = fuse(found.vector, found.text, ranking, limit, today);
    show(index, ranked, &words).await
}

/// Both legs in SurrealDB, in one round trip.
async fn in_surrealdb(db: &Db, legs: &Legs<'_>, k: usize) -> Result<LegResults, DbError> {
    // HNSW search with a filter is slow in SurrealDB 3.3 (the predicate is
    // checked during the graph walk), so the vector leg searches unfiltered,
    // over-fetching, and keeps the requested agents' rows here; only when too
    // few of them come back does it run the filtered search.
    let overfetch = (k * OVERFETCH).min(MAX_OVERFETCH);
    let ef = overfetch.max(64);
    let mut statements = Vec::new();
    if legs.vector.is_some() {
        statements.push(format!(
            "SELECT {LEG_FIELDS}, vector::distance::knn() AS distance FROM memory_search \
             WHERE embedding <|{overfetch},{ef}|> $vector ORDER BY distance"
        ));
    }
    if legs.text.is_some() {
        statements.push(format!(
            "SELECT {LEG_FIELDS}, search::score(1) AS ft_score \
             FROM memory_search WHERE body @1,OR@ $text ORDER BY ft_score DESC LIMIT {overfetch}"
        ));
    }
    let mut found = LegResults::default();
    if statements.is_empty() {
        return Ok(found);
    }
    let sql = statements.join(";\n");
    let vars = json!({"agents": legs.agents, "vector": legs.vector, "text": legs.text});
    let mut results = db.execute(&sql, vars.clone()).await?;
    let mut index = 0;
    if legs.vector.is_some() {
        let (mut rows, complete) = of_agents(Db::take_rows(&mut results, index)?, legs.agents, k, overfetch);
        if !complete {
            // Mostly other agents' chunks nearby: search within this agent's only.
            let filtered = format!(
                "SELECT {LEG_FIELDS}, vector::distance::knn() AS distance FROM memory_search \
                 WHERE agent IN $agents AND embedding <|{k},{ef}|> $vector ORDER BY distance"
            );
            let mut response = db.execute(&filtered, vars.clone()).await?;
            rows = Db::take_rows(&mut response, 0)?;
        }
        found.vector = rows
            .into_iter()
            .map(|row| {
                let similarity = (1.0 - row.distance.unwrap_or(1.0)).clamp(0.0, 1.0);
                row.candidate(similarity)
            })
            .collect();
        index += 1;
    }
    if legs.text.is_some() {
        // Same reason as above: with the agent in the WHERE clause SurrealDB
        // scans the table instead of using the full-text index.
        let (mut rows, complete) = of_agents(Db::take_rows(&mut results, index)?, legs.agents, k, overfetch);
        if !complete {
            let filtered = format!(
                "SELECT {LEG_FIELDS}, search::score(1) AS ft_score \
                 FROM memory_search WHERE agent IN $agents AND body @1,OR@ $text ORDER BY ft_score DESC LIMIT {k}"
            );
            let mut response = db.execute(&filtered, vars).await?;
            rows = Db::take_rows(&mut response, 0)?;
        }
        // SurrealDB does not tell how much of the query a row matches (the
        // resident index does), and its BM25 goes negative in small corpora:
        // scaled into [0.2, 1] within the result set instead (every match
        // counts, the best fully).
        let (low, high) = rows
            .iter()
            .filter_map(|r| r.ft_score)
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), s| {
                (lo.min(s), hi.max(s))
            });
        found.text = rows
            .into_iter()
            .map(|row| {
                let ft = row.ft_score.unwrap_or(low);
                let score = if high > low {
                    TEXT_FLOOR + (1.0 - TEXT_FLOOR) * (ft - low) / (high - low)
                } else {
                    1.0
                };
                row.candidate(score)
            })
            .collect();
    }
    Ok(found)
}

/// Keeps the first `k` over-fetched rows that belong to `agents`; `false`
/// when fewer were found and the leg filled its whole over-fetch (so more of
/// the agents' rows may exist further down: search again with the filter).
fn of_agents(rows: Vec<LegRow>, agents: &[&str], k: usize, overfetch: usize) -> (Vec<LegRow>, bool) {
    let fetched = rows.len();
    let kept: Vec<LegRow> = rows
        .into_iter()
        .filter(|r| agents.contains(&r.agent.as_str()))
        .take(k)
        .collect();
    let complete = kept.len() >= k || fetched < overfetch;
    (kept, complete)
}

/// A fused result before its text is read.
#[derive(Debug)]
struct Ranked {
    id: String,
    score: f64,
    legs: Vec<&'static str>,
}

/// Builds the hits from the ranked chunks' text: held by the resident index,
/// or read in one query while it loads (a chunk replaced since it was ranked
/// is left out).
async fn show(index: &Index, ranked: Vec<Ranked>, words: &[String]) -> Result<Vec<Hit>, DbError> {
    if ranked.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<&str> = ranked.iter().map(|r| r.id.as_str()).collect();
    let rows = match index.resident().shown(&ids) {
        Some(rows) => rows,
        None => {
            let mut response = index
                .db()
                .execute(
                    "SELECT record::id(id) AS id, agent, path, start_line, end_line, heading, text \
                     FROM $ids.map(|$id| type::record('memory_chunk', $id))",
                    json!({"ids": ids}),
                )
                .await?;
            Db::take_rows(&mut response, 0)?
        }
    };
    let mut by_id: HashMap<String, Shown> = rows.into_iter().map(|r| (r.id.clone(), r)).collect();
    Ok(ranked
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
        .collect())
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
        let index = Index::new(Db::scratch().await);
        index.reset_vectors(Some(3)).await.unwrap();
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
        index.catch_up_all(&|_, _| {}).await.unwrap();
        index
    }

    async fn found(
        index: &Index,
        vector: Option<&[f32]>,
        text: Option<&str>,
    ) -> Vec<(String, Vec<&'static str>)> {
        let legs = Legs {
            agents: &["main", "_shared"],
            vector,
            text,
            candidates: 10,
        };
        let ranking = crate::memory::Settings::default().ranking;
        run(index, legs, ranking, 10, "2026-11-22")
            .await
            .unwrap()
            .into_iter()
            .map(|h| (h.snippet, h.legs))
            .collect()
    }

    #[tokio::test]
    async fn resident_and_surrealdb_search_agree() {
        let index = indexed().await;
        let queries: [(Option<&[f32]>, Option<&str>); 4] = [
            (None, Some("ox 4711")),
            (None, Some("deploying")),
            (Some(&[0.0, 0.9, 0.1]), None),
            (Some(&[0.1, 0.0, 1.0]), Some("deployment flights")),
        ];
        let mut in_surrealdb = Vec::new();
        for (vector, text) in queries {
            in_surrealdb.push(found(&index, vector, text).await);
        }
        assert!(
            index
                .resident()
                .search(&Query {
                    agents: &[],
                    vector: None,
                    words: None,
                    k: 1
                })
                .is_none()
        );
        crate::memory::resident::load(index.db(), index.resident())
            .await
            .unwrap();
        assert_eq!(index.resident().chunks(), Some(DOCS.len()));
        // The same hits from the same legs. The order may differ on near-ties:
        // SurrealDB's BM25 counts document lengths its own way.
        for ((vector, text), mut expected) in queries.into_iter().zip(in_surrealdb) {
            let mut resident = found(&index, vector, text).await;
            resident.sort();
            expected.sort();
            assert_eq!(resident, expected, "{text:?}");
        }
        // Spot checks, so agreeing on nothing would fail.
        let ticket = found(&index, None, Some("ox 4711")).await;
        assert_eq!(
            ticket[0].0,
            "Deployment ticket **OX**-**4711** tracks the flaky migration"
        );
        let deploy = found(&index, None, Some("deploying")).await;
        assert_eq!(deploy.len(), 2, "{deploy:?}");
        let dog = found(&index, Some(&[0.0, 0.9, 0.1]), None).await;
        assert!(
            dog[0].0.contains("Rex") && dog.len() == 3,
            "orthogonal chunks score 0: {dog:?}"
        );
    }
}
