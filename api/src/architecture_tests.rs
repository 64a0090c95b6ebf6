//! Dependencies point inward (`DESIGN.md`), checked: reads `src/**/*.rs`,
//! resolves every `crate::…`, `super::…` and `self::…` path (and each member
//! of a `{…}` group) to the module it names, and fails when
//!
//! - two modules in one folder import each other (top-level modules such as
//!   `agents` ⇄ `scheduler`, or sibling files such as `chat` ⇄ `agent_chat`);
//! - a domain module imports the edge (`http`, `cli`) or the wiring (`app`);
//! - a leaf module (shared vocabulary) imports any other module of the crate.
//!
//! And the seams that keep one place for each concept: only `lease.rs`
//! writes leases, only `agents/conversation.rs` opens turns, and only
//! `providers/transport.rs` speaks HTTP to model providers.
//!
//! `ONYX_ARCHITECTURE_SRC=/some/checkout/api/src` checks another tree (for
//! example an older commit's, to see what it reports).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Modules that only the edge and the wiring may import.
const EDGE: &[&str] = &["http", "cli", "app"];
/// Shared vocabulary: modules that import nothing else from the crate.
const LEAVES: &[&[&str]] = &[
    &["background"],
    &["backoff"],
    &["clock"],
    &["limits"],
    &["error_chain"],
    &["model_ref"],
    &["replica"],
    &["locks"],
    &["text"],
    &["http", "sse"],
];

/// A module's path below the crate root: `["memory", "resident", "state"]`.
type ModPath = Vec<String>;

struct Source {
    module: ModPath,
    file: String,
    text: String,
}

fn sources(root: &Path) -> Vec<Source> {
    let mut found = Vec::new();
    let mut folders = vec![PathBuf::from(root)];
    while let Some(folder) = folders.pop() {
        let entries = std::fs::read_dir(&folder).unwrap_or_else(|err| panic!("{}: {err}", folder.display()));
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(root).unwrap();
            let mut module: ModPath = rel
                .parent()
                .into_iter()
                .flat_map(Path::components)
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            match rel.file_stem().and_then(|s| s.to_str()) {
                Some("mod") => {}
                Some("lib" | "main") if module.is_empty() => continue,
                Some(stem) => module.push(stem.to_string()),
                None => continue,
            }
            if module == ["architecture_tests"] {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            found.push(Source {
                module,
                file: rel.display().to_string(),
                text,
            });
        }
    }
    found.sort_by(|a, b| a.file.cmp(&b.file));
    found
}

fn is_ident(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_'
}

/// The identifiers of a path starting at `at` (`a::b::c`), and where it stops.
fn idents(text: &str, mut at: usize) -> (Vec<String>, usize) {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    loop {
        let start = at;
        while at < bytes.len() && is_ident(bytes[at]) {
            at += 1;
        }
        if start == at {
            return (out, start);
        }
        out.push(text[start..at].to_string());
        if !text[at..].starts_with("::") {
            return (out, at);
        }
        at += 2;
    }
}

/// The members of a `{…}` group opening at `at` (just after the brace), each
/// as its leading path (`a::b` of `a::b::{c, d}`).
fn group(text: &str, at: usize) -> Vec<Vec<String>> {
    let mut members = Vec::new();
    let mut depth = 1;
    let mut member_start = at;
    for (offset, byte) in text.as_bytes()[at..].iter().enumerate() {
        let here = at + offset;
        match byte {
            b'{' => depth += 1,
            b'}' | b',' if depth == 1 => {
                let member = text[member_start..here].trim_start();
                let skipped = text[member_start..here].len() - member.len();
                let (path, _) = idents(text, member_start + skipped);
                if !path.is_empty() {
                    members.push(path);
                }
                member_start = here + 1;
                if *byte == b'}' {
                    break;
                }
            }
            b'}' => depth -= 1,
            _ => {}
        }
    }
    members
}

/// Every module path `text` names through `crate::`, `super::` or `self::`,
/// resolved against `module`. Comment lines are skipped.
fn references(module: &[String], text: &str) -> Vec<ModPath> {
    let code: String = text
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let bytes = code.as_bytes();
    let mut found = Vec::new();
    for (at, _) in code.char_indices() {
        let rest = &code[at..];
        if !["crate::", "super::", "self::"]
            .iter()
            .any(|p| rest.starts_with(p))
        {
            continue;
        }
        if at > 0 && (is_ident(bytes[at - 1]) || bytes[at - 1] == b':') {
            continue;
        }
        let (path, end) = idents(&code, at);
        let paths = if code[end..].starts_with('{') && code[..end].ends_with("::") {
            group(&code, end + 1)
                .into_iter()
                .map(|member| path.iter().cloned().chain(member).collect())
                .collect()
        } else {
            vec![path]
        };
        for path in paths {
            found.push(resolve(module, &path));
        }
    }
    found
}

fn resolve(module: &[String], path: &[String]) -> ModPath {
    let mut at: ModPath = match path.first().map(String::as_str) {
        Some("crate") => Vec::new(),
        _ => module.to_vec(),
    };
    let mut rest = path.iter().skip(1).peekable();
    if path.first().is_some_and(|p| p == "super") {
        at.pop();
    }
    while rest.peek().is_some_and(|p| *p == "super") {
        rest.next();
        at.pop();
    }
    at.extend(rest.cloned());
    at
}

/// What the check found wrong, one line each.
fn violations(root: &Path) -> Vec<String> {
    let sources = sources(root);
    // The modules (files and folders) each folder holds.
    let mut units: BTreeMap<ModPath, BTreeSet<String>> = BTreeMap::new();
    for source in &sources {
        for depth in 0..source.module.len() {
            units
                .entry(source.module[..depth].to_vec())
                .or_default()
                .insert(source.module[depth].clone());
        }
    }
    // folder -> (importer, imported) -> files that do it
    let mut edges: BTreeMap<ModPath, BTreeMap<(String, String), BTreeSet<String>>> = BTreeMap::new();
    let mut problems = Vec::new();
    for source in &sources {
        let leaf: Option<ModPath> = LEAVES
            .iter()
            .map(|leaf| leaf.iter().map(|s| s.to_string()).collect::<ModPath>())
            .find(|leaf| source.module.starts_with(leaf));
        for target in references(&source.module, &source.text) {
            // Not its own items, nor its ancestors (a test module's `super::*`).
            if let Some(leaf) = &leaf
                && !target.starts_with(leaf)
                && !leaf.starts_with(&target)
                && units.get(&Vec::new()).is_some_and(|top| top.contains(&target[0]))
            {
                problems.push(format!(
                    "leaf module {} imports {} ({})",
                    leaf.join("::"),
                    target.join("::"),
                    source.file
                ));
            }
            let common = source
                .module
                .iter()
                .zip(&target)
                .take_while(|(a, b)| a == b)
                .count();
            let (Some(from), Some(to)) = (source.module.get(common), target.get(common)) else {
                continue;
            };
            let folder = source.module[..common].to_vec();
            if units.get(&folder).is_some_and(|u| u.contains(to)) {
                edges
                    .entry(folder)
                    .or_default()
                    .entry((from.clone(), to.clone()))
                    .or_default()
                    .insert(source.file.clone());
            }
        }
    }
    for (folder, pairs) in &edges {
        let place = if folder.is_empty() {
            "top-level modules".to_string()
        } else {
            format!("modules of {}", folder.join("::"))
        };
        for ((from, to), files) in pairs {
            if from < to
                && let Some(back) = pairs.get(&(to.clone(), from.clone()))
            {
                problems.push(format!(
                    "{place} {from} and {to} import each other ({from}: {}; {to}: {})",
                    files.iter().cloned().collect::<Vec<_>>().join(", "),
                    back.iter().cloned().collect::<Vec<_>>().join(", "),
                ));
            }
            if folder.is_empty() && !EDGE.contains(&from.as_str()) && EDGE.contains(&to.as_str()) {
                problems.push(format!(
                    "domain module {from} imports {to}, which only the edge may ({})",
                    files.iter().cloned().collect::<Vec<_>>().join(", ")
                ));
            }
        }
    }
    problems
}

#[test]
fn dependencies_point_inward() {
    let root = std::env::var_os("ONYX_ARCHITECTURE_SRC").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        PathBuf::from,
    );
    let problems = violations(&root);
    assert!(
        problems.is_empty(),
        "dependencies must point inward (DESIGN.md):\n  {}",
        problems.join("\n  ")
    );
}

/// The one lease (`lease.rs`): no other module's SQL sets or compares a
/// lease's owner, term or token by hand (it uses the lease's fragments),
/// so tasks, runs and steps cannot drift into rules of their own again.
/// Migrations are history and may name the fields.
#[test]
fn only_the_lease_module_writes_or_tests_leases() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let by_hand = [
        "lease_until =",
        "lease_owner =",
        "lease_token =",
        "lease_until <",
        "lease_until >",
    ];
    let offenders: Vec<String> = sources(&root)
        .into_iter()
        .filter(|s| !matches!(s.file.as_str(), "lease.rs" | "storage/migrations.rs"))
        .filter(|s| by_hand.iter().any(|sql| s.text.contains(sql)))
        .map(|s| s.file)
        .collect();
    assert!(
        offenders.is_empty(),
        "leases by hand in {offenders:?}: use crate::lease"
    );
}

/// Every turn starts in `agents/conversation.rs`: only it builds a
/// `RunRequest` (compaction's summary call aside, which is no turn), so no
/// source can skip the agent's checks, its session or the session's settings.
#[test]
fn only_the_conversation_opens_turns() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let offenders: Vec<String> = sources(&root)
        .into_iter()
        .filter(|s| {
            !matches!(
                s.file.as_str(),
                "agents/conversation.rs"
                    | "agents/compaction.rs"
                    | "agents/run_contract.rs"
                    | "architecture_tests.rs"
            )
        })
        .filter(|s| s.text.contains("RunRequest {"))
        .map(|s| s.file)
        .collect();
    assert!(
        offenders.is_empty(),
        "a turn built outside agents/conversation.rs in {offenders:?}: use Agents::open_turn"
    );
}

/// One upstream HTTP stack (`providers/transport.rs`): no other provider
/// file builds an HTTP client, opens a socket or speaks HTTP by hand, so
/// every model call gets the same timeouts, proxies and no-redirect rule.
#[test]
fn only_the_transport_module_speaks_http_upstream() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let by_hand = [
        "Client::builder(",
        "Client::new(",
        "reqwest::get(",
        "hyper::",
        "TcpStream",
        "HTTP/1.1",
    ];
    let offenders: Vec<String> = sources(&root)
        .into_iter()
        .filter(|s| s.file.starts_with("providers/") && s.file != "providers/transport.rs")
        .filter(|s| by_hand.iter().any(|code| s.text.contains(code)))
        .map(|s| s.file)
        .collect();
    assert!(
        offenders.is_empty(),
        "upstream HTTP outside providers/transport.rs in {offenders:?}"
    );
}

#[test]
fn the_check_finds_cycles_edge_imports_and_leaves_that_import() {
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("lib.rs", "pub mod agents;\npub mod scheduler;\n");
    write("agents/mod.rs", "use crate::scheduler::Runner;\n");
    write(
        "scheduler.rs",
        "use crate::{\n    agents::Agents,\n    clock,\n};\n",
    );
    write("memory/search.rs", "use super::resident::{Candidate, Query};\n");
    write(
        "memory/resident/state.rs",
        "use crate::memory::search::day_number;\n",
    );
    write(
        "memory/mod.rs",
        "// crate::http::ApiError in a comment is no import\n",
    );
    write("storage/db.rs", "fn f() -> crate::http::ApiError { todo() }\n");
    write("clock.rs", "use crate::config::Timezone;\n");
    write("config.rs", "");
    write("http/mod.rs", "use crate::storage::Db;\n");
    let problems = violations(dir.path());
    let expected = [
        "leaf module clock imports config::Timezone (clock.rs)",
        "top-level modules agents and scheduler import each other (agents: agents/mod.rs; scheduler: scheduler.rs)",
        "top-level modules http and storage import each other (http: http/mod.rs; storage: storage/db.rs)",
        "domain module storage imports http, which only the edge may (storage/db.rs)",
        "modules of memory resident and search import each other (resident: memory/resident/state.rs; search: memory/search.rs)",
    ];
    assert_eq!(problems, expected);
}

#[test]
fn paths_resolve_against_the_importing_module() {
    let here: ModPath = vec!["memory".into(), "resident".into(), "state".into()];
    let refs = references(
        &here,
        "use super::text::X;\nuse self::inner::Y;\nlet z = crate::clock::now();\nuse super::{vectors::V, analyzer};",
    );
    let shown: Vec<String> = refs.iter().map(|r| r.join("::")).collect();
    assert_eq!(
        shown,
        [
            "memory::resident::text::X",
            "memory::resident::state::inner::Y",
            "clock::now",
            "memory::resident::vectors::V",
            "memory::resident::analyzer",
        ]
    );
}
