//! How much of an agent's prompt a provider's prompt cache can reuse: the real
//! gateway (in-process, embedded storage, the shipped workspace templates)
//! runs a 20-turn chat in one session against the recording fake upstreams,
//! once through the Anthropic protocol and once through the OpenAI-compatible
//! one. For each turn after the first it reports the share of the prompt's
//! bytes (tools, system, messages, in the order a provider caches them,
//! `cache_control` marks left out) that are an identical prefix of the previous
//! turn's prompt, and the share of prompt tokens the fakes' cache simulations
//! read from their caches.
//!
//! `cargo run --release -p onyx-bench --bin prompt-cache-bench [TURNS]`

use std::sync::Arc;

use onyx_bench::machine;
use onyx_test_fakes::{DEFAULT_KEY, FakeServer};
use serde_json::{Value, json};

const KEY: &str = "onyx_sk_bench_key_0123456789";

#[tokio::main]
async fn main() -> Result<(), String> {
    let turns: usize = std::env::args().nth(1).and_then(|n| n.parse().ok()).unwrap_or(20);
    println!("machine: {}", machine());
    let anthropic = onyx_test_fakes::anthropic::start(Some(DEFAULT_KEY.into()), 0)
        .await
        .map_err(|e| e.to_string())?;
    let openai = onyx_test_fakes::openai::start(Some(DEFAULT_KEY.into()), 0)
        .await
        .map_err(|e| e.to_string())?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let url = serve(&anthropic, &openai, dir.path()).await?;
    for (agent, fake, protocol) in [("claude", &anthropic, "anthropic"), ("gpt", &openai, "openai")] {
        let usages = chat(&url, agent, turns).await?;
        let prompts: Vec<String> = fake
            .state
            .requests()
            .iter()
            .filter(|r| r.get("messages").is_some())
            .map(|r| prompt_text(r, protocol))
            .collect();
        report(protocol, &prompts, &usages);
    }
    Ok(())
}

/// Starts the gateway on 127.0.0.1 with both fakes as providers; its URL.
async fn serve(anthropic: &FakeServer, openai: &FakeServer, dir: &std::path::Path) -> Result<String, String> {
    let config = json!({
        "gateway": { "auth": { "apiKeys": [KEY] } },
        "providers": {
            "anthropic": { "type": "anthropic", "baseUrl": anthropic.url(), "apiKey": DEFAULT_KEY },
            "openai": { "type": "openai", "baseUrl": format!("{}/v1", openai.url()), "apiKey": DEFAULT_KEY },
        },
        "storage": { "dataDir": dir, "surrealdb": { "url": "mem://" } },
        "agents": {
            "defaults": { "permissionMode": "allow-all", "timezone": "Europe/Berlin" },
            "list": [
                { "id": "claude", "default": true, "model": "anthropic/fake-echo" },
                { "id": "gpt", "model": "openai/fake-echo" },
            ],
        },
    });
    let env = |_: &str| None;
    let config = onyx::config::parse(Some(&config.to_string()), None, &env).map_err(|e| e.to_string())?;
    let app = onyx::app::App::new(&config).await.map_err(|e| e.to_string())?;
    let router = onyx::http::router(Arc::new(app));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(format!("http://{addr}"))
}

/// `turns` user messages to one agent in one session; each answer's usage.
async fn chat(url: &str, agent: &str, turns: usize) -> Result<Vec<Value>, String> {
    let client = reqwest::Client::new();
    let topics = [
        "the garden",
        "a trip to Lisbon",
        "my tax return",
        "the team offsite",
        "a birthday dinner",
    ];
    let mut session: Option<String> = None;
    let mut usages = Vec::new();
    for turn in 0..turns {
        let text = format!(
            "Turn {turn}: help me plan {} for next week. Keep it practical: three steps, what to buy, and what can wait.",
            topics[turn % topics.len()]
        );
        let mut request = client
            .post(format!("{url}/v1/chat/completions"))
            .bearer_auth(KEY)
            .json(
                &json!({"model": format!("onyx:{agent}"), "messages": [{"role": "user", "content": text}]}),
            );
        if let Some(id) = &session {
            request = request.header("x-onyx-session-id", id);
        }
        let response = request.send().await.map_err(|e| e.to_string())?;
        if let Some(id) = response.headers().get("x-onyx-session-id") {
            session = id.to_str().ok().map(String::from);
        }
        let body: Value = response.json().await.map_err(|e| e.to_string())?;
        if body["choices"][0]["message"]["content"].as_str().is_none() {
            return Err(format!("turn {turn}: no answer: {body}"));
        }
        usages.push(body["usage"].clone());
    }
    Ok(usages)
}

/// A request's prompt in the order a provider caches it, as text.
fn prompt_text(request: &Value, protocol: &str) -> String {
    let mut out = String::new();
    for tool in request["tools"].as_array().into_iter().flatten() {
        out.push_str(&tool.to_string());
    }
    if protocol == "anthropic" {
        for block in blocks(&request["system"]) {
            out.push_str(&block.to_string());
        }
    }
    for message in request["messages"].as_array().into_iter().flatten() {
        out.push_str(message["role"].as_str().unwrap_or_default());
        for block in blocks(&message["content"]) {
            out.push_str(&block.to_string());
        }
        if let Some(calls) = message.get("tool_calls") {
            out.push_str(&calls.to_string());
        }
    }
    out
}

/// Content as blocks, without `cache_control` marks (they move; caches ignore them).
fn blocks(content: &Value) -> Vec<Value> {
    let mut blocks = match content {
        Value::String(text) => vec![json!({"type": "text", "text": text})],
        Value::Array(blocks) => blocks.clone(),
        _ => Vec::new(),
    };
    for block in &mut blocks {
        if let Some(object) = block.as_object_mut() {
            object.remove("cache_control");
        }
    }
    blocks
}

fn common_prefix(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
}

fn report(protocol: &str, prompts: &[String], usages: &[Value]) {
    let shares: Vec<f64> = prompts
        .windows(2)
        .map(|w| common_prefix(&w[0], &w[1]) as f64 / w[1].len().max(1) as f64)
        .collect();
    let mean = shares.iter().sum::<f64>() / shares.len().max(1) as f64;
    let min = shares.iter().copied().fold(f64::INFINITY, f64::min);
    let (shared, total) = prompts.windows(2).fold((0, 0), |(s, t), w| {
        (s + common_prefix(&w[0], &w[1]), t + w[1].len())
    });
    println!(
        "{protocol}: {} turns, prompt {} → {} bytes; identical prefix vs the previous turn: mean {:.1}%, min {:.1}%, all bytes {:.1}%",
        prompts.len(),
        prompts.first().map_or(0, String::len),
        prompts.last().map_or(0, String::len),
        mean * 100.0,
        min * 100.0,
        shared as f64 * 100.0 / total.max(1) as f64,
    );
    let cached: u64 = usages[1..]
        .iter()
        .filter_map(|u| u["prompt_tokens_details"]["cached_tokens"].as_u64())
        .sum();
    let prompt: u64 = usages[1..]
        .iter()
        .filter_map(|u| u["prompt_tokens"].as_u64())
        .sum();
    if cached > 0 {
        println!(
            "{protocol}: prompt tokens read from the (simulated) cache after turn 1: {cached} of {prompt} ({:.1}%)",
            cached as f64 * 100.0 / prompt.max(1) as f64
        );
    }
}
