//! Skills: a folder of them imported with `onyx skills import`, listed in the
//! agent's prompt, loaded by the `skill` tool (instructions and files), and
//! managed through `/v1/skills` (an agent's own skill hides a shared one).

use crate::harness::*;
use serde_json::{Value, json};

fn write(dir: &std::path::Path, path: &str, text: &str) {
    let path = dir.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

async fn agent_answer_and_prompt(fakes: &Fakes, onyx: &Onyx, text: &str) -> (String, String) {
    let (status, body) = onyx
        .chat(json!({"model": "onyx:main", "messages": [{"role": "user", "content": text}]}))
        .await;
    assert_eq!(status, 200, "{body}");
    let first = fakes.openai.state.requests();
    let system = first
        .iter()
        .rev()
        .find_map(|r| r["messages"][0]["content"].as_str().map(String::from))
        .unwrap();
    (
        body["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .to_string(),
        system,
    )
}

#[tokio::test]
async fn imported_skills_are_listed_in_the_prompt_and_loaded_by_the_tool() {
    let fakes = Fakes::start().await;
    let config = TestConfig::new(&fakes)
        .agent(json!({"id": "main", "default": true, "model": "openai/fake-script"}))
        .build();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("onyx.json5"), &config).unwrap();
    let source = tempfile::tempdir().unwrap();
    write(
        source.path(),
        "pdf-forms/SKILL.md",
        "---\nname: pdf-forms\ndescription: Fill in PDF forms with qpdf\n---\n# Filling PDF forms\n\nRun scripts/fill.py with the form and the values.\n",
    );
    write(source.path(), "pdf-forms/scripts/fill.py", "print('filled')\n");
    write(source.path(), "pdf-forms/.git/config", "hidden, skipped");
    write(
        source.path(),
        "weather/SKILL.md",
        "---\nname: weather\ndescription: >\n  Look up the forecast\n  for a city.\n---\nUse web_fetch on wttr.in.\n",
    );
    write(
        source.path(),
        "broken/SKILL.md",
        "---\nname: broken\n---\nno description\n",
    );
    let output = Onyx::cli(
        home.path(),
        &["skills", "import", source.path().to_str().unwrap()],
    )
    .await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "one skill is refused: {stderr}");
    assert!(stderr.contains("imported 2 skill(s), 1 refused"), "{stderr}");
    assert!(
        stderr.contains("broken: refused: SKILL.md: the front matter needs a `description`"),
        "{stderr}"
    );

    let onyx = Onyx::start_in(home, Some(&config), &[]).await;
    let listed = onyx.get_json("/v1/skills").await;
    assert_eq!(
        pluck(&listed["data"], "/name"),
        ["pdf-forms", "weather"],
        "{listed}"
    );
    assert_eq!(listed["data"][0]["files"], json!(["scripts/fill.py"]), "{listed}");
    assert_eq!(
        listed["data"][1]["description"],
        "Look up the forecast for a city."
    );

    let script = r#"script: skill {"name": "pdf-forms"} ; skill {"name": "pdf-forms", "file": "scripts/fill.py"} ; skill {"name": "nope"} ; fs_read {"path": "skills/weather/SKILL.md"} ; answer"#;
    let (text, system) = agent_answer_and_prompt(&fakes, &onyx, script).await;
    assert!(system.contains("## Skills"), "{system}");
    assert!(
        system.contains("- pdf-forms: Fill in PDF forms with qpdf"),
        "{system}"
    );
    assert!(
        system.contains("- weather: Look up the forecast for a city."),
        "{system}"
    );
    assert!(text.contains("# Skill pdf-forms"), "{text}");
    assert!(text.contains("Run scripts/fill.py with the form"), "{text}");
    assert!(
        text.contains("Files of this skill") && text.contains("scripts/fill.py"),
        "{text}"
    );
    assert!(text.contains("print('filled')"), "the file was read: {text}");
    assert!(text.contains("you have no skill \"nope\""), "{text}");
    assert!(
        text.contains("Use web_fetch on wttr.in."),
        "fs_read reads a skill's files: {text}"
    );
    assert!(
        !text.contains("name: pdf-forms"),
        "the front matter is not repeated: {text}"
    );

    // Skills are not memory: searching finds nothing of them.
    let hits = onyx.get_json("/v1/memory/search?q=qpdf&agent=main").await;
    assert!(
        pluck(&hits["data"], "/path")
            .iter()
            .all(|p| !p.starts_with("skills/")),
        "{hits}"
    );
    assert!(!hits["data"].to_string().contains("qpdf"), "{hits}");
}

#[tokio::test]
async fn skills_are_managed_through_the_api() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&fakes.config()), &[]).await;
    let skill = |name: &str, description: &str| {
        format!("---\nname: {name}\ndescription: {description}\n---\nSteps for {name}.\n")
    };
    let (status, body) = reply(
        onyx.put("/v1/skills/_shared/notes")
            .body(skill("notes", "shared notes")),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["scope"], "_shared");
    let (status, body) = reply(
        onyx.put("/v1/skills/main/notes")
            .json(&json!({"content": skill("notes", "main's notes")})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = reply(
        onyx.put("/v1/skills/main/notes/files/templates/day.md")
            .body("# Day"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["files"], json!(["templates/day.md"]));
    let seen = onyx.get_json("/v1/skills?agent=main").await;
    assert_eq!(seen["data"].as_array().unwrap().len(), 1, "{seen}");
    assert_eq!(
        seen["data"][0]["description"], "main's notes",
        "the agent's own hides the shared one"
    );
    let file = onyx
        .get("/v1/skills/main/notes/files/templates/day.md")
        .send()
        .await
        .unwrap();
    assert_eq!(file.text().await.unwrap(), "# Day");

    let bad: [(&str, String, &str); 4] = [
        ("/v1/skills/main/notes", "no front matter".into(), "front matter"),
        (
            "/v1/skills/main/notes",
            skill("other", "d"),
            "names the skill \"other\"",
        ),
        ("/v1/skills/main/Bad%20Name", skill("x", "d"), "not a skill name"),
        (
            "/v1/skills/main/notes/files/..%2Fescape.md",
            "x".into(),
            "not a file path",
        ),
    ];
    for (path, content, says) in bad {
        let (status, body) = reply(onyx.put(path).body(content)).await;
        assert_eq!(status, 400, "{path}: {body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(says),
            "{path}: {body}"
        );
    }
    let (status, body) = reply(onyx.put("/v1/skills/ghost/notes").body(skill("notes", "d"))).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(reply(onyx.delete("/v1/skills/main/notes")).await.0, 200);
    let (status, body) = reply(onyx.delete("/v1/skills/main/notes")).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (404, Value::from("skill_not_found"))
    );
    let seen = onyx.get_json("/v1/skills?agent=main").await;
    assert_eq!(seen["data"][0]["scope"], "_shared", "{seen}");
}
