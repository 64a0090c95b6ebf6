//! Context compaction through the real binary: a 500-turn chat against a
//! model with an 8,000-token window keeps every request within it (flushing
//! memory and summarizing on the way, and telling the user), the log keeps
//! all 500 turns; compacting by hand; and switching it off.

use onyx::providers::types::{Message, ToolDef};
use serde_json::{Value, json};

use crate::harness::*;

const WINDOW: usize = 8_000;
const TURNS: usize = 500;

fn config(fakes: &Fakes, compaction: Value) -> String {
    TestConfig::new(fakes)
        .merge(json!({
            "memory": { "embedder": { "type": "ollama", "model": "all-minilm", "dimensions": 64 } },
            "models": { "contextWindow": { "openai/fake-echo": WINDOW } },
            "agents": {
                "defaults": { "model": "openai/fake-echo", "permissionMode": "allow-all", "compaction": compaction },
                "list": [ { "id": "main", "default": true } ],
            },
        }))
        .build()
}

/// About sixty tokens of a user's message.
fn message(i: usize) -> String {
    format!(
        "turn {i}: please keep track of the garden plan, the tomatoes go by the south fence and the beans climb the trellis near the shed, water every other morning"
    )
}

async fn turn(onyx: &Onyx, session: &str, text: &str) -> (Value, String) {
    let response = onyx
        .post("/v1/chat/completions")
        .header("x-onyx-session-id", session)
        .json(&json!({"model": "onyx:main", "messages": [{"role": "user", "content": text}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let id = session_id(&response);
    (response.json().await.unwrap(), id)
}

fn notices(body: &Value) -> Vec<String> {
    body["x_onyx"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "compacted")
        .map(|e| e["notice"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn a_500_turn_chat_stays_within_an_8000_token_window_and_keeps_every_turn() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes, json!({}))), &[]).await;
    let (_, session) = turn(&onyx, "new", &message(0)).await;
    let mut told = Vec::new();
    for i in 1..TURNS {
        let (body, _) = turn(&onyx, &session, &message(i)).await;
        assert_eq!(
            body["choices"][0]["message"]["content"],
            format!("echo: {}", message(i))
        );
        told.extend(notices(&body));
    }

    let requests = fakes.openai.state.requests();
    let chats: Vec<&Value> = requests.iter().filter(|r| r["messages"].is_array()).collect();
    let largest = chats
        .iter()
        .map(|r| {
            let messages = serde_json::from_value::<Vec<Message>>(r["messages"].clone()).unwrap();
            let tools = serde_json::from_value::<Vec<ToolDef>>(r["tools"].clone()).unwrap_or_default();
            onyx::agents::context::count_request(&messages, &tools)
        })
        .max()
        .unwrap();
    assert!(largest <= WINDOW, "a request took {largest} tokens of {WINDOW}");
    // It compacted more than once, told the user each time, and the summary reached the model.
    assert!(told.len() >= 3, "{told:?}");
    assert!(told.iter().all(|n| n.contains("summarized")), "{told:?}");
    let last = chats.last().unwrap();
    let summary = &last["messages"].as_array().unwrap()[1];
    assert!(
        summary["content"].as_str().unwrap().contains("Summary of") && summary["role"] == "system",
        "{summary}"
    );
    // The requests stay bounded: the last carries far fewer than 1,000 messages.
    assert!(last["messages"].as_array().unwrap().len() < 150);
    // The memory flush wrote to memory (today's log).
    let files = onyx.get_json("/v1/memory/files?agent=main").await;
    let daily = pluck(&files["data"], "/path")
        .into_iter()
        .find(|p| p.starts_with("memory/"))
        .unwrap();
    let log = onyx.get_json(&format!("/v1/memory/files/main/{daily}")).await;
    assert!(
        log["content"]
            .as_str()
            .unwrap()
            .contains("Before compaction: turn"),
        "{log}"
    );
    // The log still has every turn.
    let export = onyx
        .get(&format!("/v1/sessions/{session}/export"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let users: Vec<String> = export
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect();
    if users.len() != TURNS {
        let mut seen = std::collections::HashSet::new();
        let repeated: Vec<&String> = users.iter().filter(|u| !seen.insert(*u)).collect();
        let (_, logs) = onyx.stop_and_logs().await;
        let tail: String = logs
            .lines()
            .filter(|l| l.contains("WARN") || l.contains("ERROR"))
            .collect::<Vec<_>>()
            .join("\n");
        panic!("{} user turns; repeated: {repeated:?}\n{tail}", users.len());
    }
    assert!(export.contains("\"role\":\"compaction\""));
}

#[tokio::test]
async fn compacting_by_hand_and_switching_it_off() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes, json!({"enabled": false}))), &[]).await;
    let (_, session) = turn(&onyx, "new", &message(0)).await;
    // Switched off, a long chat is never compacted on its own.
    for i in 1..80 {
        let (body, _) = turn(&onyx, &session, &message(i)).await;
        assert_eq!(notices(&body), Vec::<String>::new());
    }
    let (status, report) = reply(onyx.post(&format!("/v1/sessions/{session}/compact"))).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["compacted"], true, "{report}");
    assert!(report["turns"].as_u64().unwrap() > 10, "{report}");
    assert!(report["after_tokens"].as_u64() < report["before_tokens"].as_u64());
    // The next turn builds on the summary.
    turn(&onyx, &session, "and now?").await;
    let last = fakes.openai.state.last_request().unwrap();
    assert!(last["messages"].to_string().contains("Summary of"), "{last}");
    let sent = last["messages"].as_array().unwrap().len();

    // A reindex (the database lost, rebuilt from the logs) keeps where the
    // history starts: the next turn still builds on the summary, not on all 80 turns.
    let dir = onyx.crash().await;
    std::fs::remove_dir_all(dir.path().join("data/db")).unwrap();
    let output = Onyx::cli(dir.path(), &["reindex"]).await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let onyx = Onyx::start_in(dir, Some(&config(&fakes, json!({"enabled": false}))), &[]).await;
    turn(&onyx, &session, "still there?").await;
    let last = fakes.openai.state.last_request().unwrap();
    assert!(last["messages"].to_string().contains("Summary of"), "{last}");
    assert_eq!(
        last["messages"].as_array().unwrap().len(),
        sent + 2,
        "one more turn than before"
    );

    let (status, body) = reply(onyx.post("/v1/sessions/not-a-session/compact")).await;
    assert_eq!(status, 400, "{body}");
    let missing = uuid::Uuid::now_v7();
    let (status, body) = reply(onyx.post(&format!("/v1/sessions/{missing}/compact"))).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("session_not_found"))
    );
}
