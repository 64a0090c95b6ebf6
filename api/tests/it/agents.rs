//! Agents end to end: multi-step tool use against real storage (streaming and
//! not), parallel tool calls, prompt composition and truncation, the
//! BOOTSTRAP lifecycle, inbox delivery exactly once, permission modes and
//! approvals, the agents API, and the tools' security boundaries.

use crate::harness::*;
use serde_json::{Value, json};

fn config(fakes: &Fakes) -> String {
    let searxng = format!("http://localhost:{}/", fakes.openai.addr.port());
    TestConfig::new(fakes)
        .merge(json!({
            "memory": { "embedder": { "type": "ollama", "model": "all-minilm", "dimensions": 64 } },
            "agents": {
                "defaults": { "model": "openai/fake-script", "permissionMode": "allow-all", "maxIterations": 6 },
                "list": [
                    { "id": "main", "default": true },
                    { "id": "helper", "model": "openai/fake-echo" },
                    { "id": "reader", "permissionMode": "safe" },
                    { "id": "careful", "permissionMode": "ask" },
                    { "id": "narrow", "tools": { "allow": ["memory_search", "fs_read", "web_search"], "deny": ["fs_read"] } },
                    { "id": "slow", "model": "openai/fake-slow" },
                ],
            },
            "tools": {
                "approvalTimeoutSeconds": 2,
                "webFetch": { "allowPrivate": ["localhost"] },
                "webSearch": { "searxngUrl": searxng },
            },
        }))
        .build()
}

async fn setup() -> (Fakes, Onyx) {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes)), &[]).await;
    (fakes, onyx)
}

async fn agent_chat(onyx: &Onyx, agent: &str, text: &str) -> (Value, String) {
    let response = onyx
        .post("/v1/chat/completions")
        .json(&json!({"model": format!("onyx:{agent}"), "messages": [{"role": "user", "content": text}]}))
        .send()
        .await
        .unwrap();
    let status = response.status();
    let session = response
        .headers()
        .get("x-onyx-session-id")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let body: Value = response.json().await.unwrap();
    assert_eq!(status, 200, "{body}");
    (body, session)
}

fn answer(body: &Value) -> String {
    body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The system prompt the fake model last received.
fn last_system_prompt(fakes: &Fakes) -> String {
    let request = fakes.openai.state.last_request().unwrap();
    request["messages"][0]["content"].as_str().unwrap().to_string()
}

/// The newest user message the fake model last received (the volatile
/// context, date and daily logs, starts it).
fn last_user_message(fakes: &Fakes) -> String {
    let request = fakes.openai.state.last_request().unwrap();
    let messages = request["messages"].as_array().unwrap();
    let user = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    user["content"].as_str().unwrap().to_string()
}

async fn put_memory(onyx: &Onyx, path: &str, content: &str) {
    let (status, body) = reply(
        onyx.put(&format!("/v1/memory/files/{path}"))
            .body(content.to_string()),
    )
    .await;
    assert_eq!(status, 200, "{body}");
}

const SEARCH_THEN_WRITE: &str = r#"script: memory_search {"query": "rabies vaccination"} ; fs_write {"path": "notes/rex.md", "content": "Rex: rabies shot in April"} ; answer"#;

#[tokio::test]
async fn an_agent_searches_memory_writes_a_file_and_answers() {
    let (_fakes, onyx) = setup().await;
    put_memory(
        &onyx,
        "main/MEMORY.md",
        "# Memory\n\n## Pets\nRex needs his rabies vaccination every April.\n",
    )
    .await;

    let (body, session) = agent_chat(&onyx, "main", SEARCH_THEN_WRITE).await;
    let text = answer(&body);
    assert!(text.starts_with("script done:"), "{text}");
    assert!(
        text.contains("MEMORY.md:3-4") && text.contains("rabies"),
        "memory_search ran: {text}"
    );
    assert!(text.contains("wrote 25 bytes to notes/rex.md"), "{text}");
    assert_eq!(body["model"], "onyx:main");
    assert_eq!(body["x_onyx"]["iterations"], 3);
    let written = onyx.dir.path().join("data/workspaces/main/notes/rex.md");
    assert_eq!(
        std::fs::read_to_string(written).unwrap(),
        "Rex: rabies shot in April"
    );

    // The session holds the whole exchange, tool calls included.
    let stored = onyx.get_json(&format!("/v1/sessions/{session}")).await;
    let roles = pluck(&stored["messages"], "/role");
    assert_eq!(
        roles,
        ["user", "assistant", "tool", "assistant", "tool", "assistant"],
        "{stored}"
    );
    assert_eq!(
        stored["messages"][1]["tool_calls"][0]["function"]["name"],
        "memory_search"
    );
    assert!(
        stored["messages"][2]["content"]
            .as_str()
            .unwrap()
            .contains("rabies")
    );
    assert_eq!(stored["agent_id"], "main");

    // Today's log gets one line about it (written just after the answer).
    let expected = format!("session {}", &session[..8]);
    let log = wait_until(secs(5), &format!("today's log mentions {expected}"), async || {
        let files = onyx.get_json("/v1/memory/files?agent=main").await;
        let daily = files["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["path"].as_str().unwrap().starts_with("memory/"))?
            .clone();
        let file = onyx
            .get_json(&format!(
                "/v1/memory/files/main/{}",
                daily["path"].as_str().unwrap()
            ))
            .await;
        let log = file["content"].as_str().unwrap().to_string();
        log.contains(&expected).then_some(log)
    })
    .await;
    assert!(
        log.contains(&expected) && log.contains("tools: memory_search, fs_write"),
        "{log}"
    );
}

#[tokio::test]
async fn streaming_runs_send_text_and_tool_activity_as_they_happen() {
    let (_fakes, onyx) = setup().await;
    put_memory(
        &onyx,
        "main/MEMORY.md",
        "# Memory\n\nRex needs his rabies vaccination every April.\n",
    )
    .await;
    let response = onyx
        .post("/v1/chat/completions")
        .json(
            &json!({"model": "onyx:main", "stream": true, "stream_options": {"include_usage": true},
            "messages": [{"role": "user", "content": SEARCH_THEN_WRITE}]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let session = session_id(&response);
    let events = sse_events(response).await;
    assert_eq!(events.last().unwrap(), "[DONE]");
    let chunks = chunks(&events);
    let activity: Vec<(String, String)> = chunks
        .iter()
        .filter_map(|c| c.get("x_onyx"))
        .map(|x| {
            (
                x["type"].as_str().unwrap().to_string(),
                x["name"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(
        activity,
        [
            ("run_started".to_string(), String::new()),
            ("tool_call_started".into(), "memory_search".into()),
            ("tool_call_finished".into(), "memory_search".into()),
            ("tool_call_started".into(), "fs_write".into()),
            ("tool_call_finished".into(), "fs_write".into()),
            ("run_finished".into(), String::new()),
        ]
    );
    let text = streamed_text(&chunks);
    assert!(
        text.starts_with("script done:") && text.contains("wrote 25 bytes"),
        "{text}"
    );
    assert!(
        chunks
            .iter()
            .filter(|c| c["choices"][0]["delta"]["content"].is_string())
            .count()
            > 3,
        "text arrived in pieces"
    );
    assert!(chunks.last().unwrap()["usage"]["total_tokens"].as_u64().unwrap() > 0);
    let stored = onyx.get_json(&format!("/v1/sessions/{session}")).await;
    assert_eq!(stored["messages"].as_array().unwrap().len(), 6, "{stored}");
    assert!(onyx.dir.path().join("data/workspaces/main/notes/rex.md").exists());
}

#[tokio::test]
async fn parallel_tool_calls_all_run() {
    let (_fakes, onyx) = setup().await;
    let (body, _) = agent_chat(
        &onyx,
        "main",
        r#"script: fs_write {"path": "a.txt", "content": "A"} & fs_write {"path": "sub/b.txt", "content": "B"} & fs_list {} ; answer"#,
    )
    .await;
    let work = onyx.dir.path().join("data/workspaces/main");
    assert_eq!(std::fs::read_to_string(work.join("a.txt")).unwrap(), "A");
    assert_eq!(std::fs::read_to_string(work.join("sub/b.txt")).unwrap(), "B");
    assert_eq!(body["x_onyx"]["iterations"], 2, "{body}");
}

#[tokio::test]
async fn the_prompt_is_composed_in_order_truncated_and_bootstrap_ends() {
    let (fakes, onyx) = setup().await;
    // Reading a workspace file seeds the agent from the templates.
    let agents_md = onyx.get_json("/v1/agents/main/files/AGENTS.md").await;
    assert!(agents_md["content"].as_str().unwrap().contains("how you work"));
    let huge_soul = format!("# Soul\nSTART-OF-SOUL {} END-OF-SOUL\n", "x".repeat(30_000));
    put_memory(&onyx, "main/SOUL.md", &huge_soul).await;
    put_memory(&onyx, "main/MEMORY.md", "# Memory\n\nLikes tea.\n").await;
    onyx.post("/v1/memory")
        .json(&json!({"content": "walked the dog"}))
        .send()
        .await
        .unwrap();

    let (status, body) = onyx
        .chat(json!({"model": "onyx:main", "messages": [
            {"role": "system", "content": "CLIENT SYSTEM PROMPT"},
            {"role": "user", "content": "hello"}
        ]}))
        .await;
    assert_eq!(status, 200, "{body}");
    let sent = fakes.openai.state.last_request().unwrap();
    let system = sent["messages"][0]["content"].as_str().unwrap();
    assert_eq!(
        sent["messages"][1]["content"], "CLIENT SYSTEM PROMPT",
        "the client's system message comes after ours"
    );
    let order = [
        "## IDENTITY.md",
        "## SOUL.md",
        "## USER.md",
        "## AGENTS.md",
        "## TOOLS.md",
        "## MEMORY.md",
        "## BOOTSTRAP.md",
    ];
    let positions: Vec<usize> = order
        .iter()
        .map(|h| system.find(h).unwrap_or_else(|| panic!("{h} missing:\n{system}")))
        .collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}");
    assert!(
        system.contains("START-OF-SOUL") && system.contains("END-OF-SOUL"),
        "head and tail kept"
    );
    assert!(system.contains("characters omitted"), "a visible marker");
    assert!(system.contains("Likes tea."));
    assert!(
        !system.contains("walked the dog") && !system.contains("(today)"),
        "the daily log is volatile: not in the stable system prompt"
    );
    let user = last_user_message(&fakes);
    assert!(
        user.starts_with("<onyx-context>")
            && user.contains("(today)")
            && user.contains("walked the dog")
            && user.ends_with("</onyx-context>\n\nhello"),
        "{user}"
    );
    assert!(system.len() < huge_soul.len(), "the big file was cut");

    // The first-run ritual ends when the agent deletes BOOTSTRAP.md; it stays gone.
    agent_chat(
        &onyx,
        "main",
        r#"script: memory_write {"path": "BOOTSTRAP.md", "delete": true} ; answer"#,
    )
    .await;
    agent_chat(&onyx, "main", "hello again").await;
    assert!(!last_system_prompt(&fakes).contains("## BOOTSTRAP.md"));
    assert_eq!(reply(onyx.get("/v1/agents/main/files/BOOTSTRAP.md")).await.0, 404);

    // Relevant memory is added on request.
    let (status, body) = reply(
        onyx.post("/v1/chat/completions")
            .header("x-onyx-include-memory", "true")
            .json(&json!({"model": "onyx:main", "messages": [{"role": "user", "content": "what do I like to drink? tea"}]})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let context = last_user_message(&fakes);
    assert!(
        context.contains("## Relevant memory") && context.contains("main/MEMORY.md:"),
        "{context}"
    );
}

#[tokio::test]
async fn inbox_messages_are_delivered_exactly_once() {
    let (fakes, onyx) = setup().await;
    let (body, _) = agent_chat(
        &onyx,
        "main",
        r#"script: send_to_agent {"agent": "helper", "message": "please water the plants"} ; answer"#,
    )
    .await;
    assert!(answer(&body).contains("delivered to helper's inbox"), "{body}");
    let pending = onyx.get_json("/v1/inbox?agent=helper&status=pending").await;
    assert_eq!(pending["data"][0]["from"], "main");
    assert_eq!(pending["data"][0]["body"], "please water the plants");

    agent_chat(&onyx, "helper", "anything new?").await;
    assert!(
        last_user_message(&fakes).contains("From main")
            && last_user_message(&fakes).contains("please water the plants")
    );
    agent_chat(&onyx, "helper", "and now?").await;
    assert!(
        !last_user_message(&fakes).contains("please water the plants"),
        "delivered once"
    );
    assert_eq!(
        onyx.get_json("/v1/inbox?agent=helper&status=pending").await["data"],
        json!([])
    );
    assert_eq!(
        onyx.get_json("/v1/inbox?agent=helper").await["data"][0]["status"],
        "read"
    );

    // Unknown agents are refused; wake: true starts the recipient at once.
    let (body, _) = agent_chat(
        &onyx,
        "main",
        r#"script: send_to_agent {"agent": "ghost", "message": "x"} ; answer"#,
    )
    .await;
    assert!(answer(&body).contains("there is no agent \"ghost\""), "{body}");
    agent_chat(&onyx, "main", r#"script: send_to_agent {"agent": "helper", "message": "wake up and stretch", "wake": true} ; answer"#).await;
    wait_until(secs(5), "the woken run read its inbox", async || {
        let read = onyx.get_json("/v1/inbox?agent=helper&status=pending").await["data"] == json!([])
            && onyx.get_json("/v1/sessions?agent=helper&source=inbox").await["data"]
                .as_array()
                .is_some_and(|d| !d.is_empty());
        read.then_some(())
    })
    .await;
}

#[tokio::test]
async fn file_tools_stay_in_the_work_dir_and_safe_mode_cannot_exec() {
    let (fakes, onyx) = setup().await;
    let work = onyx.dir.path().join("data/workspaces/main");
    std::fs::create_dir_all(&work).unwrap();
    std::os::unix::fs::symlink("/etc", work.join("link")).unwrap();
    let (body, _) = agent_chat(
        &onyx,
        "main",
        r#"script: fs_read {"path": "../../onyx.json5"} & fs_write {"path": "/tmp/onyx-escape.txt", "content": "x"} & fs_read {"path": "link/hostname"} & fs_write {"path": "link/evil", "content": "x"} ; answer"#,
    )
    .await;
    let text = answer(&body);
    assert_eq!(text.matches("error:").count(), 4, "{text}");
    assert!(
        text.contains("\"..\"") && text.contains("absolute") && text.contains("symbolic link"),
        "{text}"
    );
    assert!(!std::path::Path::new("/tmp/onyx-escape.txt").exists());

    // exec works where allowed, and is not even offered in safe mode.
    let (body, _) = agent_chat(
        &onyx,
        "main",
        r#"script: exec {"command": "echo from-the-shell && pwd"} ; answer"#,
    )
    .await;
    assert!(
        answer(&body).contains("exit code 0") && answer(&body).contains("from-the-shell"),
        "{body}"
    );
    assert!(
        answer(&body).contains("workspaces/main"),
        "runs in the work dir: {body}"
    );
    let (body, _) = agent_chat(
        &onyx,
        "reader",
        r#"script: exec {"command": "echo nope"} ; answer"#,
    )
    .await;
    assert!(answer(&body).contains("not available to you"), "{body}");
    let requests = fakes.openai.state.requests();
    let last_script = requests
        .iter()
        .rev()
        .find(|r| r["model"] == "fake-script")
        .unwrap();
    let offered = pluck(&last_script["tools"], "/function/name");
    assert!(offered.contains(&"memory_search".to_string()) && offered.contains(&"fs_read".to_string()));
    for write in ["exec", "fs_write", "fs_edit", "memory_write", "send_to_agent"] {
        assert!(
            !offered.contains(&write.to_string()),
            "{write} offered in safe mode: {offered:?}"
        );
    }
}

#[tokio::test]
async fn web_fetch_refuses_private_addresses_and_redirects_into_them() {
    let (fakes, onyx) = setup().await;
    let port = fakes.openai.addr.port();
    let fetch = |url: String| format!(r#"script: web_fetch {{"url": "{url}"}} ; answer"#);
    // Allowlisted by name: fetched and turned into text.
    let (body, _) = agent_chat(
        &onyx,
        "main",
        &fetch(format!("http://localhost:{port}/_fake/page")),
    )
    .await;
    let text = answer(&body);
    assert!(
        text.contains("marmalade") && text.contains("Onyx test page"),
        "{text}"
    );
    assert!(
        !text.contains("<b>") && !text.contains("var hidden"),
        "readable text, not HTML: {text}"
    );
    for url in [
        format!("http://127.0.0.1:{port}/_fake/page"),
        "http://10.0.0.1/".to_string(),
        "http://169.254.169.254/latest/meta-data/".to_string(),
        "http://[::1]/".to_string(),
        format!("http://localhost:{port}/_fake/redirect?to=http://127.0.0.1:{port}/_fake/page"),
        format!("http://localhost:{port}/_fake/redirect?to=http://169.254.169.254/"),
        "file:///etc/passwd".to_string(),
    ] {
        let (body, _) = agent_chat(&onyx, "main", &fetch(url.clone())).await;
        assert!(answer(&body).contains("refused"), "{url}: {body}");
    }
}

#[tokio::test]
async fn ask_mode_waits_for_approval_and_times_out_to_deny() {
    let (_fakes, onyx) = setup().await;
    let response = onyx
        .post("/v1/chat/completions")
        .json(&json!({"model": "onyx:careful", "stream": true,
            "messages": [{"role": "user", "content": r#"script: exec {"command": "echo approved-run"} ; answer"#}]}))
        .send()
        .await
        .unwrap();
    let decide = |id: &str, decision: &str| {
        reply(
            onyx.post(&format!("/v1/approvals/{id}"))
                .json(&json!({"decision": decision})),
        )
    };
    let mut body = response.bytes_stream();
    let mut seen = String::new();
    let mut approved = false;
    use futures::StreamExt;
    while let Some(part) = body.next().await {
        seen.push_str(&String::from_utf8_lossy(&part.unwrap()));
        if !approved && let Some(at) = seen.find("\"approval_id\":\"") {
            let id: String = seen[at + 15..].chars().take_while(|c| *c != '"').collect();
            let pending = onyx.get_json("/v1/approvals").await;
            assert_eq!(pending["data"][0]["tool"], "exec", "{pending}");
            assert_eq!(decide(&id, "approve").await.0, 200);
            approved = true;
        }
    }
    assert!(approved, "{seen}");
    assert!(
        seen.contains("approved-run") && seen.contains("exit code 0"),
        "{seen}"
    );

    // Nobody answers: denied after the timeout (2 s here), nothing runs.
    let (body, _) = agent_chat(
        &onyx,
        "careful",
        r#"script: fs_write {"path": "never.txt", "content": "x"} ; answer"#,
    )
    .await;
    assert!(answer(&body).contains("nobody approved"), "{body}");
    assert!(!onyx.dir.path().join("data/workspaces/careful/never.txt").exists());
    assert_eq!(decide("not-a-real-id", "approve").await.0, 404, "stale");
    assert_eq!(decide("x", "maybe").await.0, 400, "bad decision");

    // A run cancelled while it waits withdraws its request: nothing is left pending.
    let response = onyx
        .post("/v1/chat/completions")
        .json(&json!({"model": "onyx:careful", "stream": true,
            "messages": [{"role": "user", "content": r#"script: exec {"command": "echo never"} ; answer"#}]}))
        .send()
        .await
        .unwrap();
    let run = response.headers()["x-onyx-run-id"].to_str().unwrap().to_string();
    let mut body = response.bytes_stream();
    let mut seen = String::new();
    while !seen.contains("\"approval_id\"") {
        let part = body
            .next()
            .await
            .expect("the stream ended before the approval request")
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&part));
    }
    assert_eq!(pending_count(&onyx).await, 1);
    assert_eq!(reply(onyx.post(&format!("/v1/runs/{run}/cancel"))).await.0, 200);
    wait_until(secs(5), "the cancelled run's approval is withdrawn", async || {
        (pending_count(&onyx).await == 0).then_some(())
    })
    .await;
}

async fn pending_count(onyx: &Onyx) -> usize {
    onyx.get_json("/v1/approvals").await["data"]
        .as_array()
        .map_or(0, Vec::len)
}

#[tokio::test]
async fn agents_api_lists_creates_patches_and_routes() {
    let (_fakes, onyx) = setup().await;
    let models = onyx.get_json("/v1/models").await;
    let ids = ids(&models);
    assert!(
        ["onyx:main", "onyx:helper", "openai/fake-echo"]
            .iter()
            .all(|id| ids.iter().any(|listed| listed == id)),
        "{ids:?}"
    );

    let (status, created) = reply(
        onyx.post("/v1/agents")
            .json(&json!({"id": "scout", "name": "Scout", "model": "openai/fake-echo"})),
    )
    .await;
    assert_eq!(status, 200, "{created}");
    let soul = onyx.get_json("/v1/agents/scout/files/SOUL.md").await;
    assert!(
        soul["content"].as_str().unwrap().contains("who you are"),
        "seeded from the templates: {soul}"
    );
    let create = |body: Value| reply(onyx.post("/v1/agents").json(&body));
    assert_eq!(create(json!({"id": "scout"})).await.0, 409);
    assert_eq!(create(json!({"id": "../x"})).await.0, 400);

    // The x-onyx-agent-id header routes too.
    let (_, body) = reply(
        onyx.post("/v1/chat/completions")
            .header("x-onyx-agent-id", "scout")
            .json(&json!({"model": "anything", "messages": [{"role": "user", "content": "hi scout"}]})),
    )
    .await;
    assert_eq!(
        body["choices"][0]["message"]["content"], "echo: hi scout",
        "{body}"
    );

    let (_, patched) = reply(
        onyx.patch("/v1/agents/scout")
            .json(&json!({"enabled": false, "permission_mode": "safe"})),
    )
    .await;
    assert_eq!(
        (patched["enabled"].as_bool(), patched["permission_mode"].as_str()),
        (Some(false), Some("safe"))
    );
    let to = |model: &str| {
        reply(
            onyx.post("/v1/chat/completions")
                .json(&json!({"model": model, "messages": [{"role": "user", "content": "x"}]})),
        )
    };
    assert_eq!(to("onyx:scout").await.0, 404, "disabled");
    let list = onyx.get_json("/v1/agents").await;
    assert!(
        list["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["id"] == "scout" && a["source"] == "api")
    );
    let (status, body) = to("onyx:nobody").await;
    assert_eq!(status, 404);
    assert_eq!(body["error"]["code"], "model_not_found");
    assert_eq!(reply(onyx.get("/v1/agents/main/files/secrets.txt")).await.0, 400);
}

#[tokio::test]
async fn allow_and_deny_lists_decide_the_tools_offered_and_web_search_works() {
    let (fakes, onyx) = setup().await;
    let (body, _) = agent_chat(
        &onyx,
        "narrow",
        r#"script: web_search {"query": "rust gateways"} ; answer"#,
    )
    .await;
    assert!(answer(&body).contains("First result for rust gateways"), "{body}");
    let offered = pluck(
        &fakes.openai.state.last_request().unwrap()["tools"],
        "/function/name",
    );
    assert_eq!(offered, ["memory_search", "web_search"]);
}
