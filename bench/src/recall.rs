//! Line-level retrieval quality on a memory dataset (`bench/data/memory-recall`): the
//! dataset's files are written through the real memory pipeline as one agent's memory,
//! every question runs in text, vector and hybrid mode, and each hit (a path and a line
//! range) is checked against the question's evidence lines.
//!
//! Metrics per mode, overall and per question kind:
//! - recall@k: the share of a question's evidence lines inside the first k hits;
//! - MRR: 1 / the rank of the first hit holding an evidence line (within 10);
//! - recall within a context budget: the share of evidence lines inside the first
//!   2,000 and 8,000 characters of hit text, as a prompt would receive them.
//!
//! Dataset layout: `files/…` (the memory files, by path), `questions.jsonl`
//! (`{"id", "kind", "question", "evidence": [{"path", "start", "end"}]}`),
//! `dataset.json` (`{"today", "agent"}`: the day the questions are asked, which
//! sets the daily logs' age) and `slice.json` (`{"files", "questions"}`: a small part).

use std::path::Path;

use onyx::memory::{Mode, Ranking};
use serde::Deserialize;

use crate::eval::{Embedding, empty_memory, mode_name};

const CUTOFFS: [usize; 3] = [1, 5, 10];
/// Context budgets, in characters of hit text.
pub const BUDGETS: [usize; 2] = [2_000, 8_000];
/// Hits asked for per question: enough to fill the largest budget with small chunks.
const LIMIT: usize = 60;

#[derive(Debug, Clone, Deserialize)]
pub struct Evidence {
    pub path: String,
    pub start: usize,
    pub end: usize,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Question {
    pub id: String,
    pub kind: String,
    pub question: String,
    pub evidence: Vec<Evidence>,
}

#[derive(Deserialize)]
struct Manifest {
    today: String,
    agent: String,
}

#[derive(Deserialize)]
struct Slice {
    files: Vec<String>,
    questions: Vec<String>,
}

pub struct Dataset {
    pub today: String,
    pub agent: String,
    /// (path, content), sorted by path.
    pub files: Vec<(String, String)>,
    pub questions: Vec<Question>,
}

impl Dataset {
    /// Reads a dataset directory; `slice` keeps only the part `slice.json` names.
    pub fn load(dir: &Path, slice: bool) -> Result<Self, String> {
        let read = |name: &str| {
            std::fs::read_to_string(dir.join(name)).map_err(|e| format!("{}: {e}", dir.join(name).display()))
        };
        let manifest: Manifest = serde_json::from_str(&read("dataset.json")?).map_err(|e| e.to_string())?;
        let mut questions = Vec::new();
        for (i, line) in read("questions.jsonl")?.lines().enumerate() {
            if !line.trim().is_empty() {
                questions.push(
                    serde_json::from_str::<Question>(line)
                        .map_err(|e| format!("questions.jsonl:{}: {e}", i + 1))?,
                );
            }
        }
        let root = dir.join("files");
        let mut files = Vec::new();
        collect(&root, &root, &mut files)?;
        files.sort();
        if slice {
            let part: Slice = serde_json::from_str(&read("slice.json")?).map_err(|e| e.to_string())?;
            files.retain(|(path, _)| part.files.contains(path));
            questions.retain(|q| part.questions.contains(&q.id));
        }
        for q in &questions {
            if let Some(e) = q
                .evidence
                .iter()
                .find(|e| !files.iter().any(|(p, _)| *p == e.path))
            {
                return Err(format!(
                    "question {}: evidence in {}, which is not in the dataset",
                    q.id, e.path
                ));
            }
        }
        Ok(Self {
            today: manifest.today,
            agent: manifest.agent,
            files,
            questions,
        })
    }
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.is_dir() {
            collect(root, &path, out)?;
        } else if path.extension().is_some_and(|e| e == "md") {
            let relative = path
                .strip_prefix(root)
                .map_err(|e| e.to_string())?
                .to_string_lossy()
                .replace('\\', "/");
            let content = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            out.push((relative, content));
        }
    }
    Ok(())
}

#[derive(Debug, Clone)]
pub struct Metrics {
    pub mode: Mode,
    /// `all`, or a question kind.
    pub kind: String,
    /// Recall at 1, 5 and 10 hits.
    pub recall: [f64; 3],
    pub mrr: f64,
    /// Recall within each of [`BUDGETS`].
    pub budget: [f64; 2],
    pub questions: usize,
    /// Set when the mode could not run as asked (e.g. no embedder).
    pub note: Option<String>,
}

/// A hit as the scoring needs it.
pub struct Found<'a> {
    pub path: &'a str,
    pub start_line: usize,
    pub text: &'a str,
}

/// One question's scores: (recall at each cutoff, reciprocal rank, recall
/// within each budget).
pub type Scores = ([f64; 3], f64, [f64; 2]);

/// Scores one question's hits against its evidence.
pub fn score(evidence: &[Evidence], hits: &[Found<'_>]) -> Scores {
    let wanted: Vec<(&str, usize)> = evidence
        .iter()
        .flat_map(|e| (e.start..=e.end).map(move |line| (e.path.as_str(), line)))
        .collect();
    if wanted.is_empty() {
        return ([0.0; 3], 0.0, [0.0; 2]);
    }
    // Where each evidence line first appears: (hit rank, characters of hit text up to its end).
    let mut first: Vec<Option<(usize, usize)>> = vec![None; wanted.len()];
    let mut before = 0;
    for (rank, hit) in hits.iter().enumerate() {
        let mut offset = before;
        for (i, line) in hit.text.split('\n').enumerate() {
            offset += line.chars().count() + 1;
            let number = hit.start_line + i;
            for (slot, (path, wanted_line)) in wanted.iter().enumerate() {
                if first[slot].is_none() && *path == hit.path && *wanted_line == number {
                    first[slot] = Some((rank, offset));
                }
            }
        }
        before += hit.text.chars().count() + 1;
    }
    let share = |keep: &dyn Fn(&(usize, usize)) -> bool| {
        first.iter().filter(|f| f.as_ref().is_some_and(keep)).count() as f64 / wanted.len() as f64
    };
    let recall = CUTOFFS.map(|k| share(&|(rank, _)| *rank < k));
    let budget = BUDGETS.map(|chars| share(&|(_, end)| *end <= chars));
    let rr = first
        .iter()
        .flatten()
        .map(|(rank, _)| *rank)
        .min()
        .filter(|rank| *rank < 10)
        .map_or(0.0, |rank| 1.0 / (rank as f64 + 1.0));
    (recall, rr, budget)
}

/// How [`evaluate`] runs, beyond the defaults.
#[derive(Clone, Copy)]
pub struct Options<'a> {
    /// Every question's hits in every mode are written there as JSON lines
    /// (`{"id", "mode", "hits": [{"path", "start", "end", "score", "chars"}]}`),
    /// to study ranking changes offline.
    pub dump: Option<&'a Path>,
    /// Hits asked for per question.
    pub limit: usize,
}

impl Default for Options<'_> {
    fn default() -> Self {
        Self {
            dump: None,
            limit: LIMIT,
        }
    }
}

/// A hit as a search answers it: a file's lines and the fused score (the
/// fields of `/v1/memory/search`'s hits that scoring needs).
#[derive(Deserialize)]
pub struct Hit {
    pub path: String,
    pub start_line: usize,
    pub end_line: usize,
    pub score: f64,
}

/// One search's answer.
pub struct Searched {
    /// The mode it ran in (another than asked when a leg was unavailable).
    pub mode: Mode,
    pub note: Option<String>,
    pub hits: Vec<Hit>,
}

/// Where the evaluation writes memory files and searches them: Onyx's
/// memory service in process ([`InProcess`]), or a running gateway over
/// HTTP (`crate::gateway`).
pub trait Backend: Sync {
    fn write(
        &self,
        agent: &str,
        path: &str,
        content: &str,
    ) -> impl Future<Output = Result<(), String>> + Send;
    /// Waits until every written chunk is searchable in every leg.
    fn settle(&self) -> impl Future<Output = Result<(), String>> + Send;
    fn search(
        &self,
        agent: &str,
        query: &str,
        limit: usize,
        mode: Mode,
        today: &str,
    ) -> impl Future<Output = Result<Searched, String>> + Send;
}

/// Onyx's memory service, driven in process (SurrealDB in memory).
pub struct InProcess(pub std::sync::Arc<onyx::memory::Memory>);

impl InProcess {
    /// A fresh memory service under `work_dir` with this embedder and ranking.
    pub async fn new(
        embedder: Option<Embedding>,
        work_dir: &Path,
        ranking: Option<Ranking>,
    ) -> Result<Self, String> {
        Ok(Self(empty_memory(embedder, work_dir, ranking).await?))
    }
}

impl Backend for InProcess {
    async fn write(&self, agent: &str, path: &str, content: &str) -> Result<(), String> {
        self.0
            .write_file(agent, path, content.to_string(), None)
            .await
            .map(|_| ())
            .map_err(|e| format!("indexing {path}: {e}"))
    }

    async fn settle(&self) -> Result<(), String> {
        // A slow embedder may leave chunks pending (each write waits a while only).
        let mut attempts = 0;
        while self.0.pending_count().await > 0 {
            attempts += 1;
            if let Err(err) = self.0.drain_pending(&|_, _| {}).await
                && attempts >= 5
            {
                return Err(format!("embedding the pending chunks: {err}"));
            }
        }
        Ok(())
    }

    async fn search(
        &self,
        agent: &str,
        query: &str,
        limit: usize,
        mode: Mode,
        today: &str,
    ) -> Result<Searched, String> {
        let results = self
            .0
            .search_on(agent, query, limit, mode, today)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Searched {
            mode: results.mode,
            note: results.note,
            hits: results
                .data
                .into_iter()
                .map(|h| Hit {
                    path: h.path,
                    start_line: h.start_line,
                    end_line: h.end_line,
                    score: h.score,
                })
                .collect(),
        })
    }
}

/// The text of lines `start..=end` (from 1) of a file.
fn lines_of(content: &str, start: usize, end: usize) -> String {
    content
        .lines()
        .skip(start.saturating_sub(1))
        .take((end + 1).saturating_sub(start.max(1)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Writes each dataset's files as its agent's memory and scores every mode
/// over all their questions.
pub async fn evaluate<B: Backend>(
    backend: &B,
    datasets: &[Dataset],
    options: Options<'_>,
    on_progress: &(dyn Fn(&str, usize, usize) + Send + Sync),
) -> Result<Vec<Metrics>, String> {
    let Options { dump, limit } = options;
    let mut dumped = String::new();
    let total_files: usize = datasets.iter().map(|d| d.files.len()).sum();
    let mut written = 0;
    for dataset in datasets {
        for (path, content) in &dataset.files {
            backend.write(&dataset.agent, path, content).await?;
            written += 1;
            on_progress("indexing", written, total_files);
        }
    }
    backend.settle().await?;

    let questions: Vec<(&Dataset, &Question)> = datasets
        .iter()
        .flat_map(|d| d.questions.iter().map(move |q| (d, q)))
        .collect();
    let mut out = Vec::new();
    for mode in [Mode::Text, Mode::Vector, Mode::Hybrid] {
        let mut scores: Vec<(&str, Scores)> = Vec::new();
        let mut note = None;
        for (i, (dataset, q)) in questions.iter().enumerate() {
            let results = backend
                .search(&dataset.agent, &q.question, limit, mode, &dataset.today)
                .await
                .map_err(|e| format!("question {}: {e}", q.id))?;
            if results.mode != mode {
                note = Some(format!(
                    "ran as {}: {}",
                    mode_name(results.mode),
                    results.note.clone().unwrap_or_default()
                ));
            }
            let texts: Vec<String> = results
                .hits
                .iter()
                .map(|h| {
                    let file = dataset.files.iter().find(|(p, _)| *p == h.path);
                    file.map_or_else(String::new, |(_, content)| {
                        lines_of(content, h.start_line, h.end_line)
                    })
                })
                .collect();
            let hits: Vec<Found<'_>> = results
                .hits
                .iter()
                .zip(&texts)
                .map(|(h, text)| Found {
                    path: &h.path,
                    start_line: h.start_line,
                    text,
                })
                .collect();
            scores.push((&q.kind, score(&q.evidence, &hits)));
            if dump.is_some() {
                let hits: Vec<serde_json::Value> = results
                    .hits
                    .iter()
                    .zip(&texts)
                    .map(|(h, text)| {
                        serde_json::json!({"path": h.path, "start": h.start_line, "end": h.end_line,
                            "score": h.score, "chars": text.chars().count()})
                    })
                    .collect();
                dumped.push_str(
                    &serde_json::json!({"id": q.id, "mode": mode_name(mode), "kind": q.kind,
                        "question": q.question, "evidence": q.evidence.iter()
                            .map(|e| serde_json::json!([e.path, e.start, e.end])).collect::<Vec<_>>(),
                        "hits": hits})
                    .to_string(),
                );
                dumped.push('\n');
            }
            on_progress(&format!("{} questions", mode_name(mode)), i + 1, questions.len());
        }
        out.extend(aggregate(mode, &scores, note.as_deref()));
    }
    if let Some(path) = dump {
        std::fs::write(path, dumped).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(out)
}

/// One mode's metrics over all questions, then over each kind.
fn aggregate(mode: Mode, scores: &[(&str, Scores)], note: Option<&str>) -> Vec<Metrics> {
    let mut kinds = vec!["all"];
    for (kind, _) in scores {
        if !kinds.contains(kind) {
            kinds.push(kind);
        }
    }
    kinds
        .into_iter()
        .map(|kind| {
            let picked: Vec<&Scores> = scores
                .iter()
                .filter(|(k, _)| kind == "all" || *k == kind)
                .map(|(_, s)| s)
                .collect();
            let n = picked.len().max(1) as f64;
            Metrics {
                mode,
                kind: kind.to_string(),
                recall: [0, 1, 2].map(|i| picked.iter().map(|s| s.0[i]).sum::<f64>() / n),
                mrr: picked.iter().map(|s| s.1).sum::<f64>() / n,
                budget: [0, 1].map(|i| picked.iter().map(|s| s.2[i]).sum::<f64>() / n),
                questions: picked.len(),
                note: note.map(str::to_string),
            }
        })
        .collect()
}

/// The metrics as markdown: every mode over all questions, then each kind.
pub fn table(metrics: &[Metrics]) -> String {
    let mut out = String::from(
        "| questions | mode | recall@1 | recall@5 | recall@10 | MRR | in 2k chars | in 8k chars | n |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    let mut kinds: Vec<&str> = Vec::new();
    for m in metrics {
        if !kinds.contains(&m.kind.as_str()) {
            kinds.push(&m.kind);
        }
    }
    for kind in kinds {
        for m in metrics.iter().filter(|m| m.kind == kind) {
            out.push_str(&format!(
                "| {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {} |\n",
                m.kind,
                mode_name(m.mode),
                m.recall[0],
                m.recall[1],
                m.recall[2],
                m.mrr,
                m.budget[0],
                m.budget[1],
                m.questions
            ));
        }
    }
    out.push_str(&crate::eval::mode_notes(
        metrics.iter().map(|m| (m.mode, m.note.as_deref())),
    ));
    out
}

/// The metrics of one mode over one kind of question (`all` for every one).
pub fn of<'a>(metrics: &'a [Metrics], mode: Mode, kind: &str) -> Option<&'a Metrics> {
    metrics.iter().find(|m| m.mode == mode && m.kind == kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(path: &str, start: usize, end: usize) -> Evidence {
        Evidence {
            path: path.into(),
            start,
            end,
        }
    }

    #[test]
    fn evidence_lines_count_where_hits_hold_them() {
        let hits = [
            Found {
                path: "a.md",
                start_line: 1,
                text: "one\ntwo",
            },
            Found {
                path: "b.md",
                start_line: 5,
                text: "five\nsix",
            },
        ];
        // One of two lines at rank 1, the other at rank 2.
        let (recall, rr, budget) = score(&[ev("a.md", 2, 2), ev("b.md", 6, 6)], &hits);
        assert_eq!(recall, [0.5, 1.0, 1.0]);
        assert_eq!(rr, 1.0);
        assert_eq!(budget, [1.0, 1.0]);
        // Not found at all, or only in another file with the same line numbers.
        let (recall, rr, _) = score(&[ev("c.md", 1, 2)], &hits);
        assert_eq!((recall, rr), ([0.0; 3], 0.0));
        let (recall, rr, _) = score(&[ev("b.md", 1, 4)], &hits);
        assert_eq!((recall, rr), ([0.0; 3], 0.0));
    }

    #[test]
    fn the_budget_counts_characters_of_hits_in_order() {
        let long = "x".repeat(2_500);
        let hits = [
            Found {
                path: "a.md",
                start_line: 1,
                text: &long,
            },
            Found {
                path: "b.md",
                start_line: 1,
                text: "answer",
            },
        ];
        let (recall, rr, budget) = score(&[ev("b.md", 1, 1)], &hits);
        assert_eq!(recall, [0.0, 1.0, 1.0]);
        assert_eq!(rr, 0.5);
        assert_eq!(budget, [0.0, 1.0]);
    }
}
