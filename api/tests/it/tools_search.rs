//! `glob` and `grep` through the real binary and the fake model: offered in
//! `safe` mode, finding files and lines in the work dir, skipping binary
//! files, capping their answer, and never reaching outside the work dir
//! (`..`, absolute paths, a symlinked folder or file).

use crate::harness::*;
use serde_json::{Value, json};

fn config(fakes: &Fakes) -> String {
    TestConfig::new(fakes)
        .merge(json!({
            "agents": {
                "defaults": { "model": "openai/fake-script", "permissionMode": "safe", "maxIterations": 4 },
                "list": [{ "id": "main", "default": true }],
            },
        }))
        .build()
}

async fn script(onyx: &Onyx, text: &str) -> String {
    let (status, body) = reply(
        onyx.post("/v1/chat/completions")
            .json(&json!({"model": "onyx:main", "messages": [{"role": "user", "content": text}]})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_string()
}

fn write(path: &std::path::Path, body: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, body).unwrap();
}

#[tokio::test]
async fn glob_and_grep_search_the_work_dir_in_safe_mode_and_nothing_beyond() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes)), &[]).await;
    let work = onyx.dir.path().join("data/workspaces/main");
    let outside = onyx.dir.path().join("outside");
    write(&work.join("notes/a.md"), b"alpha\nneedle here\n");
    write(&work.join("notes/deep/b.md"), b"NEEDLE two\n");
    write(&work.join("src/main.rs"), b"fn needle() {}\nlet a.b = axb;\n");
    write(&work.join("blob.dat"), b"needle\0binary");
    write(&outside.join("secret.md"), b"needle-secret\n");
    std::os::unix::fs::symlink(&outside, work.join("escape")).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.md"), work.join("notes/link.md")).unwrap();

    let text = script(
        &onyx,
        r#"script: glob {"pattern": "**/*.md"} ; grep {"pattern": "needle", "ignore_case": true} ; answer"#,
    )
    .await;
    let request = fakes
        .openai
        .state
        .requests()
        .into_iter()
        .rev()
        .find(|r| r["model"] == "fake-script")
        .unwrap();
    let offered = pluck(&request["tools"], "/function/name");
    assert!(
        offered.contains(&"glob".to_string()) && offered.contains(&"grep".to_string()),
        "read-only, so safe mode offers them: {offered:?}"
    );
    assert!(!offered.contains(&"fs_write".to_string()), "{offered:?}");
    let (globbed, grepped) = text.split_once(" | ").unwrap();
    assert_eq!(globbed, "script done: notes/a.md\nnotes/deep/b.md", "{text}");
    assert!(
        grepped.contains("notes/a.md:2: needle here")
            && grepped.contains("notes/deep/b.md:1: NEEDLE two")
            && grepped.contains("src/main.rs:1: fn needle() {}")
            && grepped.contains("[1 binary files skipped]"),
        "{text}"
    );
    assert!(!text.contains("secret") && !text.contains("blob.dat:"), "{text}");

    // A literal pattern, a file-name filter, a path filter.
    let text = script(
        &onyx,
        r#"script: grep {"pattern": "a.b", "literal": true} & grep {"pattern": "needle", "glob": "*.rs"} & grep {"pattern": "needle", "glob": "notes/*.md", "ignore_case": true} ; answer"#,
    )
    .await;
    let parts: Vec<&str> = text.trim_start_matches("script done: ").split(" | ").collect();
    assert_eq!(
        parts,
        [
            "src/main.rs:2: let a.b = axb;\n[1 binary files skipped]",
            "src/main.rs:1: fn needle() {}",
            "notes/a.md:2: needle here"
        ],
        "{text}"
    );

    // The attacks: out by `..`, by an absolute path, through a symlinked folder.
    let text = script(
        &onyx,
        r#"script: glob {"pattern": "../*"} & grep {"pattern": "needle", "path": "../.."} & grep {"pattern": "needle", "path": "/etc"} & grep {"pattern": "needle", "path": "escape"} & glob {"pattern": "*", "path": "escape"} & glob {"pattern": "/etc/*"} ; answer"#,
    )
    .await;
    let parts: Vec<&str> = text.trim_start_matches("script done: ").split(" | ").collect();
    assert_eq!(parts.len(), 6, "{text}");
    assert!(parts.iter().all(|p| p.starts_with("error:")), "{text}");
    assert!(
        parts[0].contains("\"..\"") && parts[1].contains("\"..\""),
        "{text}"
    );
    assert!(
        parts[2].contains("absolute") && parts[5].contains("absolute"),
        "{text}"
    );
    assert!(
        parts[3].contains("symbolic link") && parts[4].contains("symbolic link"),
        "{text}"
    );
    assert!(!text.contains("needle-secret"), "{text}");
}

#[tokio::test]
async fn grep_caps_its_answer_and_says_it_was_cut() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes)), &[]).await;
    let work = onyx.dir.path().join("data/workspaces/main");
    let many: String = (0..500).map(|i| format!("hit {i}\n")).collect();
    write(&work.join("many.txt"), many.as_bytes());
    let text = script(&onyx, r#"script: grep {"pattern": "^hit"} ; answer"#).await;
    let shown = text
        .lines()
        .filter(|l| l.starts_with("many.txt:") || l.contains(" many.txt:"))
        .count();
    assert_eq!(shown, 200, "{text}");
    assert!(
        text.ends_with("[… cut at 200 matching lines; narrow the pattern, the glob or the path]"),
        "{}",
        &text[text.len().saturating_sub(300)..]
    );
    let bad: Value = json!(script(&onyx, r#"script: grep {"pattern": "(unclosed"} ; answer"#).await);
    assert!(
        bad.as_str()
            .unwrap()
            .contains("error: pattern \"(unclosed\" is not a valid regular expression"),
        "{bad}"
    );
}
