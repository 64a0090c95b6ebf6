//! The README and `docs/` stay usable: the README's top is short (what Onyx
//! is, the two commands, a tour), and every relative link in them, anchors
//! included, points at a file and a heading that exist.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The pages a reader follows: the README, SECURITY.md and every `docs/` file.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![repo().join("README.md"), repo().join("SECURITY.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    assert!(docs.len() >= 5, "docs/ holds the reference: {docs:?}");
    pages.extend(docs);
    pages
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces to `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == ' ' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown file's headings (outside code blocks).
fn anchors(text: &str) -> HashSet<String> {
    let mut fenced = false;
    let mut out = HashSet::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.insert(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

/// `[label](target)` links outside code blocks and inline code.
fn links(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let outside_code: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = outside_code.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            out.push(after[..end].to_string());
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn every_relative_link_in_the_readme_and_docs_resolves() {
    let mut broken = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for target in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = target.split_once('#').unwrap_or((&target, ""));
            let file = if path.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(path)
            };
            if !file.exists() {
                broken.push(format!("{}: {target} (no such file)", page.display()));
                continue;
            }
            if !fragment.is_empty() && file.extension().is_some_and(|e| e == "md") {
                let there = std::fs::read_to_string(&file).unwrap();
                if !anchors(&there).contains(fragment) {
                    broken.push(format!("{}: {target} (no such heading)", page.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_readme_serves_a_newcomer_and_links_the_reference() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 150, "the README is a newcomer's page: {lines} lines");
    let commands: Vec<&str> = readme.lines().skip(2).take(4).collect();
    assert!(
        commands
            .iter()
            .any(|l| l.starts_with("cargo run --release -p onyx -- serve"))
            && commands.iter().any(|l| l.starts_with("./tests/run")),
        "the two commands at the top: {commands:?}"
    );
    for page in pages().iter().skip(2) {
        let name = page.file_name().unwrap().to_str().unwrap();
        assert!(
            readme.contains(&format!("(docs/{name})")),
            "the README links docs/{name}"
        );
    }
}

#[test]
fn links_and_anchors_are_read_as_github_renders_them() {
    assert_eq!(
        anchor(" Backups, upgrades, scaling out"),
        "backups-upgrades-scaling-out"
    );
    assert_eq!(
        anchor("MCP servers: tools from outside"),
        "mcp-servers-tools-from-outside"
    );
    let text = "see [a](docs/a.md#b) and `[not](x)`\n```\n[no](y)\n```\n[c](#d)";
    assert_eq!(links(text), vec!["docs/a.md#b", "#d"]);
}
