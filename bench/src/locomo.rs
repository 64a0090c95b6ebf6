//! LoCoMo conversations (snap-research/locomo, CC BY-NC 4.0: evaluation only,
//! never copied into the repository) as memory-recall datasets, by the
//! procedure of issue 42:
//! - each conversation is one agent; each session one file
//!   `memory/session-NN.md`: `# Session N (<date_time>)`, a blank line, then
//!   one line per turn `[D1:3] Speaker: text`, with ` [shares a photo: <caption>]`
//!   when the turn has one;
//! - the questions of categories 1–4 that have evidence (5 is adversarial),
//!   each evidence turn being its line in its session's file.
//!
//! The data is read from `../shared/data/locomo-dev/` beside the checkout
//! ([`default_dir`]); nothing derived from it is written into the repository.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::recall::{Dataset, Evidence, Question};

/// LoCoMo's question categories (its own numbering; 5, adversarial, is left out).
pub fn category_name(category: u8) -> Option<&'static str> {
    match category {
        1 => Some("multi-hop"),
        2 => Some("temporal"),
        3 => Some("open-domain"),
        4 => Some("single-hop"),
        _ => None,
    }
}

/// `../shared/data/locomo-dev` beside the checkout that holds this crate.
pub fn default_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/locomo-dev")
}

/// A conversation file: `speaker_a`, `speaker_b`, `session_N`,
/// `session_N_date_time`, LoCoMo's own annotations (unused), and `qa`.
#[derive(Deserialize)]
struct Conversation {
    qa: Vec<Qa>,
    #[serde(flatten)]
    rest: serde_json::Map<String, serde_json::Value>,
}

#[derive(Deserialize)]
struct Turn {
    speaker: String,
    dia_id: String,
    text: String,
    #[serde(default)]
    blip_caption: Option<String>,
}

#[derive(Deserialize)]
struct Qa {
    question: String,
    #[serde(default)]
    evidence: Vec<String>,
    category: u8,
}

/// Every conversation in `dir` (`*.json`, by name), one dataset each.
pub fn load_dir(dir: &Path) -> Result<Vec<Dataset>, String> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e} (the LoCoMo dev half is read from there)", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    names.sort();
    if names.is_empty() {
        return Err(format!("{}: no LoCoMo conversation (*.json)", dir.display()));
    }
    names.iter().map(PathBuf::as_path).map(load).collect()
}

/// One conversation file as a dataset; its agent is `locomo-<file stem>`.
pub fn load(path: &Path) -> Result<Dataset, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let parsed: Conversation = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (files, lines) = sessions(&parsed.rest).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut questions = Vec::new();
    for (i, qa) in parsed.qa.iter().enumerate() {
        let Some(kind) = category_name(qa.category) else {
            continue;
        };
        if qa.evidence.is_empty() {
            continue;
        }
        // An evidence id naming no turn (LoCoMo has a few typos) stays
        // wanted and is never found, as the procedure counts it.
        let evidence = qa
            .evidence
            .iter()
            .map(|id| match lines.get(id.as_str()) {
                Some((path, line)) => Evidence {
                    path: path.clone(),
                    start: *line,
                    end: *line,
                },
                None => Evidence {
                    path: format!("unknown turn {id}"),
                    start: 0,
                    end: 0,
                },
            })
            .collect();
        questions.push(Question {
            id: format!("{stem}-{i}"),
            kind: kind.into(),
            question: qa.question.clone(),
            evidence,
        });
    }
    Ok(Dataset {
        // No daily logs: the day only matters for their decay.
        today: "2026-01-01".into(),
        agent: format!("locomo-{stem}"),
        files,
        questions,
    })
}

type Files = Vec<(String, String)>;
/// Each turn's (file, line), by dia id.
type Lines = HashMap<String, (String, usize)>;

/// The sessions as memory files, from `session_1` to the first without turns.
fn sessions(conversation: &serde_json::Map<String, serde_json::Value>) -> Result<(Files, Lines), String> {
    let mut files = Vec::new();
    let mut lines = HashMap::new();
    for n in 1.. {
        let turns: Vec<Turn> = match conversation.get(&format!("session_{n}")) {
            Some(value) => serde_json::from_value(value.clone()).map_err(|e| format!("session_{n}: {e}"))?,
            None => Vec::new(),
        };
        if turns.is_empty() {
            break;
        }
        let when = conversation
            .get(&format!("session_{n}_date_time"))
            .and_then(|v| v.as_str())
            .unwrap_or_default();
        let path = format!("memory/session-{n:02}.md");
        let mut content = format!("# Session {n} ({when})\n\n");
        for (i, turn) in turns.iter().enumerate() {
            content.push_str(&format!("[{}] {}: {}", turn.dia_id, turn.speaker, turn.text));
            if let Some(caption) = &turn.blip_caption {
                content.push_str(&format!(" [shares a photo: {caption}]"));
            }
            content.push('\n');
            lines.insert(turn.dia_id.clone(), (path.clone(), i + 3));
        }
        files.push((path, content));
    }
    Ok((files, lines))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_become_files_and_evidence_their_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("7.json");
        let conversation = serde_json::json!({
                "speaker_a": "Ann", "speaker_b": "Bo",
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": [
                    {"speaker": "Ann", "dia_id": "D1:1", "text": "Hi Bo!"},
                    {"speaker": "Bo", "dia_id": "D1:2", "text": "Look at this.", "blip_caption": "a red kite"}
                ],
                "session_2_date_time": "later",
                "session_2": [{"speaker": "Ann", "dia_id": "D2:1", "text": "Back again."}],
                "session_3_date_time": "never",
                "session_3": [],
                "session_4": [{"speaker": "Ann", "dia_id": "D4:1", "text": "after the gap"}],
            "qa": [
                {"question": "What did Bo show?", "answer": "a kite", "evidence": ["D1:2", "D2:1"], "category": 4},
                {"question": "Trick?", "evidence": ["D1:1"], "category": 5},
                {"question": "No evidence?", "evidence": [], "category": 1},
                {"question": "Typo?", "evidence": ["D:1:1"], "category": 2}
            ]
        });
        std::fs::write(&path, conversation.to_string()).unwrap();
        let dataset = load(&path).unwrap();
        assert_eq!(dataset.agent, "locomo-7");
        assert_eq!(
            dataset.files,
            vec![
                (
                    "memory/session-01.md".to_string(),
                    "# Session 1 (1:56 pm on 8 May, 2023)\n\n[D1:1] Ann: Hi Bo!\n\
                     [D1:2] Bo: Look at this. [shares a photo: a red kite]\n"
                        .to_string()
                ),
                (
                    "memory/session-02.md".to_string(),
                    "# Session 2 (later)\n\n[D2:1] Ann: Back again.\n".to_string()
                ),
            ],
            "sessions stop at the first without turns"
        );
        type Summary<'a> = (&'a str, &'a str, Vec<(&'a str, usize)>);
        let summary: Vec<Summary<'_>> = dataset
            .questions
            .iter()
            .map(|q| {
                (
                    q.id.as_str(),
                    q.kind.as_str(),
                    q.evidence.iter().map(|e| (e.path.as_str(), e.start)).collect(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                (
                    "7-0",
                    "single-hop",
                    vec![("memory/session-01.md", 4), ("memory/session-02.md", 3)]
                ),
                ("7-3", "temporal", vec![("unknown turn D:1:1", 0)]),
            ]
        );
    }

    #[test]
    fn a_missing_directory_is_an_error_that_names_it() {
        let Err(err) = load_dir(Path::new("/nonexistent/locomo")) else {
            panic!("a missing directory was read");
        };
        assert!(err.contains("/nonexistent/locomo"), "{err}");
    }
}
