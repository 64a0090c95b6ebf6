//! Hybrid search over the index: a vector leg (HNSW, cosine) and a text leg
//! (FULLTEXT BM25, any query word may match), fused by weighted linear
//! combination or reciprocal rank fusion, with daily logs decaying by age.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::config::Fusion;
use crate::storage::{Db, DbError};

const SNIPPET_CHARS: usize = 300;
const RRF_K: f64 = 60.0;
const HIGHLIGHT: &str = "**";
/// How many more vector candidates than needed are fetched before filtering by agent.
const OVERFETCH: usize = 4;
const MAX_OVERFETCH: usize = 400;
/// The text-leg score of the weakest text match in a result set.
const TEXT_FLOOR: f64 = 0.2;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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

/// A row from either leg.
#[derive(Debug, Deserialize)]
struct LegRow {
    id: String,
    agent: String,
    path: String,
    kind: String,
    day: Option<String>,
    start_line: usize,
    end_line: usize,
    heading: String,
    text: String,
    #[serde(default)]
    distance: Option<f64>,
    #[serde(default)]
    ft_score: Option<f64>,
    #[serde(default)]
    highlighted: Option<String>,
}

const FIELDS: &str = "record::id(id) AS id, agent, path, kind, day, start_line, end_line, heading, text";

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

/// Runs the requested legs in one round trip and fuses them.
pub async fn run(
    db: &Db,
    legs: Legs<'_>,
    ranking: Ranking,
    limit: usize,
    today: &str,
) -> Result<Vec<Hit>, DbError> {
    let k = legs.candidates.max(limit);
    // HNSW search with a filter is slow in SurrealDB 3.3 (the predicate is
    // checked during the graph walk), so the vector leg searches unfiltered,
    // over-fetching, and keeps the requested agents' rows here; only when too
    // few of them come back does it run the filtered search.
    let overfetch = (k * OVERFETCH).min(MAX_OVERFETCH);
    let ef = overfetch.max(64);
    let mut statements = Vec::new();
    if legs.vector.is_some() {
        statements.push(format!(
            "SELECT {FIELDS}, vector::distance::knn() AS distance FROM memory_chunk \
             WHERE embedding <|{overfetch},{ef}|> $vector ORDER BY distance"
        ));
    }
    if legs.text.is_some() {
        statements.push(format!(
            "SELECT {FIELDS}, search::score(1) AS ft_score, search::highlight('{HIGHLIGHT}', '{HIGHLIGHT}', 1) AS highlighted \
             FROM memory_chunk WHERE body @1,OR@ $text ORDER BY ft_score DESC LIMIT {overfetch}"
        ));
    }
    if statements.is_empty() {
        return Ok(Vec::new());
    }
    let sql = statements.join(";\n");
    let vars = json!({"agents": legs.agents, "vector": legs.vector, "text": legs.text});
    let mut results = db.execute(&sql, vars.clone()).await?;
    let mut vector_rows = Vec::new();
    let mut text_rows = Vec::new();
    let mut index = 0;
    if legs.vector.is_some() {
        let (rows, complete) = of_agents(take_rows(&mut results, index)?, legs.agents, k, overfetch);
        vector_rows = rows;
        if !complete {
            // Mostly other agents' chunks nearby: search within this agent's only.
            let filtered = format!(
                "SELECT {FIELDS}, vector::distance::knn() AS distance FROM memory_chunk \
                 WHERE agent IN $agents AND embedding <|{k},{ef}|> $vector ORDER BY distance"
            );
            let mut response = db.execute(&filtered, vars).await?;
            vector_rows = take_rows(&mut response, 0)?;
        }
        index += 1;
    }
    if legs.text.is_some() {
        // Same reason as above: with the agent in the WHERE clause SurrealDB
        // scans the table instead of using the full-text index.
        let (rows, complete) = of_agents(take_rows(&mut results, index)?, legs.agents, k, overfetch);
        text_rows = rows;
        if !complete {
            let filtered = format!(
                "SELECT {FIELDS}, search::score(1) AS ft_score, search::highlight('{HIGHLIGHT}', '{HIGHLIGHT}', 1) AS highlighted \
                 FROM memory_chunk WHERE agent IN $agents AND body @1,OR@ $text ORDER BY ft_score DESC LIMIT {k}"
            );
            let mut response = db
                .execute(&filtered, json!({"agents": legs.agents, "text": legs.text}))
                .await?;
            text_rows = take_rows(&mut response, 0)?;
        }
    }
    Ok(fuse(vector_rows, text_rows, ranking, limit, today))
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

fn take_rows(results: &mut surrealdb::IndexedResults, index: usize) -> Result<Vec<LegRow>, DbError> {
    let value: surrealdb::types::Value = results.take(index)?;
    let json = match value.into_json_value() {
        serde_json::Value::Null => serde_json::Value::Array(Vec::new()),
        other => other,
    };
    serde_json::from_value(json).map_err(|err| DbError::Decode(err.to_string()))
}

struct Scored {
    row: LegRow,
    vector: Option<(usize, f64)>,
    text: Option<(usize, f64)>,
}

fn fuse(
    vector_rows: Vec<LegRow>,
    text_rows: Vec<LegRow>,
    ranking: Ranking,
    limit: usize,
    today: &str,
) -> Vec<Hit> {
    let both = !vector_rows.is_empty() && !text_rows.is_empty();
    let legs_run = usize::from(!vector_rows.is_empty()) + usize::from(!text_rows.is_empty());
    // BM25 is unbounded and goes negative in tiny corpora (IDF of a term in
    // most documents), so text scores are min-max scaled into [0.2, 1]:
    // every text match counts, the best counts fully.
    let scores = text_rows.iter().map(|r| r.ft_score.unwrap_or(0.0));
    let (min_ft, max_ft) = scores.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), s| {
        (lo.min(s), hi.max(s))
    });
    let scale_text = |ft: f64| {
        if max_ft > min_ft {
            TEXT_FLOOR + (1.0 - TEXT_FLOOR) * (ft - min_ft) / (max_ft - min_ft)
        } else {
            1.0
        }
    };
    let mut by_id: HashMap<String, Scored> = HashMap::new();
    for (rank, row) in vector_rows.into_iter().enumerate() {
        let similarity = (1.0 - row.distance.unwrap_or(1.0)).clamp(0.0, 1.0);
        by_id.insert(
            row.id.clone(),
            Scored {
                row,
                vector: Some((rank, similarity)),
                text: None,
            },
        );
    }
    for (rank, row) in text_rows.into_iter().enumerate() {
        let normalised = scale_text(row.ft_score.unwrap_or(0.0));
        match by_id.get_mut(&row.id) {
            Some(found) => {
                found.text = Some((rank, normalised));
                found.row.highlighted = row.highlighted;
            }
            None => {
                by_id.insert(
                    row.id.clone(),
                    Scored {
                        row,
                        vector: None,
                        text: Some((rank, normalised)),
                    },
                );
            }
        }
    }
    let mut hits: Vec<Hit> = by_id
        .into_values()
        .map(|s| {
            let fused = match ranking.fusion {
                Fusion::Linear if both => {
                    let total = (ranking.vector_weight + ranking.text_weight).max(f64::EPSILON);
                    (ranking.vector_weight * s.vector.map_or(0.0, |v| v.1)
                        + ranking.text_weight * s.text.map_or(0.0, |t| t.1))
                        / total
                }
                Fusion::Linear => s.vector.or(s.text).map_or(0.0, |l| l.1),
                Fusion::Rrf => {
                    let rrf = |leg: Option<(usize, f64)>| {
                        leg.map_or(0.0, |(rank, _)| 1.0 / (RRF_K + rank as f64 + 1.0))
                    };
                    // Scaled so rank 1 in every leg that ran scores 1.0.
                    (rrf(s.vector) + rrf(s.text)) * (RRF_K + 1.0) / legs_run.max(1) as f64
                }
            };
            let score = fused * decay(&s.row, ranking.half_life_days, today);
            let mut legs = Vec::new();
            if s.vector.is_some() {
                legs.push("vector");
            }
            if s.text.is_some() {
                legs.push("text");
            }
            Hit {
                snippet: snippet(s.row.highlighted.as_deref(), &s.row.text),
                agent: s.row.agent,
                path: s.row.path,
                start_line: s.row.start_line,
                end_line: s.row.end_line,
                heading: s.row.heading,
                score: (score * 10_000.0).round() / 10_000.0,
                legs,
                text: s.row.text,
            }
        })
        .filter(|h| h.score >= ranking.min_score && h.score > 0.0)
        .collect();
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.path.cmp(&b.path))
            .then_with(|| a.start_line.cmp(&b.start_line))
    });
    hits.truncate(limit);
    hits
}

/// Daily logs lose half their weight every `half_life_days`; other files keep it.
fn decay(row: &LegRow, half_life_days: f64, today: &str) -> f64 {
    if row.kind != "daily" {
        return 1.0;
    }
    let (Some(day), Some(today)) = (row.day.as_deref().and_then(day_number), day_number(today)) else {
        return 1.0;
    };
    let age = (today - day).max(0) as f64;
    0.5_f64.powf(age / half_life_days)
}

/// Days since 1970-01-01 for `YYYY-MM-DD` (proleptic Gregorian).
pub fn day_number(day: &str) -> Option<i64> {
    let mut parts = day.splitn(3, '-');
    let year: i64 = parts.next()?.parse().ok()?;
    let month: i64 = parts.next()?.parse().ok()?;
    let date: i64 = parts.next()?.get(..2)?.parse().ok()?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&date) {
        return None;
    }
    // Howard Hinnant's days_from_civil.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + date - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146_097 + doe - 719_468)
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

    #[test]
    fn day_numbers() {
        assert_eq!(day_number("1970-01-01"), Some(0));
        assert_eq!(
            day_number("2026-11-22").unwrap() - day_number("2026-10-23").unwrap(),
            30
        );
        assert_eq!(
            day_number("2024-03-01").unwrap() - day_number("2024-02-28").unwrap(),
            2
        );
        assert_eq!(day_number("2026-13-01"), None);
    }

    fn row(id: &str, kind: &str, day: Option<&str>, distance: Option<f64>, ft: Option<f64>) -> LegRow {
        LegRow {
            id: id.into(),
            agent: "main".into(),
            path: format!("{id}.md"),
            kind: kind.into(),
            day: day.map(String::from),
            start_line: 1,
            end_line: 2,
            heading: String::new(),
            text: format!("text of {id}"),
            distance,
            ft_score: ft,
            highlighted: ft.map(|_| format!("text of **{id}**")),
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
            .map(|h| (h.path.as_str(), h.score, h.legs.clone()))
            .collect();
        assert_eq!(
            summary,
            vec![
                ("b.md", 0.65, vec!["vector", "text"]),
                ("a.md", 0.63, vec!["vector"]),
                ("c.md", 0.06, vec!["text"]),
            ]
        );
        assert_eq!(hits[0].snippet, "text of **b**");
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
        let score = |p: &str| hits.iter().find(|h| h.path == p).unwrap().score;
        assert_eq!(score("kept.md"), 1.0);
        assert_eq!(score("old.md"), 0.5);
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
        assert_eq!(hits[0].path, "near.md");
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
