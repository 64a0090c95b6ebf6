//! Usage records and cost: JSON and streamed answers record the same usage
//! (the stream's usage chunk is asked for, recorded, and not shown to a
//! client that did not ask), cost follows the price table, unknown prices
//! stay unknown, and `/v1/usage` groups and validates.

use crate::harness::*;
use serde_json::{Value, json};

/// USD per million tokens for the fake OpenAI model; the others stay unpriced.
const INPUT: f64 = 1000.0;
const OUTPUT: f64 = 2000.0;

fn config(fakes: &Fakes) -> String {
    TestConfig::new(fakes)
        .merge(json!({
            "usage": { "prices": { "openai/fake-echo": { "input": INPUT, "output": OUTPUT } } },
            "agents": {
                "defaults": { "model": "openai/fake-echo", "permissionMode": "allow-all" },
                "list": [{ "id": "main", "default": true }],
            },
        }))
        .build()
}

fn cost(usage: &Value) -> f64 {
    let prompt = usage["prompt_tokens"].as_f64().unwrap();
    let completion = usage["completion_tokens"].as_f64().unwrap();
    (prompt * INPUT + completion * OUTPUT) / 1_000_000.0
}

async fn usage_report(onyx: &Onyx, query: &str) -> Value {
    let (status, body) = reply(onyx.get(&format!("/v1/usage?{query}"))).await;
    assert_eq!(status, 200, "{body}");
    body
}

fn row<'a>(report: &'a Value, group: &str) -> &'a Value {
    report["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["group"] == group)
        .unwrap_or_else(|| panic!("no group {group} in {report:#}"))
}

#[tokio::test]
async fn streamed_and_json_answers_record_the_same_usage_at_the_tables_price() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes)), &[]).await;
    let messages = json!([{"role": "user", "content": "count these five words please"}]);
    let mut expected = std::collections::BTreeMap::new();
    for model in ["openai/fake-echo", "anthropic/fake-echo", "ollama/fake-echo"] {
        let response = onyx
            .post("/v1/chat/completions")
            .json(&json!({"model": model, "messages": messages}))
            .send()
            .await
            .unwrap();
        let header = response
            .headers()
            .get("x-onyx-cost")
            .map(|v| v.to_str().unwrap().to_string());
        let body: Value = response.json().await.unwrap();
        let usage = body["usage"].clone();
        assert!(usage["prompt_tokens"].as_u64().unwrap() > 0, "{body}");
        if model == "openai/fake-echo" {
            let header: f64 = header
                .expect("a priced answer carries x-onyx-cost")
                .parse()
                .unwrap();
            assert!((header - cost(&usage)).abs() < 1e-6, "{header} vs {usage}");
        } else {
            assert_eq!(header, None, "an unknown price has no cost header");
        }
        // The same request streamed, without asking for usage.
        let streamed = onyx
            .post("/v1/chat/completions")
            .json(&json!({"model": model, "messages": messages, "stream": true}))
            .send()
            .await
            .unwrap();
        assert_eq!(streamed.status(), 200);
        let chunks = chunks(&sse_events(streamed).await);
        assert!(!chunks.is_empty());
        for chunk in &chunks {
            assert!(
                chunk.get("usage").is_none_or(Value::is_null),
                "{model}: a client that did not ask got usage: {chunk}"
            );
            assert!(
                !chunk["choices"].as_array().unwrap().is_empty(),
                "{model}: a client that did not ask got the usage-only chunk: {chunk}"
            );
        }
        expected.insert(model, usage);
    }
    // The upstream was asked for the stream's usage anyway.
    let streamed_requests: Vec<Value> = fakes
        .openai
        .state
        .requests()
        .into_iter()
        .filter(|r| r["stream"] == true)
        .collect();
    assert_eq!(streamed_requests[0]["stream_options"]["include_usage"], true);

    let report = wait_until(secs(10), "six usage records", async || {
        let report = usage_report(&onyx, "group_by=model").await;
        (report["total"]["requests"] == 6).then_some(report)
    })
    .await;
    for (model, usage) in &expected {
        let row = row(&report, model);
        assert_eq!(row["requests"], 2, "{row}");
        for field in ["prompt_tokens", "completion_tokens"] {
            assert_eq!(
                row[field].as_u64().unwrap(),
                2 * usage[field].as_u64().unwrap(),
                "{model} {field}: the stream recorded what the JSON answer did: {row}"
            );
        }
    }
    let priced = row(&report, "openai/fake-echo");
    let want = 2.0 * cost(&expected["openai/fake-echo"]);
    assert!(
        (priced["cost_usd"].as_f64().unwrap() - want).abs() < 1e-9,
        "{priced}"
    );
    assert_eq!(priced["unpriced_requests"], 0);
    let unpriced = row(&report, "anthropic/fake-echo");
    assert!(
        unpriced["cost_usd"].is_null(),
        "unknown stays unknown, not 0: {unpriced}"
    );
    assert_eq!(unpriced["unpriced_requests"], 2);
    assert_eq!(report["total"]["unpriced_requests"], 4);

    let metrics = onyx.get("/metrics").send().await.unwrap().text().await.unwrap();
    let line = metrics
        .lines()
        .find(|l| l.starts_with("onyx_cost_usd_total{") && l.contains("fake-echo") && l.contains("openai"))
        .unwrap_or_else(|| panic!("no cost counter in {metrics}"));
    let counted: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!((counted - want).abs() < 1e-9, "{line}");
}

#[tokio::test]
async fn usage_groups_by_every_dimension_and_refuses_bad_parameters() {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes)), &[]).await;
    let chat_key = onyx.create_key("reporting", "chat").await;
    let (secret, key_id) = (
        chat_key["key"].as_str().unwrap().to_string(),
        chat_key["id"].as_str().unwrap().to_string(),
    );
    let ask = json!({"model": "openai/fake-echo", "messages": [{"role": "user", "content": "hi"}]});
    let (status, _) = reply(onyx.with_key("POST", "/v1/chat/completions", &secret).json(&ask)).await;
    assert_eq!(status, 200);
    let with_session = onyx
        .post("/v1/chat/completions")
        .header("x-onyx-session-id", "new")
        .json(&ask)
        .send()
        .await
        .unwrap();
    let session = session_id(&with_session);
    onyx.agent_answer("main", "hello agent").await;

    let report = wait_until(secs(10), "three usage records", async || {
        let report = usage_report(&onyx, "group_by=key").await;
        (report["total"]["requests"] == 3).then_some(report)
    })
    .await;
    assert_eq!(row(&report, &key_id)["requests"], 1);
    let config_key = report["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["group"].as_str().unwrap().starts_with("config:"))
        .unwrap();
    assert_eq!(config_key["requests"], 2, "{report:#}");
    assert!(!report.to_string().contains(ONYX_KEY), "never the secret");

    let by_agent = usage_report(&onyx, "group_by=agent").await;
    assert_eq!(row(&by_agent, "main")["requests"], 1);
    let by_provider = usage_report(&onyx, "group_by=provider").await;
    assert_eq!(row(&by_provider, "openai")["requests"], 3);
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    let by_day = usage_report(&onyx, &format!("group_by=day&from={today}&to={today}")).await;
    assert_eq!(row(&by_day, &today)["requests"], 3);
    let by_session = usage_report(&onyx, "group_by=session").await;
    assert_eq!(row(&by_session, &session)["requests"], 1);
    let by_model = usage_report(&onyx, "group_by=model").await;
    assert!(row(&by_model, "openai/fake-echo")["cost_usd"].as_f64().unwrap() > 0.0);
    // A range before any call is empty, and nothing was spent in it ($0, not unknown).
    let past = usage_report(&onyx, "from=2020-01-01&to=2020-01-31T00:00:00Z").await;
    assert_eq!(past["total"]["requests"], 0);
    assert_eq!(past["total"]["cost_usd"], 0.0, "{past}");
    assert_eq!(past["total"]["unpriced_requests"], 0);

    // A chat-scope key sees its own usage only.
    let (status, own) = reply(onyx.with_key("GET", "/v1/usage?group_by=key", &secret)).await;
    assert_eq!(status, 200, "{own}");
    assert_eq!(own["data"].as_array().unwrap().len(), 1, "{own:#}");
    assert_eq!(own["data"][0]["group"], key_id.as_str());

    for (query, param) in [
        ("group_by=week", "group_by"),
        ("from=yesterday", "from"),
        ("to=2026-13-01", "to"),
        ("from=2026-02-01&to=2026-01-01", "from"),
    ] {
        let (status, body) = reply(onyx.get(&format!("/v1/usage?{query}"))).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["error"]["param"], param, "{query}: {body}");
        assert_eq!(body["error"]["type"], "invalid_request_error");
    }
}
