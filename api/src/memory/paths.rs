//! Which memory files exist and where: agent ids, file paths inside an agent's
//! folder of the `onyx-memory` bucket, which of them are indexed for search,
//! and the daily-log naming (`memory/YYYY-MM-DD.md`).

use crate::storage::ObjectKey;

/// The pseudo-agent whose documents every agent can read.
pub const SHARED: &str = "_shared";
pub const CURATED: &str = "MEMORY.md";
pub const USER: &str = "USER.md";
const MAX_PATH_BYTES: usize = 512;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PathError {
    #[error("{0:?} is not an agent id (1-64 of a-z, 0-9, '-' and '_', or \"_shared\")")]
    Agent(String),
    #[error("{path:?} is not a memory file path: {reason}")]
    Path { path: String, reason: &'static str },
}

/// Checks an agent id (or `_shared`).
pub fn agent(id: &str) -> Result<&str, PathError> {
    let valid = id == SHARED
        || (!id.is_empty()
            && id.len() <= 64
            && !id.starts_with('_')
            && id
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_'));
    if valid {
        Ok(id)
    } else {
        Err(PathError::Agent(id.into()))
    }
}

/// Checks a file path relative to an agent's folder: plain segments, no
/// `.`/`..`, no absolute or backslash paths, no control characters, and a
/// markdown or text extension.
pub fn file(path: &str) -> Result<&str, PathError> {
    let reject = |reason| {
        Err(PathError::Path {
            path: path.chars().take(100).collect(),
            reason,
        })
    };
    if path.is_empty() || path.len() > MAX_PATH_BYTES {
        return reject("must be 1 to 512 bytes");
    }
    if path.starts_with('/') || path.contains('\\') || path.contains(':') {
        return reject("must be relative, with '/' between folders");
    }
    if path.chars().any(|c| c.is_control()) {
        return reject("must not contain control characters");
    }
    if path
        .split('/')
        .any(|segment| segment.is_empty() || segment == "." || segment == ".." || segment.starts_with('.'))
    {
        return reject("folders and names must be non-empty and must not start with '.'");
    }
    if !(path.ends_with(".md") || path.ends_with(".txt")) {
        return reject("memory files are markdown (.md) or text (.txt)");
    }
    Ok(path)
}

/// The object key of an agent's file (both parts already checked).
pub fn object_key(agent: &str, path: &str) -> Result<ObjectKey, PathError> {
    ObjectKey::new(format!("{agent}/{path}")).map_err(|_| PathError::Path {
        path: path.into(),
        reason: "not a valid storage key",
    })
}

/// Splits an object key back into (agent, path) when it is a valid memory file.
pub fn split_key(key: &str) -> Option<(&str, &str)> {
    let (owner, path) = key.split_once('/')?;
    Some((agent(owner).ok()?, file(path).ok()?))
}

/// What a file is, for ranking: daily logs decay with age, the rest do not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// `MEMORY.md`: curated long-term memory.
    Curated,
    /// `USER.md`: who the user is.
    User,
    /// `memory/YYYY-MM-DD.md`.
    Daily,
    /// Anything else under `memory/`, or a `_shared` document.
    Note,
}

impl FileKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Curated => "curated",
            Self::User => "user",
            Self::Daily => "daily",
            Self::Note => "note",
        }
    }
}

/// Whether a file is searchable memory, and of which kind. Other workspace
/// files (SOUL.md, AGENTS.md, …) are read whole into the prompt instead.
pub fn indexed_kind(agent: &str, path: &str) -> Option<FileKind> {
    if agent == SHARED {
        // Skills are loaded by the `skill` tool, not searched as memory.
        return (!path.starts_with("skills/")).then_some(FileKind::Note);
    }
    match path {
        CURATED => Some(FileKind::Curated),
        USER => Some(FileKind::User),
        _ if path.starts_with("memory/") => Some(if daily_date(path).is_some() {
            FileKind::Daily
        } else {
            FileKind::Note
        }),
        _ => None,
    }
}

/// The day of a daily log (`memory/2026-11-22.md` → `2026-11-22`).
pub fn daily_date(path: &str) -> Option<&str> {
    let day = path.strip_prefix("memory/")?.strip_suffix(".md")?;
    let bytes = day.as_bytes();
    let shape = bytes.len() == 10
        && bytes[4] == b'-'
        && bytes[7] == b'-'
        && bytes
            .iter()
            .enumerate()
            .all(|(i, b)| i == 4 || i == 7 || b.is_ascii_digit());
    shape.then_some(day)
}

/// The daily log path for a day (`YYYY-MM-DD`).
pub fn daily_path(day: &str) -> String {
    format!("memory/{day}.md")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_tricks_are_refused() {
        for bad in [
            "../x.md",
            "memory/../../etc/passwd.md",
            "/etc/x.md",
            "a\\b.md",
            "C:/x.md",
            "memory//x.md",
            "./x.md",
            ".hidden.md",
            "x.sh",
            "memory/x\n.md",
            "",
        ] {
            assert!(file(bad).is_err(), "{bad:?} was accepted");
        }
        for good in ["MEMORY.md", "memory/2026-01-02.md", "notes/a b.txt", "ünï.md"] {
            assert_eq!(file(good), Ok(good));
        }
    }

    #[test]
    fn agent_ids() {
        assert!(agent("main").is_ok());
        assert!(agent("_shared").is_ok());
        for bad in ["", "Main", "_other", "a/b", "..", &"x".repeat(65)] {
            assert!(agent(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn kinds_and_days() {
        assert_eq!(indexed_kind("main", "MEMORY.md"), Some(FileKind::Curated));
        assert_eq!(
            indexed_kind("main", "memory/2026-11-22.md"),
            Some(FileKind::Daily)
        );
        assert_eq!(indexed_kind("main", "memory/projects.md"), Some(FileKind::Note));
        assert_eq!(indexed_kind("main", "SOUL.md"), None);
        assert_eq!(indexed_kind("_shared", "team/handbook.md"), Some(FileKind::Note));
        assert_eq!(daily_date("memory/2026-11-22.md"), Some("2026-11-22"));
        assert_eq!(daily_date("memory/2026-1-22.md"), None);
        assert_eq!(
            split_key("main/memory/2026-11-22.md"),
            Some(("main", "memory/2026-11-22.md"))
        );
        assert_eq!(split_key("main/../x.md"), None);
    }
}
