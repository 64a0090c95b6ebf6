//! Budgets and rate limits: reservations hold across replicas and concurrent
//! requests, refusals are 429 with `Retry-After` and a code, and a scheduled
//! run whose agent is over budget is skipped.

use std::time::Duration;

use crate::harness::services::Service;
use crate::harness::*;
use serde_json::{Value, json};

/// $1,000 per million output tokens: max_tokens 10 reserves $0.01.
fn priced(fakes: &Fakes) -> TestConfig {
    TestConfig::new(fakes).merge(json!({
        "usage": { "prices": { "openai/fake-echo": { "input": 0, "output": 1000 } } },
    }))
}

fn ask(max_tokens: u32) -> Value {
    json!({"model": "openai/fake-echo", "max_tokens": max_tokens,
           "messages": [{"role": "user", "content": "hi"}]})
}

#[tokio::test]
async fn fifty_concurrent_requests_on_two_replicas_never_overspend() {
    let fakes = Fakes::start().await;
    let (s3, surreal) = (Service::s3().await, Service::surreal().await);
    let config = priced(&fakes).s3(&s3).surreal(&surreal).build();
    let (a, b) = (
        Onyx::start(Some(&config), &[]).await,
        Onyx::start(Some(&config), &[]).await,
    );
    // Ten reservations of $0.01 fit; an eleventh does not.
    let budget = 0.105;
    let (status, created) = reply(a.post("/v1/keys").json(&json!({
        "name": "capped", "limits": { "dailyUsd": budget },
    })))
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["limits"]["dailyUsd"], budget);
    let key = created["key"].as_str().unwrap().to_string();
    let id = created["id"].as_str().unwrap().to_string();

    let requests = (0..50).map(|i| {
        let replica = if i % 2 == 0 { &a } else { &b };
        reply(
            replica
                .with_key("POST", "/v1/chat/completions", &key)
                .json(&ask(10)),
        )
    });
    let results = futures::future::join_all(requests).await;
    let ok = results.iter().filter(|(s, _)| *s == 200).count();
    let refused: Vec<&Value> = results
        .iter()
        .filter(|(s, _)| *s == 429)
        .map(|(_, b)| b)
        .collect();
    assert_eq!(ok + refused.len(), 50, "{results:?}");
    assert!(ok >= 10, "ten reservations always fit: {ok}");
    assert!(!refused.is_empty(), "fifty cannot all fit");
    assert_eq!(refused[0]["error"]["code"], "budget_exceeded");
    assert_eq!(refused[0]["error"]["type"], "rate_limit_error");
    assert!(
        refused[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("dailyUsd"),
        "{}",
        refused[0]
    );

    // What was spent (recorded by both replicas) is within the budget.
    let report = wait_until(secs(10), "every answer recorded", async || {
        let report = a.get_json("/v1/usage?group_by=key").await;
        let rows = report["data"].as_array()?.clone();
        let mine = rows.into_iter().find(|r| r["group"] == id.as_str())?;
        (mine["requests"] == ok as u64).then_some(mine)
    })
    .await;
    let spent = report["cost_usd"].as_f64().unwrap();
    assert!(spent > 0.0 && spent <= budget, "spent {spent} of {budget}");
    let limits = wait_until(secs(10), "reservations settled", async || {
        let limits = b.get_json("/v1/usage/limits").await;
        let mine = limits["data"]
            .as_array()?
            .iter()
            .find(|l| l["scope"] == format!("key:{id}"))?
            .clone();
        ((mine["spent"]["today_usd"].as_f64()? - spent).abs() < 1e-9).then_some(mine)
    })
    .await;
    assert_eq!(limits["limits"]["dailyUsd"], budget);
    assert_eq!(limits["name"], "capped");
}

#[tokio::test]
async fn a_request_limit_answers_429_with_retry_after() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&priced(&fakes).build()), &[]).await;
    let (status, created) = reply(onyx.post("/v1/keys").json(&json!({
        "name": "slow", "scope": "chat", "limits": { "rpm": 2 },
    })))
    .await;
    assert_eq!(status, 201, "{created}");
    let key = created["key"].as_str().unwrap().to_string();
    let send = || {
        onyx.with_key("POST", "/v1/chat/completions", &key)
            .json(&ask(10))
            .send()
    };
    // Two fit in a minute, unless the minute turns between them: then two more do.
    let mut refused = None;
    for _ in 0..5 {
        let response = send().await.unwrap();
        if response.status() == 429 {
            refused = Some(response);
            break;
        }
        assert_eq!(response.status(), 200);
    }
    let refused = refused.expect("the third request in a minute is refused");
    let retry_after: u64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limit_exceeded");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("rpm 2"),
        "{body}"
    );

    // Keys without limits are not limited.
    for _ in 0..4 {
        assert_eq!(onyx.chat(ask(10)).await.0, 200);
    }
    // Bad limits are refused, naming the field.
    let (status, body) = reply(onyx.post("/v1/keys").json(&json!({
        "name": "bad", "limits": { "rpm": 0 },
    })))
    .await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["param"], "limits.rpm");
    let (status, _) = reply(onyx.post("/v1/keys").json(&json!({
        "name": "bad", "limits": { "perDay": 1 },
    })))
    .await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn a_scheduled_run_of_an_agent_over_budget_is_skipped() {
    let fakes = Fakes::start().await;
    let config = priced(&fakes)
        .merge(json!({
            "agents": {
                "defaults": { "model": "openai/fake-echo", "permissionMode": "allow-all" },
                // One call's reservation ($0.01) is more than the agent may spend.
                "list": [{ "id": "main", "default": true, "maxTokens": 10, "limits": { "dailyUsd": 0.005 } }],
            },
        }))
        .build();
    let onyx = Onyx::start(Some(&config), &[]).await;
    let before = fakes.openai.state.requests().len();
    let (status, task) = reply(onyx.post("/v1/tasks").json(&json!({
        "prompt": "spend", "schedule_type": "once", "schedule_value": "+1s",
    })))
    .await;
    assert_eq!(status, 201, "{task}");
    let id = task["id"].as_str().unwrap();
    let run = wait_until(secs(30), "the task's run", async || {
        let runs = onyx.get_json(&format!("/v1/tasks/{id}/runs")).await;
        let run = runs["data"].as_array()?.first()?.clone();
        (run["status"] != "running").then_some(run)
    })
    .await;
    assert_eq!(run["status"], "skipped", "{run:#}");
    assert!(run["result"].as_str().unwrap().contains("dailyUsd"), "{run:#}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(fakes.openai.state.requests().len(), before, "nothing was sent");
    // Chatting with the agent directly is refused the same way.
    let (status, body) = onyx
        .chat(json!({"model": "onyx:main", "messages": [{"role": "user", "content": "hi"}]}))
        .await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["code"], "budget_exceeded");
}
