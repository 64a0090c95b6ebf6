//! `GET /openapi.json` against the running gateway: served without a key, it
//! names every method the router answers on each path (and no other), and
//! the answers of a representative call of each family (models, a chat
//! completion through the fake upstream, agents, sessions, memory, tasks,
//! providers, usage, keys, health, errors of both shapes) match the schemas it
//! gives for their route and status. The JSON Schema 2020-12 validation (and
//! the document's own against the official OpenAPI 3.1 meta-schema) runs in
//! PyPI's `jsonschema`, `tests/openapi/validate.py`; a failure names the
//! route and the first schema error.

use std::path::Path;

use serde_json::{Value, json};

use crate::harness::*;

const VERBS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];

/// What the gateway answered, for `validate.py`.
struct Samples {
    document: Value,
    samples: Vec<Value>,
}

impl Samples {
    /// Sends `request` (to the documented `path`); keeps and returns its status and body.
    async fn call(&mut self, method: &str, path: &str, request: reqwest::RequestBuilder) -> (u16, Value) {
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let url = response.url().path().to_string();
        let content_type = response
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().split(';').next().unwrap().trim().to_string())
            .unwrap_or_default();
        let bytes = response.bytes().await.unwrap();
        let body: Value = serde_json::from_slice(&bytes).unwrap_or_else(|_| {
            panic!(
                "{method} {url} -> {status}: not JSON: {}",
                String::from_utf8_lossy(&bytes)
            )
        });
        self.samples.push(json!({
            "method": method.to_ascii_lowercase(), "path": path, "url": url,
            "status": status, "content_type": content_type, "body": body,
        }));
        (status, body)
    }

    /// Runs `tests/openapi/validate.py` over the document and every answer
    /// kept: whether all matched, and what it printed.
    fn check(&self, dir: &Path) -> (bool, String) {
        let python = std::env::var("OPENAPI_PYTHON")
            .expect("OPENAPI_PYTHON: a Python with tests/openapi/requirements.txt (tests/run sets it)");
        let file = dir.join("openapi-samples.json");
        let data = json!({"document": self.document, "samples": self.samples});
        std::fs::write(&file, serde_json::to_vec(&data).unwrap()).unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/openapi/validate.py");
        let output = std::process::Command::new(python)
            .arg(&script)
            .arg(&file)
            .output()
            .expect("run tests/openapi/validate.py");
        let printed = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        (output.status.success(), printed)
    }
}

fn config(fakes: &Fakes) -> String {
    TestConfig::new(fakes)
        .merge(json!({
            "memory": { "embedder": { "type": "ollama", "model": "all-minilm", "dimensions": 64 } },
            "agents": {
                "defaults": { "model": "openai/fake-echo", "permissionMode": "allow-all" },
                "list": [{ "id": "main", "default": true }],
            },
        }))
        .build()
}

#[tokio::test]
async fn live_answers_match_the_document() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes)), &[]).await;

    // Public, JSON, OpenAPI 3.1.
    let response = onyx.anonymous("GET", "/openapi.json").send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    let document: Value = response.json().await.unwrap();
    assert_eq!(document["openapi"], "3.1.1");
    let mut s = Samples {
        document,
        samples: Vec::new(),
    };

    // OpenAI-compatible.
    let (status, models) = s.call("GET", "/v1/models", onyx.get("/v1/models")).await;
    assert_eq!(status, 200, "{models}");
    assert!(ids(&models).contains(&"openai/fake-echo".to_string()), "{models}");
    let chat = json!({"model": "openai/fake-echo", "messages": [{"role": "user", "content": "hello there"}]});
    let (status, answer) = s
        .call(
            "POST",
            "/v1/chat/completions",
            onyx.post("/v1/chat/completions").json(&chat),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let agent_chat =
        json!({"model": "onyx:main", "messages": [{"role": "user", "content": "remember this"}]});
    let (status, answer) = s
        .call(
            "POST",
            "/v1/chat/completions",
            onyx.post("/v1/chat/completions").json(&agent_chat),
        )
        .await;
    assert_eq!(status, 200, "{answer}");

    // Agents.
    let (status, created) = s
        .call(
            "POST",
            "/v1/agents",
            onyx.post("/v1/agents")
                .json(&json!({"id": "scout", "name": "Scout", "model": "openai/fake-echo"})),
        )
        .await;
    assert_eq!(status, 200, "{created}");
    let (status, agent) = s
        .call("GET", "/v1/agents/{agent}", onyx.get("/v1/agents/scout"))
        .await;
    assert_eq!((status, agent["id"].as_str()), (200, Some("scout")), "{agent}");
    let (status, agents) = s.call("GET", "/v1/agents", onyx.get("/v1/agents")).await;
    assert_eq!(status, 200, "{agents}");

    // Sessions (the agent's chat kept one).
    let (status, sessions) = s.call("GET", "/v1/sessions", onyx.get("/v1/sessions")).await;
    assert_eq!(status, 200, "{sessions}");
    let session = sessions["data"][0]["id"].as_str().expect("a session").to_string();
    let (status, detail) = s
        .call(
            "GET",
            "/v1/sessions/{id}",
            onyx.get(&format!("/v1/sessions/{session}")),
        )
        .await;
    assert_eq!(status, 200, "{detail}");

    // Memory.
    let (status, written) = s
        .call(
            "POST",
            "/v1/memory",
            onyx.post("/v1/memory")
                .json(&json!({"content": "the fern wants water on Sundays"})),
        )
        .await;
    assert_eq!(status, 200, "{written}");
    let (status, found) = s
        .call(
            "GET",
            "/v1/memory/search",
            onyx.get("/v1/memory/search")
                .query(&[("q", "fern water"), ("agent", "main")]),
        )
        .await;
    assert_eq!(status, 200, "{found}");
    let (status, files) = s
        .call("GET", "/v1/memory/files", onyx.get("/v1/memory/files?agent=main"))
        .await;
    assert_eq!(status, 200, "{files}");

    // Tasks.
    let task = json!({"name": "plants", "prompt": "water the plants", "schedule_type": "interval", "schedule_value": "1h"});
    let (status, created) = s
        .call("POST", "/v1/tasks", onyx.post("/v1/tasks").json(&task))
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap();
    let (status, _) = s.call("GET", "/v1/tasks", onyx.get("/v1/tasks")).await;
    assert_eq!(status, 200);
    let (status, _) = s
        .call("GET", "/v1/tasks/{id}", onyx.get(&format!("/v1/tasks/{id}")))
        .await;
    assert_eq!(status, 200);

    // Administration and the owner's views.
    for path in [
        "/v1/providers",
        "/v1/aliases",
        "/v1/usage",
        "/v1/usage/limits",
        "/v1/status",
        "/v1/keys",
        "/v1/notifications",
        "/v1/runs",
        "/v1/approvals",
        "/v1/memory/status",
        "/v1/skills",
        "/v1/mcp/servers",
        "/v1/knowledge",
        "/v1/audit",
        "/auth/me",
    ] {
        let (status, body) = s.call("GET", path, onyx.get(path)).await;
        assert_eq!(status, 200, "{path}: {body}");
    }
    let (status, key) = s
        .call(
            "POST",
            "/v1/keys",
            onyx.post("/v1/keys")
                .json(&json!({"name": "reader", "scope": "chat"})),
        )
        .await;
    assert_eq!(status, 201, "{key}");
    let (status, health) = s.call("GET", "/health", onyx.get("/health")).await;
    assert_eq!(status, 200);
    assert!(health["dependencies"].is_array(), "{health}");
    let (status, summary) = s.call("GET", "/health", onyx.anonymous("GET", "/health")).await;
    assert_eq!(status, 200);
    assert!(summary.get("dependencies").is_none(), "{summary}");

    // Errors in both shapes.
    let (status, missing) = s
        .call("GET", "/v1/agents/{agent}", onyx.get("/v1/agents/nobody"))
        .await;
    assert_eq!(status, 404, "{missing}");
    assert!(missing["error"]["message"].is_string(), "{missing}");
    let (status, refused) = s
        .call(
            "POST",
            "/v1/chat/completions",
            onyx.anonymous("POST", "/v1/chat/completions").json(&chat),
        )
        .await;
    assert_eq!(status, 401, "{refused}");
    let (status, bad) = s
        .call(
            "POST",
            "/v1/chat/completions",
            onyx.post("/v1/chat/completions").json(&json!({"messages": []})),
        )
        .await;
    assert_eq!(status, 400, "{bad}");
    let (status, anthropic) = s
        .call(
            "POST",
            "/v1/messages",
            onyx.post("/v1/messages")
                .json(&json!({"max_tokens": 10, "messages": []})),
        )
        .await;
    assert_eq!(status, 400, "{anthropic}");
    assert_eq!(anthropic["type"], "error", "{anthropic}");
    let (status, unauthorised) = s
        .call(
            "POST",
            "/v1/messages",
            onyx.anonymous("POST", "/v1/messages")
                .json(&json!({"model": "anthropic/fake-echo"})),
        )
        .await;
    assert_eq!(status, 401, "{unauthorised}");

    let (valid, printed) = s.check(onyx.dir.path());
    assert!(valid, "answers that do not match /openapi.json:\n{printed}");
    let checked = format!("{} answers checked, 0 failures", s.samples.len());
    assert!(printed.contains(&checked), "{printed}");

    // A wrong answer is caught, with its route: the check itself can fail.
    let broken = Samples {
        document: s.document.clone(),
        samples: vec![json!({
            "method": "get", "path": "/v1/models", "url": "/v1/models", "status": 200,
            "content_type": "application/json", "body": {"object": "list", "data": [{"id": 7}]},
        })],
    };
    let (valid, printed) = broken.check(onyx.dir.path());
    assert!(!valid && printed.contains("GET /v1/models -> 200"), "{printed}");
}

/// A path of the document with its parameters filled in.
fn concrete(path: &str) -> String {
    path.replace("{*path}", "notes/a.md")
        .replace("{*file}", "a.md")
        .split('/')
        .map(|segment| if segment.starts_with('{') { "x" } else { segment })
        .collect::<Vec<_>>()
        .join("/")
}

#[tokio::test]
async fn the_document_names_each_method_the_router_answers() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes)), &[]).await;
    let document = onyx.anonymous("GET", "/openapi.json").send().await.unwrap();
    let document: Value = document.json().await.unwrap();
    let paths = document["paths"].as_object().unwrap();
    assert!(paths.len() > 80, "{}", paths.len());
    let mut wrong = Vec::new();
    for (path, item) in paths {
        let url = concrete(path);
        for verb in VERBS {
            let operation = &item[verb.to_ascii_lowercase()];
            let status = onyx
                .with_key(verb, &url, ONYX_KEY)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16();
            let documented_405 = operation["responses"]["405"].is_object();
            match (operation.is_object(), status == 405) {
                (false, false) => wrong.push(format!("{verb} {path}: answers {status}, not in the document")),
                (true, true) if !documented_405 => {
                    wrong.push(format!("{verb} {path}: documented, router says 405"))
                }
                _ => {}
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}
