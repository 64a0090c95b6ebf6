//! Hybrid search over the resident index: a vector leg (exact cosine) and a
//! text leg (BM25, any query word may match), fused (`fusion`) and shown as
//! hits with snippets.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::chunker::indexed_text;
use super::fusion::{Ranked, Ranking, fuse};
use super::resident::{Query, Resident, Shown, analyzer};

const SNIPPET_CHARS: usize = 300;
const HIGHLIGHT: &str = "**";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "SearchMode")]
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

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
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
pub fn run(
    resident: &Resident,
    legs: Legs<'_>,
    ranking: Ranking,
    limit: usize,
    today: &str,
) -> Option<Vec<Hit>> {
    let k = legs.candidates.max(limit);
    let words = legs.text.map(analyzer::query_terms).unwrap_or_default();
    let query = Query {
        agents: legs.agents,
        hidden: legs.hidden,
        vector: legs.vector,
        words: legs.text.map(|_| words.as_slice()),
        k,
    };
    let found = resident.search(&query)?;
    let ranked = fuse(found.vector, found.text, ranking, limit, today);
    show(resident, ranked, &words)
}

/// Builds the hits from the ranked chunks' text, held by the resident index
/// (a chunk replaced since it was ranked is left out).
fn show(resident: &Resident, ranked: Vec<Ranked>, words: &[String]) -> Option<Vec<Hit>> {
    if ranked.is_empty() {
        return Some(Vec::new());
    }
    let ids: Vec<&str> = ranked.iter().map(|r| r.id.as_str()).collect();
    let rows = resident.shown(&ids)?;
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
    use crate::memory::index::{Index, test_file};

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
            run(index.resident(), legs, ranking, 10, "2026-11-22")?
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
