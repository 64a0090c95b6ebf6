//! Prompt caching and the agent's time, end to end: consecutive agent turns
//! send the fake Anthropic a byte-identical, `cache_control`-marked system
//! prefix and get cached tokens back (in the response, the session and
//! `/metrics`); OpenAI-compatible turns carry one `prompt_cache_key` per
//! session (and report the fake's cached tokens); and "today" (the daily log a turn writes, the prompt's date) is
//! the day in the agent's timezone, not UTC's.

use crate::harness::*;
use serde_json::{Value, json};

fn config(fakes: &Fakes, local_zone: &str) -> String {
    TestConfig::new(fakes)
        .merge(json!({
            // The same fake, as a server that refuses fields it does not know.
            "providers": { "strict": {
                "type": "openai", "baseUrl": format!("{}/v1", fakes.openai.url()), "apiKey": "${FAKE_KEY}",
                "promptCacheKey": false,
            } },
            "agents": {
                "defaults": { "permissionMode": "allow-all", "timezone": "UTC" },
                "list": [
                    { "id": "main", "default": true, "model": "anthropic/fake-echo" },
                    { "id": "gpt", "model": "openai/fake-echo" },
                    { "id": "llama", "model": "ollama/fake-echo" },
                    { "id": "strict", "model": "strict/fake-echo" },
                    { "id": "local", "model": "openai/fake-echo", "timezone": local_zone },
                ],
            },
        }))
        .build()
}

async fn start(local_zone: &str) -> (Fakes, Onyx) {
    let fakes = Fakes::start().await;
    let onyx = Onyx::start(Some(&config(&fakes, local_zone)), &[]).await;
    (fakes, onyx)
}

/// One user message to `agent`, in `session` when given; the body and the session id.
async fn turn(onyx: &Onyx, agent: &str, session: Option<&str>, text: &str) -> (Value, String) {
    let mut request = onyx
        .post("/v1/chat/completions")
        .json(&json!({"model": format!("onyx:{agent}"), "messages": [{"role": "user", "content": text}]}));
    if let Some(session) = session {
        request = request.header("x-onyx-session-id", session);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200);
    let session = session_id(&response);
    (response.json().await.unwrap(), session)
}

/// The chat requests a fake received (not embeddings).
fn chat_requests(fake: &onyx_test_fakes::FakeServer) -> Vec<Value> {
    fake.state
        .requests()
        .into_iter()
        .filter(|r| r.get("messages").is_some())
        .collect()
}

#[tokio::test]
async fn consecutive_anthropic_turns_share_a_cached_system_prefix() {
    let (fakes, onyx) = start("UTC").await;
    let (first, session) = turn(&onyx, "main", None, "plan my week").await;
    let (second, _) = turn(&onyx, "main", Some(&session), "and the weekend?").await;
    assert_eq!(
        second["choices"][0]["message"]["content"],
        "echo: and the weekend?"
    );

    let sent = chat_requests(&fakes.anthropic);
    assert_eq!(sent.len(), 2, "{sent:?}");
    let stable: Vec<&Value> = sent.iter().map(|r| &r["system"][0]).collect();
    assert_eq!(stable[0]["cache_control"], json!({"type": "ephemeral"}));
    assert!(stable[0]["text"].as_str().unwrap().contains("## SOUL.md"));
    assert_eq!(
        stable[0].to_string(),
        stable[1].to_string(),
        "the stable system block is byte-identical across turns"
    );
    // The date and the daily log travel after the history, in the newest user message.
    let last = sent[1]["messages"].as_array().unwrap().last().unwrap().clone();
    let text = last["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("<onyx-context>") && text.contains("Now: "),
        "{text}"
    );
    assert!(text.ends_with("and the weekend?"), "{text}");
    assert_eq!(last["content"][0]["cache_control"], json!({"type": "ephemeral"}));
    assert_eq!(
        sent[1]["messages"][0]["content"][0]["text"], "plan my week",
        "history is replayed without the old context, so it stays a cacheable prefix"
    );

    // The first turn wrote the cache, the second read the stable prefix from it.
    let details = |body: &Value| body["usage"]["prompt_tokens_details"].clone();
    assert_eq!(details(&first)["cached_tokens"], 0);
    assert!(
        details(&first)["cache_write_tokens"].as_u64().unwrap() > 100,
        "{first}"
    );
    let cached = details(&second)["cached_tokens"].as_u64().unwrap();
    assert!(cached > 100, "{second}");
    assert!(second["usage"]["prompt_tokens"].as_u64().unwrap() > cached);

    let meta = onyx.get_json(&format!("/v1/sessions/{session}")).await;
    assert_eq!(meta["cached_tokens"].as_u64(), Some(cached), "{meta}");
    assert!(meta["token_count"].as_u64().unwrap() > cached, "{meta}");
    let metrics = onyx.get("/metrics").send().await.unwrap().text().await.unwrap();
    let line = metrics
        .lines()
        .find(|l| l.starts_with("onyx_prompt_cached_tokens_total{"))
        .unwrap_or_else(|| panic!("no cached-token counter:\n{metrics}"));
    assert!(line.contains("provider=\"anthropic\""), "{line}");
    assert_eq!(line.rsplit(' ').next().unwrap().parse::<u64>().unwrap(), cached);
}

#[tokio::test]
async fn openai_compatible_turns_carry_one_prompt_cache_key_per_session() {
    let (fakes, onyx) = start("UTC").await;
    let (_, session) = turn(&onyx, "gpt", None, "hello").await;
    let (again, _) = turn(&onyx, "gpt", Some(&session), "hello again").await;
    // The fake caches by key and prefix, as OpenAI does: the system prompt and
    // the first user message come back as cached tokens.
    let cached = again["usage"]["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap();
    assert!(cached > 100, "{again}");
    let meta = onyx.get_json(&format!("/v1/sessions/{session}")).await;
    assert_eq!(meta["cached_tokens"].as_u64(), Some(cached), "{meta}");
    let (_, other) = turn(&onyx, "gpt", None, "a new chat").await;
    let sent = chat_requests(&fakes.openai);
    let keys: Vec<&str> = sent
        .iter()
        .map(|r| r["prompt_cache_key"].as_str().unwrap())
        .collect();
    assert_eq!(
        keys,
        [
            format!("onyx-{session}"),
            format!("onyx-{session}"),
            format!("onyx-{other}")
        ]
    );
    assert_eq!(
        sent[0]["messages"][0], sent[1]["messages"][0],
        "the system message is the same bytes on both turns"
    );
    assert_eq!(sent[1]["messages"][1]["content"], "hello");

    // Ollama's API has no such field: the translation leaves it out.
    turn(&onyx, "llama", None, "hi").await;
    let to_ollama = chat_requests(&fakes.ollama);
    assert_eq!(to_ollama.len(), 1);
    assert!(to_ollama[0].get("prompt_cache_key").is_none(), "{}", to_ollama[0]);

    // A provider with `promptCacheKey: false` never gets the field.
    let before = chat_requests(&fakes.openai).len();
    turn(&onyx, "strict", None, "hi").await;
    let sent = chat_requests(&fakes.openai);
    assert_eq!(sent.len(), before + 1);
    assert!(sent[before].get("prompt_cache_key").is_none(), "{}", sent[before]);
}

/// A zone whose date differs from UTC's right now: UTC+14 from 10:00 UTC on,
/// UTC-12 before 12:00 UTC, so one of them always does.
fn zone_off_utc_date() -> (&'static str, chrono_tz::Tz) {
    let now = chrono::Utc::now();
    ["Pacific/Kiritimati", "Etc/GMT+12"]
        .into_iter()
        .map(|name| (name, name.parse::<chrono_tz::Tz>().unwrap()))
        .find(|(_, tz)| onyx::clock::day_in(now, *tz) != onyx::clock::day(now))
        .unwrap()
}

#[tokio::test]
async fn today_is_the_day_in_the_agents_timezone() {
    let (name, zone) = zone_off_utc_date();
    let (fakes, onyx) = start(name).await;
    assert_eq!(onyx.get_json("/v1/agents/local").await["timezone"], name);
    assert_eq!(
        onyx.get_json("/v1/agents/gpt").await["timezone"],
        "UTC",
        "the default"
    );
    let before = chrono::Utc::now();
    turn(&onyx, "local", None, "what day is it?").await;
    let after = chrono::Utc::now();
    let local_days = [
        onyx::clock::day_in(before, zone),
        onyx::clock::day_in(after, zone),
    ];

    let prompt = chat_requests(&fakes.openai)[0]["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        local_days
            .iter()
            .any(|d| prompt.contains("Now: ") && prompt.contains(&format!(" {d} "))),
        "{prompt}"
    );
    assert!(prompt.contains(&format!("({name}, UTC")), "{prompt}");

    // The turn's line lands in the local day's log (written just after the answer).
    let log = wait_until(secs(10), "the daily log line", async || {
        for day in &local_days {
            let file = onyx
                .get(&format!("/v1/memory/files/local/memory/{day}.md"))
                .send()
                .await
                .unwrap();
            if file.status() == 200 {
                return Some(file.json::<Value>().await.unwrap());
            }
        }
        None
    })
    .await;
    assert!(
        log["content"].as_str().unwrap().contains("what day is it?"),
        "{log}"
    );
    for utc_day in [onyx::clock::day(before), onyx::clock::day(after)] {
        if local_days.contains(&utc_day) {
            continue;
        }
        let utc_log = onyx
            .get(&format!("/v1/memory/files/local/memory/{utc_day}.md"))
            .send()
            .await
            .unwrap();
        assert_eq!(
            utc_log.status(),
            404,
            "nothing is written under UTC's date {utc_day}"
        );
    }

    // A note through the API goes to the agent's day as well.
    let note = onyx
        .post("/v1/memory")
        .json(&json!({"agent": "local", "content": "bought milk"}))
        .send()
        .await
        .unwrap();
    assert_eq!(note.status(), 200);
    let path = note.json::<Value>().await.unwrap()["path"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        local_days.iter().any(|d| path == format!("memory/{d}.md")),
        "{path}"
    );
}
