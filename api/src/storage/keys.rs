//! Object keys: relative, `/`-separated paths with no `..`, no empty or dot
//! segments, no control characters and no backslashes, so a key can never
//! address anything outside its bucket on either backend.

use std::fmt;

const MAX_KEY_BYTES: usize = 1024;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey(String);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid object key {key:?}: {reason}")]
pub struct InvalidKey {
    pub key: String,
    pub reason: &'static str,
}

impl ObjectKey {
    pub fn new(key: impl Into<String>) -> Result<Self, InvalidKey> {
        let key = key.into();
        let reason = if key.is_empty() {
            Some("empty")
        } else if key.len() > MAX_KEY_BYTES {
            Some("longer than 1024 bytes")
        } else if key.starts_with('/') {
            Some("absolute paths are not allowed")
        } else if key.chars().any(|c| c.is_control()) {
            Some("control characters are not allowed")
        } else if key.contains('\\') {
            Some("backslashes are not allowed")
        } else if key.split('/').any(|s| s.is_empty() || s == "." || s == "..") {
            Some("empty, '.' and '..' path segments are not allowed")
        } else {
            None
        };
        match reason {
            Some(reason) => Err(InvalidKey { key, reason }),
            None => Ok(Self(key)),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_plain_relative_paths() {
        for key in [
            "MEMORY.md",
            "main/memory/2026-11-22.md",
            "_shared/notes v2.md",
            "a/b/c.jsonl",
        ] {
            assert_eq!(ObjectKey::new(key).unwrap().as_str(), key);
        }
    }

    #[test]
    fn refuses_path_tricks() {
        for key in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../b",
            "a//b",
            "a/./b",
            "a/",
            "a\\b",
            "a\nb",
            "a\0b",
            "..",
            ".",
        ] {
            assert!(ObjectKey::new(key).is_err(), "{key:?} was accepted");
        }
        assert!(ObjectKey::new("x".repeat(1025)).is_err());
    }
}
