//! The notifications stream through the real binary: what an agent says
//! outside a watched turn (`send_message` to a web session, a task's result
//! with no chat bound, an approval that starts waiting) arrives as
//! server-sent events; a reconnecting client resumes after `Last-Event-ID`;
//! callers without a key, and keys scoped to agents, are refused; the list
//! counts unread items until they are marked read; and an open stream ends
//! cleanly when the gateway shuts down.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::*;

/// One server-sent event: its `id` and its JSON `data`.
struct Event {
    id: String,
    data: Value,
}

/// Reads events from an open stream (keep-alive comments skipped).
struct Stream {
    response: reqwest::Response,
    buffer: String,
}

impl Stream {
    async fn open(onyx: &Onyx, last_event_id: Option<&str>) -> Self {
        let mut request = onyx.get("/v1/notifications/stream");
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Self {
            response,
            buffer: String::new(),
        }
    }

    /// The next event, or `None` when the server ended the stream.
    async fn next(&mut self) -> Option<Event> {
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let id = block.lines().find_map(|l| l.strip_prefix("id: "));
                let data = block.lines().find_map(|l| l.strip_prefix("data: "));
                if let (Some(id), Some(data)) = (id, data) {
                    return Some(Event {
                        id: id.to_string(),
                        data: serde_json::from_str(data).unwrap(),
                    });
                }
            }
            let chunk = tokio::time::timeout(secs(60), self.response.chunk())
                .await
                .expect("an event within 60 s")
                .expect("the stream reads without error")?;
            self.buffer.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }
}

async fn start(fakes: &Fakes) -> Onyx {
    let config = TestConfig::new(fakes)
        .merge(json!({
            "agents": {
                "defaults": { "model": "openai/fake-script", "permissionMode": "allow-all" },
                "list": [
                    { "id": "main", "default": true },
                    { "id": "careful", "permissionMode": "ask" },
                ],
            },
            "tools": { "approvalTimeoutSeconds": 60 },
        }))
        .build();
    Onyx::start(Some(&config), &[]).await
}

/// A new session of `agent`, made by one turn.
async fn new_session(onyx: &Onyx, agent: &str) -> String {
    let response = onyx
        .post("/v1/chat/completions")
        .json(&json!({"model": format!("onyx:{agent}"), "messages": [{"role": "user", "content": "script: say hello"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    session_id(&response)
}

#[tokio::test]
async fn agent_messages_task_results_and_approvals_are_streamed_and_resumed() {
    let fakes = Fakes::start().await;
    let onyx = start(&fakes).await;
    let session = new_session(&onyx, "main").await;
    let mut stream = Stream::open(&onyx, None).await;

    // send_message into the web session.
    let script = format!(
        r#"script: send_message {{"to": "session:{session}", "text": "the build is green"}} ; answer"#
    );
    let answer = onyx.agent_answer("main", &script).await;
    assert!(answer.contains(&format!("sent to session:{session}")), "{answer}");
    let message = stream.next().await.unwrap();
    assert_eq!(message.data["kind"], "message", "{}", message.data);
    assert_eq!(message.data["body"], "the build is green");
    assert_eq!(message.data["link"], format!("/sessions/{session}"));
    assert_eq!(message.data["read"], false);
    assert_eq!(message.id, message.data["id"].as_str().unwrap());

    // A task with no chat bound, run now.
    let (status, task) = reply(onyx.post("/v1/tasks").json(&json!({
        "agent": "main", "name": "nightly report", "prompt": "script: say 3 new issues",
        "schedule_type": "cron", "schedule_value": "0 3 * * *",
    })))
    .await;
    assert_eq!(status, 201, "{task}");
    let (status, run) = reply(onyx.post(&format!("/v1/tasks/{}/run", task["id"].as_str().unwrap()))).await;
    assert!(status == 200 || status == 202, "{status} {run}");
    let result = stream.next().await.unwrap();
    assert_eq!(result.data["kind"], "task_result", "{}", result.data);
    assert_eq!(result.data["title"], "main: nightly report");
    assert_eq!(result.data["body"], "3 new issues");

    // An approval that starts waiting (then denied, so the turn ends).
    let asking = tokio::spawn({
        let request = onyx.post("/v1/chat/completions").json(&json!({
            "model": "onyx:careful",
            "messages": [{"role": "user", "content": r#"script: exec {"command": "echo hi"} ; answer"#}],
        }));
        request.send()
    });
    let approval = stream.next().await.unwrap();
    assert_eq!(approval.data["kind"], "approval", "{}", approval.data);
    assert_eq!(approval.data["agent"], "careful");
    assert_eq!(approval.data["title"], "careful wants to run exec");
    let pending = onyx.get_json("/v1/approvals").await;
    let id = pending["data"][0]["id"].as_str().unwrap().to_string();
    let (status, _) = reply(
        onyx.post(&format!("/v1/approvals/{id}"))
            .json(&json!({"decision": "deny"})),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(asking.await.unwrap().unwrap().status(), 200);

    // A client that reconnects after the first event gets the two after it.
    let mut resumed = Stream::open(&onyx, Some(&message.id)).await;
    assert_eq!(resumed.next().await.unwrap().id, result.id);
    assert_eq!(resumed.next().await.unwrap().id, approval.id);

    // The list: newest first, all unread until marked.
    let list = onyx.get_json("/v1/notifications").await;
    assert_eq!(list["unread"], 3, "{list}");
    assert_eq!(
        ids(&list),
        [approval.id.clone(), result.id.clone(), message.id.clone()]
    );
    let (status, marked) = reply(
        onyx.post("/v1/notifications/read")
            .json(&json!({"ids": [message.id]})),
    )
    .await;
    assert_eq!(
        (status, marked["marked"].clone(), marked["unread"].clone()),
        (200, json!(1), json!(2))
    );
    let (status, marked) = reply(onyx.post("/v1/notifications/read").json(&json!({}))).await;
    assert_eq!((status, marked["unread"].clone()), (200, json!(0)));
    let unread = onyx.get_json("/v1/notifications?unread=true").await;
    assert_eq!(unread["data"], json!([]));
}

#[tokio::test]
async fn the_stream_refuses_callers_without_a_key_scoped_keys_and_ids_it_never_sent() {
    let fakes = Fakes::start().await;
    let onyx = start(&fakes).await;
    for path in ["/v1/notifications/stream", "/v1/notifications"] {
        let (status, body) = reply(onyx.anonymous("GET", path)).await;
        assert_eq!(status, 401, "{path}: {body}");
    }
    let scoped = onyx.create_key("main's chat", "chat").await;
    let (status, made) = reply(
        onyx.post("/v1/keys")
            .json(&json!({"name": "main only", "scope": "chat", "agents": ["main"]})),
    )
    .await;
    assert_eq!(status, 201, "{made}");
    let scoped_key = made["key"].as_str().unwrap();
    for (method, path) in [
        ("GET", "/v1/notifications/stream"),
        ("GET", "/v1/notifications"),
        ("POST", "/v1/notifications/read"),
    ] {
        let (status, body) = reply(onyx.with_key(method, path, scoped_key).json(&json!({}))).await;
        assert_eq!(status, 403, "{method} {path}: {body}");
    }
    // An unscoped chat key is the owner's program: it may follow.
    let unscoped_key = scoped["key"].as_str().unwrap();
    let response = onyx
        .with_key("GET", "/v1/notifications/stream", unscoped_key)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    drop(response);

    let (status, body) = reply(
        onyx.get("/v1/notifications/stream")
            .header("last-event-id", "../../etc"),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["param"], "Last-Event-ID", "{body}");
    let (status, body) = reply(onyx.post("/v1/notifications/read").json(&json!({"ids": "all"}))).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["param"], "ids", "{body}");
}

#[tokio::test]
async fn an_open_stream_ends_cleanly_at_shutdown() {
    let fakes = Fakes::start().await;
    let onyx = start(&fakes).await;
    let mut stream = Stream::open(&onyx, None).await;
    let reading = tokio::spawn(async move { stream.next().await.is_none() });
    let started = Instant::now();
    let (status, _logs) = onyx.stop_and_logs().await;
    assert!(status.success(), "{status}");
    // The grace period is 30 s: a stream that held the server would take it all.
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    assert!(reading.await.unwrap(), "the stream ended without an event");
}
