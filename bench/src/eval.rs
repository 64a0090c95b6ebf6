//! Retrieval quality of Onyx memory search. Takes a corpus (JSONL documents),
//! queries and relevance judgments, indexes the documents through the real
//! memory pipeline (object store files, chunking, the configured embedder,
//! SurrealDB hybrid index), runs every query in text, vector and hybrid mode,
//! and reports recall@1/5/10 and MRR per mode.
//!
//! Formats (one JSON object per line):
//! - corpus: `{"id": "d1", "text": "...", "title": "optional"}`
//! - queries: `{"id": "q1", "query": "...", "relevant": ["d1"]}` (`relevant`
//!   may instead come from a qrels file: `{"query_id", "doc_id", "relevance"}`,
//!   relevance > 0 counts)

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use onyx::config::{LocalEmbedderConfig, ProviderKind, SurrealConfig};
use onyx::memory::{Embedder, Memory, Mode, ProviderEmbedder, Ranking, Settings};
use onyx::storage::{Db, LocalStore, ObjectStore};
use serde::Deserialize;

const AGENT: &str = "eval";
const CUTOFFS: [usize; 3] = [1, 5, 10];

#[derive(Debug, Clone, Deserialize)]
pub struct Document {
    pub id: String,
    pub text: String,
    #[serde(default)]
    pub title: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Query {
    pub id: String,
    pub query: String,
    #[serde(default)]
    pub relevant: Vec<String>,
    /// Optional grouping (`keyword`, `paraphrase`, …) for per-kind recall.
    #[serde(default)]
    pub kind: Option<String>,
}

#[derive(Deserialize)]
struct Judgment {
    query_id: String,
    doc_id: String,
    #[serde(default = "one")]
    relevance: f64,
}

fn one() -> f64 {
    1.0
}

/// Where embeddings come from; `None` in [`evaluate`] means text search only.
#[derive(Debug, Clone)]
pub struct EmbedderSpec {
    pub kind: ProviderKind,
    pub url: url::Url,
    pub model: String,
    pub api_key: Option<String>,
    pub dimensions: Option<u32>,
}

/// The embedder a run uses: a provider's endpoint, or the built-in local
/// model read from a directory of model files.
#[derive(Debug, Clone)]
pub enum Embedding {
    Provider(EmbedderSpec),
    Local(PathBuf),
}

impl From<EmbedderSpec> for Embedding {
    fn from(spec: EmbedderSpec) -> Self {
        Self::Provider(spec)
    }
}

/// The built-in embedder over the all-MiniLM-L6-v2 files in `dir`.
pub fn local_embedder(
    dir: PathBuf,
    threads: Option<usize>,
) -> Result<onyx::memory::local_embedder::LocalEmbedder, String> {
    let config = LocalEmbedderConfig {
        model: "all-MiniLM-L6-v2".into(),
        path: Some(dir.clone()),
        // Unused: the files are read from `dir`.
        download_url: url::Url::parse("http://127.0.0.1:9/").map_err(|e| e.to_string())?,
        threads,
    };
    Ok(onyx::memory::local_embedder::LocalEmbedder::new(&config, &dir))
}

#[derive(Debug, Clone)]
pub struct ModeMetrics {
    pub mode: Mode,
    /// `all`, or a query kind.
    pub kind: String,
    /// Recall at 1, 5 and 10.
    pub recall: [f64; 3],
    pub mrr: f64,
    pub queries: usize,
    /// Set when the mode could not run as asked (e.g. no embedder).
    pub note: Option<String>,
}

fn read_jsonl<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Vec<T>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| serde_json::from_str(line).map_err(|e| format!("{}:{}: {e}", path.display(), i + 1)))
        .collect()
}

pub fn load_corpus(path: &Path) -> Result<Vec<Document>, String> {
    read_jsonl(path)
}

/// Queries with their relevant documents (inline, or from a qrels file).
pub fn load_queries(path: &Path, qrels: Option<&Path>) -> Result<Vec<Query>, String> {
    let mut queries: Vec<Query> = read_jsonl(path)?;
    if let Some(qrels) = qrels {
        let mut relevant: HashMap<String, Vec<String>> = HashMap::new();
        for judgment in read_jsonl::<Judgment>(qrels)? {
            if judgment.relevance > 0.0 {
                relevant
                    .entry(judgment.query_id)
                    .or_default()
                    .push(judgment.doc_id);
            }
        }
        for query in &mut queries {
            query.relevant = relevant.remove(&query.id).unwrap_or_default();
        }
    }
    queries.retain(|q| !q.relevant.is_empty());
    if queries.is_empty() {
        return Err("no query has a relevant document".into());
    }
    Ok(queries)
}

/// A memory file name for a document id (`memory/<id>.md`, unsafe characters replaced).
fn file_for(id: &str, index: usize) -> String {
    let safe: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("memory/{index:06}-{safe}.md")
}

/// A fresh memory service (SurrealDB in memory, files under `work_dir`) with
/// this embedder, its resident index loaded and the embedder checked.
/// `ranking` replaces the default ranking settings.
pub async fn empty_memory(
    embedder: Option<Embedding>,
    work_dir: &Path,
    ranking: Option<Ranking>,
) -> Result<Arc<Memory>, String> {
    let db = Db::connect(&SurrealConfig::at("mem://", "eval"))
        .await
        .map_err(|e| e.to_string())?;
    db.migrate().await.map_err(|e| e.to_string())?;
    let objects: Arc<dyn ObjectStore> = Arc::new(LocalStore::new(work_dir.join("objects")));
    objects.ensure_buckets().await.map_err(|e| e.to_string())?;
    let embedder: Option<Arc<dyn Embedder>> = match embedder {
        None => None,
        Some(Embedding::Local(dir)) => Some(Arc::new(local_embedder(dir, None)?)),
        Some(Embedding::Provider(spec)) => {
            let mut provider =
                onyx::config::detected_provider("embedder", spec.kind, spec.url.clone(), spec.api_key);
            provider.timeout = Duration::from_secs(300);
            let client = onyx::providers::build(&provider).map_err(|e| e.to_string())?;
            let embedder = ProviderEmbedder::new(client, spec.model, spec.dimensions);
            Some(Arc::new(if spec.kind == ProviderKind::Ollama {
                embedder.with_ollama_metadata(&spec.url)
            } else {
                embedder
            }))
        }
    };
    let mut settings = Settings::default();
    if let Some(ranking) = ranking {
        settings.ranking = ranking;
    }
    let memory = Memory::new(objects, db, embedder.clone(), settings);
    memory.prepare_chunking().await.map_err(|e| e.to_string())?;
    // Searches run in the resident index, as in a running replica.
    memory.load_search_index().await.map_err(|e| e.to_string())?;
    if embedder.is_some() {
        memory
            .prepare_embedding(&|_, _| {})
            .await
            .map_err(|e| format!("the embedder did not answer: {e}"))?;
    }
    Ok(memory)
}

/// Indexes the corpus under `work_dir` and scores every mode.
pub async fn evaluate(
    corpus: &[Document],
    queries: &[Query],
    embedder: Option<Embedding>,
    work_dir: &Path,
    on_progress: &(dyn Fn(&str, usize, usize) + Send + Sync),
) -> Result<Vec<ModeMetrics>, String> {
    let memory = empty_memory(embedder, work_dir, None).await?;
    let mut doc_of_path = HashMap::new();
    for (index, doc) in corpus.iter().enumerate() {
        let path = file_for(&doc.id, index);
        let content = match &doc.title {
            Some(title) => format!("# {title}\n\n{}\n", doc.text),
            None => format!("{}\n", doc.text),
        };
        memory
            .write_file(AGENT, &path, content, None)
            .await
            .map_err(|e| format!("indexing {}: {e}", doc.id))?;
        doc_of_path.insert(path, doc.id.clone());
        on_progress("indexing", index + 1, corpus.len());
    }
    memory
        .drain_pending(&|_, _| {})
        .await
        .map_err(|e| e.to_string())?;

    let mut out = Vec::new();
    for mode in [Mode::Text, Mode::Vector, Mode::Hybrid] {
        // (kind, recall at each cutoff, reciprocal rank) per query.
        let mut scores: Vec<(String, [f64; 3], f64)> = Vec::with_capacity(queries.len());
        let mut note = None;
        for (i, query) in queries.iter().enumerate() {
            let results = memory
                .search(AGENT, &query.query, 30, mode)
                .await
                .map_err(|e| format!("query {}: {e}", query.id))?;
            if results.mode != mode {
                note = Some(format!(
                    "ran as {:?}: {}",
                    results.mode,
                    results.note.unwrap_or_default()
                ));
            }
            // Hits are chunks; a document counts once, at its best rank.
            let mut ranked: Vec<&str> = Vec::new();
            for hit in &results.data {
                if let Some(doc) = doc_of_path.get(&hit.path)
                    && !ranked.contains(&doc.as_str())
                {
                    ranked.push(doc);
                }
            }
            let relevant: HashSet<&str> = query.relevant.iter().map(String::as_str).collect();
            let recall = CUTOFFS.map(|cutoff| {
                ranked
                    .iter()
                    .take(cutoff)
                    .filter(|d| relevant.contains(*d))
                    .count() as f64
                    / relevant.len() as f64
            });
            let rr = ranked
                .iter()
                .take(10)
                .position(|d| relevant.contains(d))
                .map_or(0.0, |rank| 1.0 / (rank as f64 + 1.0));
            scores.push((query.kind.clone().unwrap_or_default(), recall, rr));
            on_progress(&format!("{mode:?} queries"), i + 1, queries.len());
        }
        let mut kinds: Vec<String> = vec!["all".into()];
        for (kind, _, _) in &scores {
            if !kind.is_empty() && !kinds.contains(kind) {
                kinds.push(kind.clone());
            }
        }
        for kind in kinds {
            let selected: Vec<&(String, [f64; 3], f64)> = scores
                .iter()
                .filter(|(k, _, _)| kind == "all" || *k == kind)
                .collect();
            let n = selected.len().max(1) as f64;
            let recall = [0, 1, 2].map(|slot| selected.iter().map(|(_, r, _)| r[slot]).sum::<f64>() / n);
            out.push(ModeMetrics {
                mode,
                kind,
                recall,
                mrr: selected.iter().map(|(_, _, rr)| rr).sum::<f64>() / n,
                queries: selected.len(),
                note: note.clone(),
            });
        }
    }
    Ok(out)
}

/// The metrics as markdown tables: every query by mode, then recall@5 by
/// query kind (which leg answers which sort of question).
pub fn table(metrics: &[ModeMetrics]) -> String {
    let mut out = String::from("| mode | recall@1 | recall@5 | recall@10 | MRR | queries |\n");
    out.push_str("| --- | --- | --- | --- | --- | --- |\n");
    for m in metrics.iter().filter(|m| m.kind == "all") {
        out.push_str(&format!(
            "| {} | {:.3} | {:.3} | {:.3} | {:.3} | {} |\n",
            mode_name(m.mode),
            m.recall[0],
            m.recall[1],
            m.recall[2],
            m.mrr,
            m.queries
        ));
    }
    let mut kinds: Vec<&str> = Vec::new();
    for m in metrics.iter().filter(|m| m.kind != "all") {
        if !kinds.contains(&m.kind.as_str()) {
            kinds.push(&m.kind);
        }
    }
    if !kinds.is_empty() {
        out.push_str("\n| query kind | text recall@5 | vector recall@5 | hybrid recall@5 | queries |\n");
        out.push_str("| --- | --- | --- | --- | --- |\n");
        for kind in kinds {
            let cell = |mode: Mode| {
                metrics
                    .iter()
                    .find(|m| m.mode == mode && m.kind == kind)
                    .map_or_else(|| "-".to_string(), |m| format!("{:.3}", m.recall[1]))
            };
            let count = metrics.iter().find(|m| m.kind == kind).map_or(0, |m| m.queries);
            out.push_str(&format!(
                "| {kind} | {} | {} | {} | {count} |\n",
                cell(Mode::Text),
                cell(Mode::Vector),
                cell(Mode::Hybrid)
            ));
        }
    }
    out.push_str(&mode_notes(metrics.iter().map(|m| (m.mode, m.note.as_deref()))));
    out
}

/// What each mode noted (a mode that ran as another), one paragraph each.
pub fn mode_notes<'a>(notes: impl Iterator<Item = (Mode, Option<&'a str>)>) -> String {
    let mut lines: Vec<String> = notes
        .filter_map(|(mode, note)| note.map(|n| format!("{}: {n}", mode_name(mode))))
        .collect();
    lines.dedup();
    lines.iter().map(|note| format!("\n{note}\n")).collect()
}

pub fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Text => "text",
        Mode::Vector => "vector",
        Mode::Hybrid => "hybrid",
    }
}

/// The metrics of one mode over every query.
pub fn overall(metrics: &[ModeMetrics], mode: Mode) -> Option<&ModeMetrics> {
    metrics.iter().find(|m| m.mode == mode && m.kind == "all")
}

/// The metrics of one mode over one kind of query.
pub fn of_kind<'a>(metrics: &'a [ModeMetrics], mode: Mode, kind: &str) -> Option<&'a ModeMetrics> {
    metrics.iter().find(|m| m.mode == mode && m.kind == kind)
}

#[cfg(test)]
mod tests;
