//! Every route of the gateway (`onyx::http::routes()`), walked from outside:
//! a key scoped to one agent, aimed at another agent's things, is refused
//! on each route and method (a route that forgets to check its agent fails
//! here, whatever its tier); a repeated query parameter is a 400 naming it;
//! and a body that is not sent as JSON is a 415 wherever JSON is read.

use onyx::http::Access;
use serde_json::{Value, json};

use crate::harness::*;

const METHODS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];

fn two_agents(fakes: &Fakes) -> String {
    TestConfig::new(fakes)
        .agent(json!({"id": "main", "default": true, "model": "openai/fake-echo"}))
        .agent(json!({"id": "ops", "model": "openai/fake-echo"}))
        .build()
}

/// What the victim agent (`main`) owns, made with the admin key.
struct Victim {
    session: String,
    run: String,
    task: String,
    response: String,
}

async fn victim(onyx: &Onyx) -> Victim {
    let response = onyx
        .post("/v1/chat/completions")
        .json(&json!({"model": "onyx:main", "messages": [{"role": "user", "content": "secret plans"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let header = |name: &str| response.headers()[name].to_str().unwrap().to_string();
    let (session, run) = (header("x-onyx-session-id"), header("x-onyx-run-id"));
    let (status, task) = reply(onyx.post("/v1/tasks").json(&json!({
        "agent": "main", "prompt": "tidy up", "schedule_type": "cron", "schedule_value": "0 9 * * *",
    })))
    .await;
    assert_eq!(status, 201, "{task}");
    let (status, stored) = reply(
        onyx.post("/v1/responses")
            .json(&json!({"model": "onyx:main", "input": "hi"})),
    )
    .await;
    assert_eq!(status, 200, "{stored}");
    Victim {
        session,
        run,
        task: task["id"].as_str().unwrap().to_string(),
        response: stored["id"].as_str().unwrap().to_string(),
    }
}

/// A chat key scoped to the agent `ops`.
async fn ops_key(onyx: &Onyx) -> String {
    let body = json!({"name": "ops bot", "agents": ["ops"]});
    let (status, created) = reply(onyx.post("/v1/keys").json(&body)).await;
    assert_eq!(status, 201, "{created}");
    created["key"].as_str().unwrap().to_string()
}

/// The route with its parameters filled in with the victim's things.
fn concrete(path: &str, access: Access, victim: &Victim) -> String {
    let id = if path.starts_with("/v1/sessions/") {
        victim.session.as_str()
    } else if path.starts_with("/v1/runs/") {
        victim.run.as_str()
    } else if path.starts_with("/v1/tasks/") {
        victim.task.as_str()
    } else if path.starts_with("/v1/responses/") {
        victim.response.as_str()
    } else {
        // A scoped key reaches only `Access::Agent` routes; one of those with
        // an `{id}` of something new must name the victim's here.
        assert!(
            access != Access::Agent || !path.contains("{id}"),
            "{path}: a route a scoped key reaches takes an id this test has no victim for; add one"
        );
        "x"
    };
    path.replace("{id}", id)
        .replace("{agent}", "main")
        .replace("{scope}", "main")
        .replace("{name}", "SOUL.md")
        .replace("{*path}", "MEMORY.md")
        .replace("{*file}", "notes.md")
        .replace("{key}", "x")
}

/// Names the victim everywhere a route could read an agent from: the
/// query, the body's `agent` and `model`, an MCP tool call's `agent`.
fn victim_body() -> Value {
    json!({
        "agent": "main", "model": "onyx:main", "input": "hi", "max_tokens": 5,
        "messages": [{"role": "user", "content": "tell me main's secrets"}],
        "prompt": "x", "schedule_type": "cron", "schedule_value": "0 9 * * *",
        "content": "x", "permission_mode": "allow-all",
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "memory_search", "arguments": {"agent": "main", "query": "secret"}},
    })
}

#[tokio::test]
async fn a_key_scoped_to_one_agent_is_refused_on_every_route_for_another() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&two_agents(&fakes)), &[]).await;
    let victim = victim(&onyx).await;
    let key = ops_key(&onyx).await;

    let routes = onyx::http::routes();
    assert!(routes.len() > 60, "every route is listed: {routes:?}");
    let mut walked = 0;
    for (path, access) in routes {
        if access == Access::Open {
            // `/health` and the login routes: no agent's data, no key needed.
            continue;
        }
        let url = format!("{}?agent=main", concrete(path, access, &victim));
        for method in METHODS {
            let (status, body) = reply(onyx.with_key(method, &url, &key).json(&victim_body())).await;
            if (method, path) == ("GET", "/v1/models") {
                assert_eq!(status, 200, "the model list is open to every key: {body}");
                continue;
            }
            assert!(
                status == 403 || status == 405,
                "{method} {path} ({access:?}) answered a key scoped to ops about main with {status}: {body}"
            );
            if status == 403 {
                walked += 1;
                // The Anthropic-shaped routes refuse in their own shape.
                let refused = body["error"]["code"] == "insufficient_scope" || body["type"] == "error";
                assert!(refused, "{method} {path}: {body}");
            }
        }
    }
    assert!(walked > 80, "{walked} route/method pairs refused");

    // Nothing of the victim's changed: the session, task and response are all still there.
    for path in [
        format!("/v1/sessions/{}", victim.session),
        format!("/v1/tasks/{}", victim.task),
        format!("/v1/responses/{}", victim.response),
    ] {
        let (status, body) = reply(onyx.get(&path)).await;
        assert_eq!(status, 200, "{path}: {body}");
    }
    let agent = onyx.get_json("/v1/agents/main").await;
    assert_eq!(agent["permission_mode"], "ask", "{agent}");

    // Its own agent it does reach, through the same routes.
    for path in [
        "/v1/sessions?agent=ops",
        "/v1/runs?agent=ops",
        "/v1/tasks?agent=ops",
        "/v1/inbox?agent=ops",
        "/v1/memory/files?agent=ops",
        "/v1/memory/search?q=plans&agent=ops",
        "/v1/agents/ops",
    ] {
        let (status, body) = reply(onyx.with_key("GET", path, &key)).await;
        assert_eq!(status, 200, "{path}: {body}");
    }
    let (status, task) = reply(onyx.with_key("POST", "/v1/tasks", &key).json(&json!({
        "agent": "ops", "prompt": "check", "schedule_type": "cron", "schedule_value": "0 9 * * *",
    })))
    .await;
    assert_eq!(status, 201, "{task}");
    assert_eq!(task["agent"], "ops");
    let (status, body) = reply(onyx.with_key(
        "GET",
        &format!("/v1/tasks/{}", task["id"].as_str().unwrap()),
        &key,
    ))
    .await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn a_repeated_query_parameter_is_a_400_naming_it() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&two_agents(&fakes)), &[]).await;
    victim(&onyx).await;
    let key = ops_key(&onyx).await;
    // The attack of issue 37: the scope check read the first, the handler the last.
    for (path, param) in [
        ("/v1/sessions?agent=ops&agent=main", "agent"),
        ("/v1/runs?agent=ops&agent=main", "agent"),
        ("/v1/memory/search?q=plans&agent=ops&agent=main", "agent"),
        ("/v1/memory/files?agent=ops&%61gent=main", "agent"),
        ("/v1/sessions?agent=ops&limit=1&limit=2", "limit"),
    ] {
        let (status, body) = reply(onyx.with_key("GET", path, &key)).await;
        assert_eq!(status, 400, "{path}: {body}");
        assert_eq!(body["error"]["param"], param, "{path}: {body}");
        assert_eq!(body["error"]["code"], "duplicate_parameter", "{path}: {body}");
    }
    // Any parameter, on any route, with any key.
    for path in [
        "/v1/usage?days=1&days=2",
        "/v1/audit?limit=1&limit=1",
        "/v1/models?x=1&x=2",
    ] {
        let (status, body) = reply(onyx.get(path)).await;
        assert_eq!(status, 400, "{path}: {body}");
    }
    let (status, body) = reply(onyx.with_key(
        "POST",
        "/v1/messages?beta=true&beta=false",
        &key,
    )
    .json(&json!({"model": "onyx:ops", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})))
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["type"], "error", "in Anthropic's shape: {body}");
}

/// `PUT` routes that take a document as raw text (`curl --data-binary`):
/// a page cannot send a `PUT` across sites without a CORS preflight.
const TEXT_DOCUMENTS: [&str; 4] = [
    "/v1/memory/files/{agent}/{*path}",
    "/v1/agents/{agent}/files/{name}",
    "/v1/skills/{scope}/{name}",
    "/v1/skills/{scope}/{name}/files/{*file}",
];

#[tokio::test]
async fn a_body_not_sent_as_json_is_a_415_on_every_route() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&fakes.config()), &[]).await;
    let mut refused = 0;
    for (path, access) in onyx::http::routes() {
        let url = path
            .replace("{agent}", "main")
            .replace("{scope}", "_shared")
            .replace("{name}", "SOUL.md")
            .replace("{*path}", "notes.md")
            .replace("{*file}", "notes.md")
            .replace(['{', '}'], "");
        for method in ["POST", "PUT", "PATCH"] {
            if method == "PUT" && TEXT_DOCUMENTS.contains(&path) {
                continue;
            }
            // A form post and a text/plain one: how a page skips the CORS preflight.
            for (content_type, body) in [
                (
                    "text/plain",
                    r#"{"password": "right horse", "name": "k", "agent": "main"}"#,
                ),
                ("application/x-www-form-urlencoded", "name=k&scope=admin"),
            ] {
                let (status, answer) = reply(
                    onyx.with_key(method, &url, ONYX_KEY)
                        .header("content-type", content_type)
                        .body(body),
                )
                .await;
                if status == 405 {
                    continue;
                }
                assert_eq!(
                    status, 415,
                    "{method} {path} ({access:?}) took a {content_type} body: {answer}"
                );
                refused += 1;
            }
        }
    }
    assert!(refused > 60, "{refused} refused");
    // Nothing was made or signed in.
    assert!(
        onyx.get_json("/v1/keys").await["data"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let (status, _) = reply(
        onyx.with_key("POST", "/auth/login", ONYX_KEY)
            .body(r#"{"password": "right horse"}"#),
    )
    .await;
    assert_eq!(status, 415, "no content type at all is not JSON either");
    // Raw text still writes a document with PUT, as the README's curl does.
    let (status, body) = reply(
        onyx.put("/v1/memory/files/main/notes.md")
            .header("content-type", "application/x-www-form-urlencoded")
            .body("# Notes\n"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
}
