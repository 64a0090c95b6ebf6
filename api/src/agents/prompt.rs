//! The system prompt of an agent run, composed fresh each turn from its files:
//! IDENTITY, SOUL, USER, AGENTS, TOOLS, then memory (MEMORY.md and the daily
//! logs of yesterday and today), relevant memory hits when asked for, pending
//! inbox messages, and BOOTSTRAP.md while it exists. Each file is capped at
//! 20,000 characters (70% head + 20% tail, with a visible marker); missing
//! files are skipped.

use futures::future::join_all;

use crate::inbox::InboxMessage;
use crate::memory::{Memory, Mode, paths};

pub const FILE_CAP: usize = 20_000;
const PERSONA: [&str; 5] = ["IDENTITY.md", "SOUL.md", "USER.md", "AGENTS.md", "TOOLS.md"];
const MEMORY_HITS: usize = 5;

/// Keeps a file under `cap` characters: 70% from the start, 20% from the end.
pub fn truncate(text: &str, cap: usize) -> String {
    let total = text.chars().count();
    if total <= cap {
        return text.to_string();
    }
    let head = cap * 7 / 10;
    let tail = cap * 2 / 10;
    let omitted = total - head - tail;
    let start: String = text.chars().take(head).collect();
    let end: String = text.chars().skip(total - tail).collect();
    format!("{start}\n\n[… {omitted} characters omitted: the file is longer than {cap} …]\n\n{end}")
}

/// What went into a prompt, for the UI and tests.
#[derive(Debug, Clone)]
pub struct Composed {
    pub system: String,
    /// The files and sections included, in order.
    pub sections: Vec<String>,
}

pub struct Inputs<'a> {
    pub agent: &'a str,
    pub today: &'a str,
    pub yesterday: &'a str,
    pub inbox: &'a [InboxMessage],
    /// The user's message, when relevant memory should be searched and added.
    pub memory_query: Option<&'a str>,
}

async fn read(memory: &Memory, agent: &str, path: &str) -> Option<String> {
    memory
        .read_file(agent, path)
        .await
        .ok()
        .map(|f| f.content)
        .filter(|c| !c.trim().is_empty())
}

pub async fn compose(memory: &Memory, inputs: Inputs<'_>) -> Composed {
    let agent = inputs.agent;
    let yesterday_log = paths::daily_path(inputs.yesterday);
    let today_log = paths::daily_path(inputs.today);
    let wanted: Vec<&str> = PERSONA
        .iter()
        .copied()
        .chain([
            paths::CURATED,
            yesterday_log.as_str(),
            today_log.as_str(),
            "BOOTSTRAP.md",
        ])
        .collect();
    let contents = join_all(wanted.iter().map(|path| read(memory, agent, path))).await;
    let mut parts: Vec<String> = Vec::new();
    let mut sections = Vec::new();
    let mut add = |title: String, body: String, parts: &mut Vec<String>| {
        parts.push(format!("## {title}\n\n{}", truncate(body.trim(), FILE_CAP)));
        sections.push(title);
    };
    for (path, content) in wanted.iter().zip(&contents).take(PERSONA.len() + 1) {
        if let Some(content) = content {
            add((*path).to_string(), content.clone(), &mut parts);
        }
    }
    for (label, content) in [
        ("yesterday", &contents[PERSONA.len() + 1]),
        ("today", &contents[PERSONA.len() + 2]),
    ] {
        if let Some(content) = content {
            let path = if label == "today" {
                &today_log
            } else {
                &yesterday_log
            };
            add(format!("{path} ({label})"), content.clone(), &mut parts);
        }
    }
    if let Some(query) = inputs.memory_query
        && let Ok(results) = memory.search(agent, query, MEMORY_HITS, Mode::Hybrid).await
        && !results.data.is_empty()
    {
        let hits: Vec<String> = results
            .data
            .iter()
            .map(|h| {
                format!(
                    "- {}/{}:{}-{} {}",
                    h.agent,
                    h.path,
                    h.start_line,
                    h.end_line,
                    h.snippet.replace('\n', " ")
                )
            })
            .collect();
        add("Relevant memory".into(), hits.join("\n"), &mut parts);
    }
    if !inputs.inbox.is_empty() {
        let lines: Vec<String> = inputs
            .inbox
            .iter()
            .map(|m| format!("- From {} at {}: {}", m.sender, m.created_at, m.body))
            .collect();
        add(
            "Inbox".into(),
            format!(
                "You have {} new message(s) from other agents:\n{}",
                lines.len(),
                lines.join("\n")
            ),
            &mut parts,
        );
    }
    if let Some(bootstrap) = &contents[PERSONA.len() + 3] {
        add("BOOTSTRAP.md".into(), bootstrap.clone(), &mut parts);
    }
    let header = format!(
        "You are the Onyx agent \"{agent}\". Today is {} (UTC). The sections below are your workspace files and memory.",
        inputs.today
    );
    Composed {
        system: std::iter::once(header)
            .chain(parts)
            .collect::<Vec<_>>()
            .join("\n\n"),
        sections,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_keeps_head_and_tail_with_a_marker() {
        let text: String = (0..30_000).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
        let cut = truncate(&text, FILE_CAP);
        assert!(cut.starts_with(&text[..14_000]));
        assert!(cut.ends_with(&text[30_000 - 4_000..]));
        assert!(cut.contains("[… 12000 characters omitted"));
        assert_eq!(truncate("short", FILE_CAP), "short");
        let exact: String = "x".repeat(FILE_CAP);
        assert_eq!(truncate(&exact, FILE_CAP), exact);
    }
}
