//! Property tests (fuzzing) of memory path validation: arbitrary agent ids and
//! file paths (`..`, absolute, NUL, backslashes, unicode, very long). Nothing
//! panics, and an accepted path stays inside its agent's folder on both
//! backends (as an object key, and as a file under the local store's root).

use std::path::{Component, Path};

use proptest::prelude::*;

use super::paths;

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "..",
            ".",
            "",
            "memory",
            "MEMORY.md",
            "notes.txt",
            ".hidden.md",
            "a:b.md",
            "C:",
            "..md",
            "...",
            "~",
            "%2e%2e",
            "x\u{0}.md",
            "x\\..\\y.md",
            "\u{202e}dm.txt",
            "日記.md",
            "\u{feff}.md",
            "ﬁle.md",
            "a\u{2215}..\u{2215}b.md",
            "con.md",
            " .md",
        ])
        .prop_map(String::from),
        "[a-z0-9._-]{1,12}",
        any::<String>(),
    ]
}

fn path() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (prop::option::of(prop::sample::select(vec!["/", "\\", "./", "//"])),
              prop::collection::vec(segment(), 1..6),
              prop::sample::select(vec!["", ".md", ".txt", "/", ".md/"]))
            .prop_map(|(lead, segments, tail)| format!("{}{}{tail}", lead.unwrap_or(""), segments.join("/"))),
        1 => any::<String>(),
        1 => (1usize..600).prop_map(|n| format!("{}.md", "a/".repeat(n))),
    ]
}

fn agent() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "main",
            "_shared",
            "_other",
            "..",
            "",
            "a/b",
            "MAIN",
            "x".repeat(65).leak()
        ])
        .prop_map(String::from),
        "[a-z0-9_-]{1,70}",
        any::<String>(),
    ]
}

proptest! {
    #![proptest_config(crate::fuzzing::config(512))]

    #[test]
    fn accepted_memory_paths_never_leave_the_agents_folder(agent in agent(), path in path()) {
        let (Ok(agent), Ok(file)) = (paths::agent(&agent), paths::file(&path)) else {
            return Ok(());
        };
        prop_assert!(!file.starts_with('/') && !file.contains('\\') && !file.contains('\0'), "{file:?}");
        for segment in file.split('/') {
            prop_assert!(!segment.is_empty() && segment != "." && segment != "..", "{file:?}");
        }
        let key = paths::object_key(agent, file).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(paths::split_key(key.as_str()), Some((agent, file)));
        // The local store keeps `{root}/onyx-memory/{key}`: lexically under the agent's folder.
        let root = Path::new("/data/onyx-memory");
        let on_disk = root.join(key.as_str());
        prop_assert!(on_disk.starts_with(root.join(agent)), "{}", on_disk.display());
        prop_assert!(
            on_disk.components().all(|c| matches!(c, Component::RootDir | Component::Normal(_))),
            "{}", on_disk.display()
        );
        let kind = paths::indexed_kind(agent, file);
        if paths::daily_date(file).is_some() {
            prop_assert!(kind.is_some());
        }
    }

    #[test]
    fn refused_memory_paths_say_why(path in path()) {
        if let Err(err) = paths::file(&path) {
            let text = err.to_string();
            prop_assert!(text.contains("is not a memory file path: "), "{text}");
        }
    }
}
