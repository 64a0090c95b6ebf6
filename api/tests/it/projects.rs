//! Shared projects end to end (`_shared/projects/{name}/`): an admin's
//! `ACCESS.md` lets alice write, bob only read and carol nothing; the memory
//! tools, driven by the scripted fake model, hold each agent to it (writes,
//! reads, searches and the memory recalled into the prompt), and alice's
//! `CONTEXT.md` writes carry the "Last updated by" header.

use crate::harness::*;
use serde_json::{Value, json};

const CONTEXT: &str = "_shared/projects/launch/CONTEXT.md";
const ACCESS: &str = "_shared/projects/launch/ACCESS.md";

async fn setup() -> (Fakes, Onyx) {
    let fakes = Fakes::start().await;
    let config = TestConfig::new(&fakes)
        .merge(json!({
            "agents": {
                "defaults": { "model": "openai/fake-script", "permissionMode": "allow-all", "maxIterations": 4 },
                "list": [{ "id": "alice", "default": true }, { "id": "bob" }, { "id": "carol" }],
            },
        }))
        .build();
    let onyx = Onyx::start(Some(&config), &[]).await;
    (fakes, onyx)
}

/// The agent's answer to a one-call script (the fake replies with the tool's result).
async fn run_tool(onyx: &Onyx, agent: &str, tool: &str, args: Value) -> String {
    let answer = onyx
        .agent_answer(agent, &format!("script: {tool} {args} ; answer"))
        .await;
    answer
        .strip_prefix("script done: ")
        .unwrap_or_else(|| panic!("the script ran: {answer}"))
        .to_string()
}

/// `memory_write` as `agent` (`mode`: `None` appends); the tool's result.
async fn write_as(onyx: &Onyx, agent: &str, path: &str, mode: Option<&str>, content: &str) -> String {
    let mut args = json!({"path": path, "content": content});
    if let Some(mode) = mode {
        args["mode"] = json!(mode);
    }
    run_tool(onyx, agent, "memory_write", args).await
}

async fn file(onyx: &Onyx, path: &str) -> (u16, String) {
    let (status, body) = reply(onyx.get(&format!("/v1/memory/files/{path}"))).await;
    (status, body["content"].as_str().unwrap_or_default().to_string())
}

async fn put(onyx: &Onyx, path: &str, content: &str) -> (u16, Value) {
    reply(
        onyx.put(&format!("/v1/memory/files/{path}"))
            .header("content-type", "text/markdown")
            .body(content.to_string()),
    )
    .await
}

#[tokio::test]
async fn access_md_decides_who_reads_and_writes_a_project() {
    let (fakes, onyx) = setup().await;

    // The admin's API checks the format, naming the field.
    let (status, body) = put(&onyx, ACCESS, "read: Bob\n").await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["param"], "content", "{body}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("\"Bob\""),
        "{body}"
    );
    let (status, body) = put(&onyx, ACCESS, "# Launch\nread: bob\nwrite: alice\n").await;
    assert_eq!(status, 200, "{body}");

    // alice may write: her replace lands with the header on top, her append keeps one header.
    let content = "# Launch\nThe launch is on Friday, codename bluebird.";
    let wrote = write_as(&onyx, "alice", CONTEXT, Some("replace"), content).await;
    assert!(wrote.starts_with(&format!("wrote {CONTEXT} (")), "{wrote}");
    let wrote = write_as(&onyx, "alice", CONTEXT, None, "Press kit ready.").await;
    assert!(wrote.starts_with(&format!("wrote {CONTEXT} (")), "{wrote}");
    let (status, stored) = file(&onyx, CONTEXT).await;
    assert_eq!(status, 200);
    let (header, body) = stored.split_once("\n\n").unwrap();
    assert!(header.starts_with("Last updated by alice at 20"), "{stored}");
    assert!(header.ends_with('Z') && !header.contains('\n'), "{stored}");
    assert_eq!(body, format!("{content}\nPress kit ready.\n"), "{stored}");

    // alice cannot widen the rules herself.
    let refused = write_as(&onyx, "alice", ACCESS, Some("replace"), "read: *\nwrite: *\n").await;
    assert!(refused.contains("only an admin can change it"), "{refused}");
    assert_eq!(file(&onyx, ACCESS).await.1, "# Launch\nread: bob\nwrite: alice\n");

    // bob may only read: his write is refused with the reason, and changes nothing.
    let denied = write_as(&onyx, "bob", CONTEXT, Some("replace"), "bob was here").await;
    assert!(
        denied.contains("agent \"bob\" may not write project \"launch\"")
            && denied.contains(ACCESS)
            && denied.contains("write: alice"),
        "{denied}"
    );
    assert_eq!(file(&onyx, CONTEXT).await.1, stored);
    let read = run_tool(&onyx, "bob", "memory_get", json!({"path": CONTEXT})).await;
    assert_eq!(read, stored.trim_end(), "bob reads CONTEXT.md whole");

    // carol has no access: her searches and the memory recalled into her
    // prompt leave the project out (first: her daily log will mention it), and
    // her read is refused.
    let query = json!({"query": "launch codename Friday"});
    let found = run_tool(&onyx, "bob", "memory_search", query.clone()).await;
    assert!(
        found.contains("projects/launch/CONTEXT.md") && found.contains("bluebird"),
        "{found}"
    );
    let response = onyx
        .post("/v1/chat/completions")
        .header("x-onyx-include-memory", "true")
        .json(&json!({"model": "onyx:carol", "messages": [{"role": "user",
            "content": format!("script: memory_search {query} ; answer")}]}))
        .send()
        .await
        .unwrap();
    let body: Value = response.json().await.unwrap();
    let answer = body["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(answer.starts_with("script done: no memory matches"), "{body}");
    let seen = fakes.openai.state.last_request().unwrap().to_string();
    assert!(
        !seen.contains("bluebird"),
        "carol's prompt holds the project: {seen}"
    );
    let denied = run_tool(&onyx, "carol", "memory_get", json!({"path": CONTEXT})).await;
    assert!(
        denied.contains("agent \"carol\" may not read project \"launch\"") && denied.contains(ACCESS),
        "{denied}"
    );

    // A key scoped to carol sees through the memory API what carol sees.
    let (_, created) = reply(
        onyx.post("/v1/keys")
            .json(&json!({"name": "carol", "agents": ["carol"]})),
    )
    .await;
    let key = created["key"].as_str().unwrap();
    let (status, hits) =
        reply(onyx.with_key("GET", "/v1/memory/search?agent=carol&q=bluebird&mode=text", key)).await;
    assert_eq!(status, 200, "{hits}");
    assert_eq!(hits["data"], json!([]), "{hits}");
    let (status, files) = reply(onyx.with_key("GET", "/v1/memory/files?agent=carol", key)).await;
    assert_eq!(status, 200, "{files}");
    assert!(!files.to_string().contains("projects/launch"), "{files}");
    let (status, _) = reply(onyx.with_key("GET", &format!("/v1/memory/files/{CONTEXT}"), key)).await;
    assert_eq!(status, 403, "a carol key cannot read _shared files directly");
    let (_, files) = reply(onyx.get("/v1/memory/files?agent=bob")).await;
    assert!(
        files.to_string().contains("projects/launch/CONTEXT.md"),
        "{files}"
    );

    // The admin's view (the memory API as `_shared`) still finds it.
    let (status, hits) = reply(onyx.get("/v1/memory/search").query(&[
        ("q", "bluebird"),
        ("agent", "_shared"),
        ("mode", "text"),
    ]))
    .await;
    assert_eq!(status, 200, "{hits}");
    assert_eq!(hits["data"][0]["path"], "projects/launch/CONTEXT.md", "{hits}");

    // Outside projects `_shared` stays read-only to agents.
    let refused = write_as(&onyx, "alice", "_shared/handbook.md", Some("replace"), "x").await;
    assert!(refused.contains("_shared/handbook.md is read-only"), "{refused}");
}

#[tokio::test]
async fn a_project_without_access_md_is_open_to_every_agent() {
    let (_fakes, onyx) = setup().await;
    let path = "_shared/projects/picnic/CONTEXT.md";
    let wrote = write_as(&onyx, "carol", path, Some("replace"), "Bring lemonade.").await;
    assert!(wrote.starts_with(&format!("wrote {path}")), "{wrote}");
    let read = run_tool(&onyx, "bob", "memory_get", json!({"path": path})).await;
    assert!(
        read.starts_with("Last updated by carol at ") && read.ends_with("Bring lemonade."),
        "{read}"
    );
}
