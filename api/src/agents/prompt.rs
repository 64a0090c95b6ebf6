//! The prompt of an agent run, composed fresh each turn from its files, in
//! two parts so that provider prompt caches hit:
//!
//! - the stable part, the system message: a header, IDENTITY, SOUL, USER,
//!   AGENTS, TOOLS, MEMORY.md and BOOTSTRAP.md while it exists, then the
//!   names and descriptions of the skills the agent can load. It changes only
//!   when those files do, so it is a byte-identical prefix across turns;
//! - the volatile context: the current date and time in the agent's timezone,
//!   the daily logs of yesterday and today, relevant memory hits when asked
//!   for, pending inbox messages. It goes in an `<onyx-context>` block at the
//!   start of the newest user message, after the history, so the history stays
//!   part of the cached prefix too (a volatile system message before the history
//!   would end the shared prefix there on every turn). The session log keeps
//!   the user's message without it.
//!
//! Each file is capped at 20,000 characters (70% head + 20% tail, with a
//! visible marker); missing files are skipped.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use futures::future::join_all;

use crate::clock;
use crate::inbox::InboxMessage;
use crate::memory::{Excerpt, Memory, Mode, paths};
use crate::providers::types::{Message, Role};

pub const FILE_CAP: usize = 20_000;
const PERSONA: [&str; 5] = ["IDENTITY.md", "SOUL.md", "USER.md", "AGENTS.md", "TOOLS.md"];
const MEMORY_HITS: usize = 5;

/// Keeps a file under `cap` characters: 70% from the start, 20% from the end.
pub fn truncate(text: &str, cap: usize) -> String {
    let total = text.chars().count();
    if total <= cap {
        return text.to_string();
    }
    let (head, tail) = (cap * 7 / 10, cap * 2 / 10);
    let omitted = total - head - tail;
    let start: String = text.chars().take(head).collect();
    let end: String = text.chars().skip(total - tail).collect();
    format!("{start}\n\n[… {omitted} characters omitted: the file is longer than {cap} …]\n\n{end}")
}

/// The bytes read of each end of a long daily log: enough for its share of
/// `FILE_CAP` characters at UTF-8's four bytes a character.
const LOG_HEAD_BYTES: u64 = (FILE_CAP * 7 / 10 * 4) as u64;
const LOG_TAIL_BYTES: u64 = (FILE_CAP * 2 / 10 * 4) as u64;

/// A daily log for the prompt, without `session`'s own lines, within
/// `FILE_CAP`: a long log's start and end only (what lies between is never read).
async fn daily_log(memory: &Memory, agent: &str, path: &str, session: Option<&str>) -> Option<String> {
    let excerpt = memory
        .read_excerpt(agent, path, LOG_HEAD_BYTES, LOG_TAIL_BYTES)
        .await
        .ok()??;
    match excerpt {
        Excerpt::Whole(log) => without_session(&log, session)
            .filter(|log| !log.trim().is_empty())
            .map(|log| truncate(log.trim(), FILE_CAP)),
        Excerpt::Ends {
            head,
            tail,
            omitted_bytes,
        } => {
            let head = without_session(&head, session).unwrap_or_default();
            let tail = without_session(&tail, session).unwrap_or_default();
            if head.trim().is_empty() && tail.trim().is_empty() {
                return None;
            }
            let start: String = head.trim().chars().take(FILE_CAP * 7 / 10).collect();
            let tail = tail.trim();
            let skip = tail.chars().count().saturating_sub(FILE_CAP * 2 / 10);
            let end: String = tail.chars().skip(skip).collect();
            Some(format!(
                "{start}\n\n[… {omitted_bytes} bytes or more omitted: the file is longer than {FILE_CAP} characters …]\n\n{end}"
            ))
        }
    }
}

/// What went into a prompt, for the UI and tests.
#[derive(Debug, Clone)]
pub struct Composed {
    /// The system message: the same bytes every turn while the files are unchanged.
    pub stable: String,
    /// The `<onyx-context>` block that starts the newest user message.
    pub context: String,
    /// The files and sections included, stable ones first, in order.
    pub sections: Vec<String>,
}

pub const CONTEXT_OPEN: &str = "<onyx-context>";
pub const CONTEXT_CLOSE: &str = "</onyx-context>";

impl Composed {
    /// The messages to send: the stable system message, the client's own
    /// system messages, then the conversation with the context put at the
    /// start of its newest user message (or, with none, as a user message of
    /// its own at the end).
    pub fn messages(&self, client_system: &[Message], conversation: &[Message]) -> Vec<Message> {
        let mut messages = vec![Message::system(self.stable.clone())];
        messages.extend(client_system.iter().cloned());
        let start = messages.len();
        messages.extend(conversation.iter().cloned());
        match messages[start..].iter().rposition(|m| m.role == Role::User) {
            Some(i) => messages[start + i].prepend_text(&self.context),
            None => messages.push(Message::user(self.context.clone())),
        }
        messages
    }
}

/// The `prompt_cache_key` of an agent's requests: one per session, so a
/// provider routes a conversation's turns to the cache that holds its prefix.
pub fn cache_key(agent: &str, session: Option<&str>) -> String {
    match session {
        Some(session) => format!("onyx-{session}"),
        None => format!("onyx-agent-{agent}"),
    }
}

pub struct Inputs<'a> {
    pub agent: &'a str,
    /// Now, and the agent's timezone: they decide "today" and "yesterday".
    pub now: DateTime<Utc>,
    pub timezone: Tz,
    /// The session of the run: its own lines in the daily logs are left out
    /// (the conversation already holds them, and they would grow the
    /// uncached part of every turn).
    pub session: Option<&'a str>,
    pub inbox: &'a [InboxMessage],
    /// The user's message, when relevant memory should be searched and added.
    pub memory_query: Option<&'a str>,
    /// The skills the agent can load (listed in the stable part).
    pub skills: &'a [crate::skills::SkillSummary],
}

async fn read(memory: &Memory, agent: &str, path: &str) -> Option<String> {
    memory
        .read_file(agent, path)
        .await
        .ok()
        .map(|f| f.content)
        .filter(|c| !c.trim().is_empty())
}

/// A daily log without the lines the runtime wrote for `session`'s turns;
/// `None` when nothing but headings is left.
fn without_session(log: &str, session: Option<&str>) -> Option<String> {
    let Some(session) = session else {
        return Some(log.to_string());
    };
    let own = format!(" session {session}: ");
    let kept: Vec<&str> = log.lines().filter(|line| !line.contains(&own)).collect();
    kept.iter()
        .any(|line| !line.trim().is_empty() && !line.starts_with('#'))
        .then(|| kept.join("\n"))
}

pub async fn compose(memory: &Memory, inputs: Inputs<'_>) -> Composed {
    let agent = inputs.agent;
    let yesterday_log = paths::daily_path(&clock::day_before_in(inputs.now, inputs.timezone));
    let today_log = paths::daily_path(&clock::day_in(inputs.now, inputs.timezone));
    let wanted: Vec<&str> = PERSONA
        .iter()
        .copied()
        .chain([paths::CURATED, "BOOTSTRAP.md"])
        .collect();
    let (contents, yesterday, today) = tokio::join!(
        join_all(wanted.iter().map(|path| read(memory, agent, path))),
        daily_log(memory, agent, &yesterday_log, inputs.session),
        daily_log(memory, agent, &today_log, inputs.session),
    );
    let (mut stable, mut volatile, mut sections) = (Vec::new(), Vec::new(), Vec::new());
    let mut add = |title: String, body: &str, parts: &mut Vec<String>| {
        parts.push(format!("## {title}\n\n{}", truncate(body.trim(), FILE_CAP)));
        sections.push(title);
    };
    for (path, content) in wanted.iter().zip(&contents) {
        if let Some(content) = content {
            add((*path).to_string(), content, &mut stable);
        }
    }
    if !inputs.skills.is_empty() {
        let list: Vec<String> = inputs
            .skills
            .iter()
            .map(|s| format!("- {}: {}", s.name, crate::text::one_line(&s.description, 300)))
            .collect();
        let body = format!(
            "Instructions for particular tasks. When a task matches one, load it with the `skill` tool \
             ({{\"name\": \"…\"}}) and follow it:\n{}",
            list.join("\n")
        );
        add("Skills".into(), &body, &mut stable);
    }
    for (path, label, content) in [
        (&yesterday_log, "yesterday", yesterday),
        (&today_log, "today", today),
    ] {
        // Already within the cap: `add` leaves it as it is.
        if let Some(content) = content {
            add(format!("{path} ({label})"), &content, &mut volatile);
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
        add("Relevant memory".into(), &hits.join("\n"), &mut volatile);
    }
    if !inputs.inbox.is_empty() {
        let lines: Vec<String> = inputs
            .inbox
            .iter()
            .map(|m| format!("- From {} at {}: {}", m.sender, m.created_at, m.body))
            .collect();
        let body = format!(
            "You have {} new message(s) from other agents:\n{}",
            lines.len(),
            lines.join("\n")
        );
        add("Inbox".into(), &body, &mut volatile);
    }
    let header = format!(
        "You are the Onyx agent \"{agent}\". The sections below are your workspace files and memory. \
         Onyx starts the newest user message with an {CONTEXT_OPEN} block (the user did not write it): \
         the current date and time in your timezone, your daily logs of yesterday and today, and, when \
         there are any, relevant memory and new messages from other agents."
    );
    let now = format!("Now: {}.", clock::local_time_line(inputs.now, inputs.timezone));
    Composed {
        stable: std::iter::once(header)
            .chain(stable)
            .collect::<Vec<_>>()
            .join("\n\n"),
        context: std::iter::once(CONTEXT_OPEN.to_string())
            .chain([now])
            .chain(volatile)
            .chain([CONTEXT_CLOSE.to_string()])
            .collect::<Vec<_>>()
            .join("\n\n"),
        sections,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn composed() -> Composed {
        Composed {
            stable: "STABLE".into(),
            context: "<onyx-context>\n\nNow\n\n</onyx-context>".into(),
            sections: Vec::new(),
        }
    }

    /// A run at 23:30 on 22 November in Los Angeles (07:30 on the 23rd in
    /// UTC) writes and reads the 22nd's log, and says so in the prompt.
    #[tokio::test]
    async fn a_run_at_2330_in_los_angeles_lives_in_that_day_not_utcs() {
        use crate::memory::{NoteTarget, Settings};
        use crate::storage::{Db, LocalStore, ObjectStore};
        let dir = tempfile::tempdir().unwrap();
        let objects: std::sync::Arc<dyn ObjectStore> = std::sync::Arc::new(LocalStore::new(dir.path()));
        objects.ensure_buckets().await.unwrap();
        let memory = Memory::new(objects, Db::scratch().await, None, Settings::default());
        let la: Tz = "America/Los_Angeles".parse().unwrap();
        let at = clock::parse_stamp("2026-11-23T07:30:00Z").unwrap();
        let written = memory
            .append_note_at("main", NoteTarget::Daily(la), "late walk", at)
            .await
            .unwrap();
        assert_eq!(written.path, "memory/2026-11-22.md");
        let log = memory.read_file("main", &written.path).await.unwrap().content;
        assert_eq!(log, "# 2026-11-22\n\n- 23:30 late walk\n");
        memory
            .append_note_at("main", NoteTarget::Daily(chrono_tz::UTC), "utc note", at)
            .await
            .unwrap();

        let inputs = |timezone| Inputs {
            agent: "main",
            now: at,
            timezone,
            session: None,
            inbox: &[],
            memory_query: None,
            skills: &[],
        };
        let composed = compose(&memory, inputs(la)).await;
        assert!(
            composed
                .context
                .contains("Now: Sunday 2026-11-22 23:30 (America/Los_Angeles, UTC-08:00)."),
            "{}",
            composed.context
        );
        assert!(
            composed
                .context
                .contains("## memory/2026-11-22.md (today)\n\n# 2026-11-22\n\n- 23:30 late walk")
        );
        assert!(!composed.context.contains("utc note"), "{}", composed.context);
        assert!(
            !composed.stable.contains("2026-11-2"),
            "no date in the stable part"
        );
        let in_utc = compose(&memory, inputs(chrono_tz::UTC)).await;
        assert!(in_utc.context.contains("## memory/2026-11-23.md (today)"));
        assert!(in_utc.context.contains("## memory/2026-11-22.md (yesterday)"));
        assert_eq!(
            in_utc.stable, composed.stable,
            "the stable part does not depend on the time"
        );
    }

    #[test]
    fn a_sessions_own_daily_log_lines_are_left_out() {
        let log = "# 2026-11-23\n\n- 09:00 session s1: asked “a” → answered “b”\n- 09:05 walked the dog\n";
        assert_eq!(
            without_session(log, Some("s1")).unwrap(),
            "# 2026-11-23\n\n- 09:05 walked the dog"
        );
        assert_eq!(without_session(log, None).unwrap(), log);
        assert_eq!(without_session(log, Some("s2")).unwrap().lines().count(), 4);
        let only_own = "# 2026-11-23\n\n- 09:00 session s1: asked “a” → answered “b”\n";
        assert_eq!(without_session(only_own, Some("s1")), None);
    }

    #[test]
    fn the_context_starts_the_newest_user_message_after_a_stable_prefix() {
        let typed = |v: Value| serde_json::from_value::<Vec<Message>>(v).unwrap();
        let sent = |m: Vec<Message>| serde_json::to_value(m).unwrap();
        let client = typed(json!([{"role": "system", "content": "CLIENT"}]));
        let history = typed(json!([
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "one"},
            {"role": "user", "content": "second"},
        ]));
        let messages = sent(composed().messages(&client, &history));
        assert_eq!(messages[0], json!({"role": "system", "content": "STABLE"}));
        assert_eq!(messages[1]["content"], "CLIENT");
        assert_eq!(messages[2]["content"], "first", "older turns are untouched");
        assert_eq!(
            messages[4]["content"],
            "<onyx-context>\n\nNow\n\n</onyx-context>\n\nsecond"
        );

        // Parts stay parts; a conversation ending in tool results keeps its end.
        let parts = typed(json!([
            {"role": "user", "content": [{"type": "text", "text": "look"}]},
            {"role": "assistant", "tool_calls": []},
            {"role": "tool", "tool_call_id": "c", "content": "r"},
        ]));
        let messages = sent(composed().messages(&[], &parts));
        assert_eq!(messages[1]["content"][0]["text"], composed().context);
        assert_eq!(messages[1]["content"][1]["text"], "look");
        assert_eq!(messages[3]["role"], "tool");
        let alone = sent(composed().messages(&[], &[]));
        assert_eq!(alone[1], json!({"role": "user", "content": composed().context}));
    }

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
