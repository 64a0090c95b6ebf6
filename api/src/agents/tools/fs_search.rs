//! `glob` and `grep`: finding files and lines in the agent's work dir.
//! Read-only, so `safe` mode offers them. They walk the work dir through the
//! same handle as the file tools ([`sandbox::Beneath`]): a starting `path`
//! must be relative and without `..`, a symbolic link is never followed
//! (neither as the start nor met on the way), so nothing outside the work
//! dir is listed or read. Binary files (a NUL byte near the start) are
//! skipped; the walk, each file and the answer are bounded, and an answer
//! that was cut says so.

use std::fmt::Write as _;

use glob::{MatchOptions, Pattern};
use regex::{Regex, RegexBuilder};
use serde_json::{Value, json};

use super::fs::{check, in_work_dir};
use super::tool::{Needs, Tool};
use super::{ToolContext, ToolError, ToolKind, fail, text};
use crate::sandbox::{Beneath, Kind};

/// Entries looked at in one walk, at most.
const MAX_VISITED: usize = 20_000;
/// Paths `glob` lists, at most.
const MAX_PATHS: usize = 500;
/// Matching lines `grep` shows, at most.
const MAX_MATCHES: usize = 200;
/// Bytes of one file `grep` reads.
const MAX_FILE: u64 = 1024 * 1024;
/// Bytes of one line shown.
const MAX_LINE: usize = 300;
/// Bytes of an answer.
const MAX_OUTPUT: usize = 32 * 1024;
/// How far into a file a NUL byte marks it as binary.
const BINARY_SNIFF: usize = 8 * 1024;
/// Bytes a compiled `grep` pattern may take.
const MAX_REGEX: usize = 1024 * 1024;

pub const GLOB: Tool = Tool {
    name: "glob",
    description: "Find files in your work directory by name pattern (* matches within a folder, ** across folders, e.g. **/*.md). Returns their paths, sorted.",
    parameters: || {
        json!({"type": "object", "properties": {
            "pattern": {"type": "string", "description": "e.g. *.md, notes/**/*.txt"},
            "path": {"type": "string", "description": "Folder to search in, relative to your work directory (default: all of it)"}
        }, "required": ["pattern"]})
    },
    kind: ToolKind::Read,
    needs: Needs::Nothing,
    over_mcp: false,
    asks_first: None,
    call: |ctx, args| Box::pin(glob(ctx, args)),
};

pub const GREP: Tool = Tool {
    name: "grep",
    description: "Search the text files of your work directory for a regular expression (or, with literal: true, plain text). Returns path:line: text for each matching line.",
    parameters: || {
        json!({"type": "object", "properties": {
            "pattern": {"type": "string", "description": "A regular expression (Rust syntax), or plain text with literal: true"},
            "literal": {"type": "boolean", "description": "Match the pattern as plain text (default false)"},
            "ignore_case": {"type": "boolean"},
            "glob": {"type": "string", "description": "Only files matching this pattern, e.g. *.md or src/**/*.rs (a pattern without / matches file names)"},
            "path": {"type": "string", "description": "Folder to search in, relative to your work directory (default: all of it)"}
        }, "required": ["pattern"]})
    },
    kind: ToolKind::Read,
    needs: Needs::Nothing,
    over_mcp: false,
    asks_first: None,
    call: |ctx, args| Box::pin(grep(ctx, args)),
};

/// In `group:fs` with the other file tools.
pub const TOOLS: &[Tool] = &[GLOB, GREP];

const MATCH: MatchOptions = MatchOptions {
    case_sensitive: true,
    require_literal_separator: true,
    require_literal_leading_dot: false,
};

/// A name pattern: checked like a path (relative, no `..`), then compiled.
fn pattern(text: &str, argument: &str) -> Result<Pattern, ToolError> {
    check(text).map_err(|err| fail!("{argument}: {err}"))?;
    Pattern::new(text).map_err(|err| fail!("{argument} {text:?} is not a valid pattern: {err}"))
}

/// The start of a walk: the `path` argument (checked), else the work dir.
fn start(args: &Value) -> Result<String, ToolError> {
    let relative = args["path"].as_str().filter(|p| !p.is_empty()).unwrap_or(".");
    check(relative)?;
    Ok(relative.trim_end_matches('/').to_string())
}

/// A file met by [`walk`]: its path from the work dir and from the start.
struct Found {
    path: String,
    below_start: String,
}

/// The regular files beneath `start`, in name order, links never followed;
/// `visit` returns `false` to stop. Returns whether the walk hit
/// [`MAX_VISITED`].
fn walk(dir: &Beneath, start: &str, mut visit: impl FnMut(&Beneath, Found) -> bool) -> std::io::Result<bool> {
    if dir.kind(start)? != Some(Kind::Dir) {
        // Opening it names a link or a missing folder in the error.
        dir.list(start)?;
        return Err(std::io::Error::other(format!("{start} is not a folder")));
    }
    let mut folders = vec![String::new()];
    let mut visited = 0;
    while let Some(folder) = folders.pop() {
        let at = join(start, &folder);
        let mut entries = dir.list(&at)?;
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        let mut subfolders = Vec::new();
        for entry in entries {
            visited += 1;
            if visited > MAX_VISITED {
                return Ok(true);
            }
            let below_start = join(&folder, &entry.name);
            match entry.kind {
                Kind::Dir => subfolders.push(below_start),
                Kind::File => {
                    let found = Found {
                        path: join(start, &below_start),
                        below_start,
                    };
                    if !visit(dir, found) {
                        return Ok(false);
                    }
                }
                Kind::Other => {}
            }
        }
        folders.extend(subfolders.into_iter().rev());
    }
    Ok(false)
}

fn join(folder: &str, name: &str) -> String {
    match folder {
        "" | "." => name.to_string(),
        _ => format!("{folder}/{name}"),
    }
}

async fn glob(ctx: &ToolContext, args: &Value) -> Result<String, ToolError> {
    let wanted = pattern(text(args, "pattern")?, "pattern")?;
    let start = start(args)?;
    let (paths, stopped) = in_work_dir(&ctx.agent.work_dir, &start, move |dir, start| {
        let mut paths = Vec::new();
        let mut more = false;
        let stopped = walk(dir, start, |_, found| {
            if wanted.matches_with(&found.below_start, MATCH) {
                if paths.len() == MAX_PATHS {
                    more = true;
                    return false;
                }
                paths.push(found.path);
            }
            true
        })?;
        Ok((paths, stopped || more))
    })
    .await?;
    if paths.is_empty() && !stopped {
        return Ok("no files match".into());
    }
    let mut paths = paths;
    paths.sort();
    let mut out = paths.join("\n");
    if stopped {
        let _ = write!(
            out,
            "\n[… cut: at most {MAX_PATHS} paths from {MAX_VISITED} entries; narrow the pattern or the path]"
        );
    }
    Ok(out)
}

/// The `grep` pattern: a regular expression, or escaped plain text.
fn matcher(args: &Value) -> Result<Regex, ToolError> {
    let given = text(args, "pattern")?;
    if given.is_empty() {
        return Err("pattern is empty".into());
    }
    let source = match args["literal"].as_bool() {
        Some(true) => regex::escape(given),
        _ => given.to_string(),
    };
    RegexBuilder::new(&source)
        .case_insensitive(args["ignore_case"].as_bool() == Some(true))
        .size_limit(MAX_REGEX)
        .build()
        .map_err(|err| fail!("pattern {given:?} is not a valid regular expression: {err}"))
}

/// Which files `grep` reads: a filter without `/` matches file names.
struct Filter {
    pattern: Option<Pattern>,
    by_name: bool,
}

impl Filter {
    fn new(args: &Value) -> Result<Self, ToolError> {
        let Some(text) = args["glob"].as_str().filter(|g| !g.is_empty()) else {
            return Ok(Self {
                pattern: None,
                by_name: false,
            });
        };
        Ok(Self {
            pattern: Some(pattern(text, "glob")?),
            by_name: !text.contains('/'),
        })
    }

    fn keeps(&self, below_start: &str) -> bool {
        let Some(pattern) = &self.pattern else {
            return true;
        };
        let name = match self.by_name {
            true => below_start.rsplit('/').next().unwrap_or(below_start),
            false => below_start,
        };
        pattern.matches_with(name, MATCH)
    }
}

/// What `grep` found, and what it left out.
#[derive(Default)]
struct Hits {
    out: String,
    lines: usize,
    cut: bool,
    binary: usize,
    partly_read: usize,
}

impl Hits {
    /// Adds one matching line; `false` once the answer is full.
    fn add(&mut self, path: &str, number: usize, line: &str) -> bool {
        let shown = crate::text::ellipsize(line.trim_end_matches('\r'), MAX_LINE);
        let entry = format!("{path}:{number}: {shown}\n");
        if self.lines == MAX_MATCHES || self.out.len() + entry.len() > MAX_OUTPUT {
            self.cut = true;
            return false;
        }
        self.out.push_str(&entry);
        self.lines += 1;
        true
    }

    fn search(&mut self, dir: &Beneath, path: &str, regex: &Regex) -> bool {
        let Ok((bytes, size)) = dir.read_prefix(path, MAX_FILE) else {
            return true;
        };
        if bytes[..bytes.len().min(BINARY_SNIFF)].contains(&0) {
            self.binary += 1;
            return true;
        }
        if size > MAX_FILE {
            self.partly_read += 1;
        }
        let text = String::from_utf8_lossy(&bytes);
        for (index, line) in text.lines().enumerate() {
            if regex.is_match(line) && !self.add(path, index + 1, line) {
                return false;
            }
        }
        true
    }

    fn answer(mut self, walk_stopped: bool) -> String {
        if self.lines == 0 {
            self.out.push_str("no lines match");
        } else {
            self.out.pop();
        }
        if self.cut {
            let _ = write!(
                self.out,
                "\n[… cut at {} matching lines; narrow the pattern, the glob or the path]",
                self.lines
            );
        }
        if walk_stopped {
            let _ = write!(
                self.out,
                "\n[… stopped after {MAX_VISITED} entries; narrow the path]"
            );
        }
        if self.binary > 0 {
            let _ = write!(self.out, "\n[{} binary files skipped]", self.binary);
        }
        if self.partly_read > 0 {
            let _ = write!(
                self.out,
                "\n[{} files searched only in their first {} KiB]",
                self.partly_read,
                MAX_FILE / 1024
            );
        }
        self.out
    }
}

async fn grep(ctx: &ToolContext, args: &Value) -> Result<String, ToolError> {
    let regex = matcher(args)?;
    let filter = Filter::new(args)?;
    let start = start(args)?;
    in_work_dir(&ctx.agent.work_dir, &start, move |dir, start| {
        let mut hits = Hits::default();
        let stopped = walk(dir, start, |dir, found| {
            !filter.keeps(&found.below_start) || hits.search(dir, &found.path, &regex)
        })?;
        Ok(hits.answer(stopped))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_within_and_across_folders() {
        let any_md = Pattern::new("**/*.md").unwrap();
        assert!(any_md.matches_with("a.md", MATCH));
        assert!(any_md.matches_with("x/y/a.md", MATCH));
        let top_md = Pattern::new("*.md").unwrap();
        assert!(top_md.matches_with("a.md", MATCH));
        assert!(!top_md.matches_with("x/a.md", MATCH));
        for bad in ["../*", "/etc/*", "a/../../*"] {
            assert!(pattern(bad, "pattern").is_err(), "{bad}");
        }
    }

    #[test]
    fn a_name_filter_matches_file_names_and_a_path_filter_whole_paths() {
        let names = Filter::new(&json!({"glob": "*.rs"})).unwrap();
        assert!(names.keeps("src/deep/main.rs") && !names.keeps("src/main.py"));
        let paths = Filter::new(&json!({"glob": "src/*.rs"})).unwrap();
        assert!(paths.keeps("src/main.rs") && !paths.keeps("src/deep/main.rs"));
    }

    #[test]
    fn the_answer_is_capped_and_says_so() {
        let mut hits = Hits::default();
        let mut added = 0;
        while hits.add("a.txt", added + 1, "match") {
            added += 1;
        }
        assert_eq!(added, MAX_MATCHES);
        let answer = hits.answer(false);
        assert!(
            answer.ends_with(&format!(
                "[… cut at {MAX_MATCHES} matching lines; narrow the pattern, the glob or the path]"
            )),
            "{answer}"
        );
        let long = "x".repeat(10_000);
        let mut hits = Hits::default();
        assert!(hits.add("b.txt", 1, &long));
        assert!(hits.out.len() < MAX_LINE + 32, "{}", hits.out.len());
    }
}
