//! Telegram and Discord end to end against fake platform servers: a user's
//! message reaches the agent through bindings, the answer comes back split at
//! the platform's limit, the chat keeps its session across messages and
//! restarts, `/new` and `/status` work, strangers are refused without the
//! model seeing them, dropped connections are recovered, and scheduled tasks
//! deliver into chats.

use std::time::Duration;

use crate::harness::*;
use onyx_test_fakes::discord::FakeDiscord;
use onyx_test_fakes::telegram::FakeTelegram;
use serde_json::{Value, json};

const TG_TOKEN: &str = "123456:fake-telegram-token";
const DISCORD_TOKEN: &str = "fake-discord-token";

fn config(fakes: &Fakes, plugins: Value) -> String {
    TestConfig::new(fakes)
        .merge(json!({
            "agents": {
                "defaults": { "model": "openai/fake-echo", "permissionMode": "allow-all" },
                "list": [ { "id": "main", "default": true, "name": "Onyx" }, { "id": "helper", "name": "Helper" } ],
            },
            "bindings": [
                { "agentId": "helper", "match": { "channel": "telegram", "peer": { "kind": "user", "id": "222" } } },
            ],
            "plugins": plugins,
        }))
        .build()
}

async fn eventually<T>(what: &str, check: impl AsyncFnMut() -> Option<T>) -> T {
    wait_until(secs(20), what, check).await
}

/// The plugin's `/health` entry.
async fn plugin_health(onyx: &Onyx, name: &str) -> Value {
    dependency(&onyx.health().await, name)
}

async fn wait_until_up(onyx: &Onyx, name: &str) -> Value {
    let last = plugin_health(onyx, name).await;
    eventually(&format!("{name} up (at first: {last})"), async || {
        let entry = plugin_health(onyx, name).await;
        (entry["status"] == "up").then_some(entry)
    })
    .await
}

/// Waits until `messages()` (a chat's, on the fake platform) holds `text`.
async fn until_said(what: &str, text: &str, messages: impl Fn() -> Vec<String>) {
    eventually(what, async || messages().iter().any(|m| m == text).then_some(())).await
}

/// Schedules `prompt` to run once in a second, its result delivered to `deliver_to`.
async fn deliver_soon(onyx: &Onyx, prompt: &str, deliver_to: &str) {
    let task =
        json!({"prompt": prompt, "schedule_type": "once", "schedule_value": "+1s", "deliver_to": deliver_to});
    let (status, body) = reply(onyx.post("/v1/tasks").json(&task)).await;
    assert_eq!(status, 201, "{body}");
}

fn chat_requests(fakes: &Fakes) -> usize {
    fakes
        .openai
        .state
        .requests()
        .iter()
        .filter(|r| r["messages"].is_array())
        .count()
}

/// Paragraphs that add up to more than `chars` characters.
fn long_text(chars: usize) -> String {
    let paragraph = "All work and no play makes a very long reply indeed. ".repeat(8);
    let mut text = String::new();
    let mut i = 0;
    while text.len() < chars {
        text.push_str(&format!("{i}: {}\n\n", paragraph.trim()));
        i += 1;
    }
    text.trim().to_string()
}

#[tokio::test]
async fn telegram_conversations_round_trip() {
    let fakes = Fakes::start().await;
    let telegram = FakeTelegram::start(TG_TOKEN).await.unwrap();
    let plugins = json!({ "enabled": ["telegram"], "telegram": {
        "token": "${TG_TOKEN}", "apiUrl": telegram.url(), "allowFrom": ["111", 222], "pollTimeoutSeconds": 1,
    } });
    let config = config(&fakes, plugins);
    let env = [("TG_TOKEN", TG_TOKEN)];
    let onyx = Onyx::start(Some(&config), &env).await;
    let health = wait_until_up(&onyx, "telegram").await;
    assert!(
        health["detail"].as_str().unwrap().contains("@onyx_test_bot"),
        "{health}"
    );

    // A message in, the agent's answer out, typing shown while it worked.
    telegram.user_says(111, 111, "Ann", "hello there");
    eventually("the first answer", async || {
        (telegram.messages_to(111).len() == 1).then_some(())
    })
    .await;
    assert_eq!(telegram.messages_to(111), vec!["echo: hello there"]);
    let typing = telegram
        .sent()
        .iter()
        .position(|(m, b)| m == "sendChatAction" && b["chat_id"] == 111 && b["action"] == "typing");
    let answer = telegram.sent().iter().position(|(m, _)| m == "sendMessage");
    assert!(
        typing.is_some() && typing < answer,
        "typing before the answer: {:?}",
        telegram.sent()
    );

    // The chat is one session that goes on.
    telegram.user_says(111, 111, "Ann", "and again");
    eventually("the second answer", async || {
        (telegram.messages_to(111).len() == 2).then_some(())
    })
    .await;
    let sessions = onyx.get_json("/v1/sessions?agent=main").await;
    let session = &sessions["data"][0];
    assert_eq!(sessions["data"].as_array().unwrap().len(), 1, "{sessions}");
    assert_eq!(session["source"], "telegram");
    assert_eq!(session["message_count"], 4, "{session}");
    let session_id = session["id"].as_str().unwrap().to_string();
    let transcript = onyx.get_json(&format!("/v1/sessions/{session_id}")).await;
    assert!(
        transcript["messages"].to_string().contains("and again"),
        "{transcript}"
    );

    // A long answer is split at paragraphs, within Telegram's 4096.
    let long = long_text(6000);
    telegram.user_says(111, 111, "Ann", &long);
    eventually("the split answer", async || {
        (telegram.messages_to(111).len() >= 4).then_some(())
    })
    .await;
    let parts: Vec<String> = telegram.messages_to(111)[2..].to_vec();
    assert_eq!(parts.len(), 2, "{parts:?}");
    assert!(parts.iter().all(|p| p.chars().count() <= 4096));
    assert_eq!(parts.join("\n\n"), format!("echo: {long}"));

    // /status and /new; the next message goes to a fresh session.
    telegram.user_says(111, 111, "Ann", "/status");
    eventually("status", async || {
        (telegram.messages_to(111).len() == 5).then_some(())
    })
    .await;
    let status = telegram.messages_to(111)[4].clone();
    assert!(
        status.contains("Agent: Onyx (main)")
            && status.contains("openai/fake-echo")
            && status.contains(&session_id),
        "{status}"
    );
    telegram.user_says(111, 111, "Ann", "/new");
    telegram.user_says(111, 111, "Ann", "fresh start");
    eventually("after /new", async || {
        (telegram.messages_to(111).len() == 7).then_some(())
    })
    .await;
    assert!(telegram.messages_to(111)[5].starts_with("Started a new conversation"));
    let sessions = onyx.get_json("/v1/sessions?agent=main").await;
    assert_eq!(sessions["data"].as_array().unwrap().len(), 2, "{sessions}");
    let newest = sessions["data"][0]["id"].as_str().unwrap().to_string();
    assert_ne!(newest, session_id);

    // Bindings: user 222 talks to the helper agent.
    telegram.user_says(222, 222, "Bob", "who are you");
    eventually("helper's answer", async || {
        (telegram.messages_to(222).len() == 1).then_some(())
    })
    .await;
    let helper = onyx.get_json("/v1/sessions?agent=helper").await;
    assert_eq!(helper["data"][0]["source"], "telegram", "{helper}");

    // A stranger is refused politely, and the model never sees it.
    let before = chat_requests(&fakes);
    telegram.user_says(333, 333, "Eve", "let me in");
    eventually("the refusal", async || {
        (telegram.messages_to(333).len() == 1).then_some(())
    })
    .await;
    let refusal = &telegram.messages_to(333)[0];
    assert!(
        refusal.contains("allowlist") && refusal.contains("333"),
        "{refusal}"
    );
    assert_eq!(chat_requests(&fakes), before);

    // The poll connection fails: the plugin restarts and carries on.
    telegram.fail_polls(2);
    eventually("a restart", async || {
        let entry = plugin_health(&onyx, "telegram").await;
        entry["detail"]
            .as_str()
            .unwrap()
            .contains("1 restarts")
            .then_some(())
    })
    .await;
    wait_until_up(&onyx, "telegram").await;
    telegram.user_says(111, 111, "Ann", "still there?");
    until_said("an answer after reconnecting", "echo: still there?", || {
        telegram.messages_to(111)
    })
    .await;

    // After a restart of Onyx the chat continues in the same session.
    let (dir, _) = onyx.stop().await;
    let onyx = Onyx::start_in(dir, Some(&config), &env).await;
    wait_until_up(&onyx, "telegram").await;
    telegram.user_says(111, 111, "Ann", "after the restart");
    until_said("an answer after the restart", "echo: after the restart", || {
        telegram.messages_to(111)
    })
    .await;
    let sessions = onyx.get_json("/v1/sessions?agent=main").await;
    assert_eq!(sessions["data"][0]["id"], newest.as_str(), "{sessions}");
    assert_eq!(sessions["data"].as_array().unwrap().len(), 2);

    // A scheduled task delivers its result into the chat.
    deliver_soon(&onyx, "daily digest", "telegram:111").await;
    until_said("the delivered digest", "echo: daily digest", || {
        telegram.messages_to(111)
    })
    .await;
}

#[tokio::test]
async fn discord_direct_messages_and_mentions_round_trip() {
    let fakes = Fakes::start().await;
    let discord = FakeDiscord::start(DISCORD_TOKEN).await.unwrap();
    let plugins = json!({ "enabled": ["discord"], "discord": {
        "apiUrl": discord.api_url(), "gatewayUrl": discord.gateway_url(), "allowFrom": ["42"],
    } });
    let config = config(&fakes, plugins);
    let onyx = Onyx::start(Some(&config), &[("DISCORD_BOT_TOKEN", DISCORD_TOKEN)]).await;
    wait_until_up(&onyx, "discord").await;

    // A direct message.
    discord.user_says(None, "500", "42", "hi there", false);
    eventually("the DM answer", async || {
        (discord.contents_in("500").len() == 1).then_some(())
    })
    .await;
    assert_eq!(discord.contents_in("500"), vec!["echo: hi there"]);
    assert!(discord.typing().contains(&"500".to_string()));

    // In a server channel only mentions are answered, as a reply.
    discord.user_says(Some("700"), "701", "42", "just chatting", false);
    discord.user_says(Some("700"), "701", "42", "what's up", true);
    eventually("the mention answer", async || {
        (!discord.contents_in("701").is_empty()).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(discord.contents_in("701"), vec!["echo: user42: what's up"]);
    let (_, body) = discord.posted().into_iter().find(|(c, _)| c == "701").unwrap();
    assert!(
        body["message_reference"]["message_id"].is_string(),
        "a reply: {body}"
    );

    // Split at Discord's 2000 characters.
    let long = long_text(4500);
    discord.user_says(None, "500", "42", &long, false);
    eventually("the split answer", async || {
        (discord.contents_in("500").len() >= 4).then_some(())
    })
    .await;
    let parts = discord.contents_in("500")[1..].to_vec();
    assert!(parts.iter().all(|p| p.chars().count() <= 2000), "{parts:?}");
    assert_eq!(parts.join("\n\n"), format!("echo: {long}"));

    // Strangers are refused.
    let before = chat_requests(&fakes);
    discord.user_says(None, "501", "43", "hello?", false);
    eventually("the refusal", async || {
        (discord.contents_in("501").len() == 1).then_some(())
    })
    .await;
    assert!(discord.contents_in("501")[0].contains("allowlist"));
    assert_eq!(chat_requests(&fakes), before);

    // The bot keeps the connection alive with heartbeats the gateway acknowledges.
    eventually("a heartbeat", async || (discord.heartbeats() > 0).then_some(())).await;

    // The gateway connection drops: the plugin reconnects (resuming) and answers again.
    let (identifies, resumes) = discord.connections();
    discord.drop_connection();
    eventually("a reconnect", async || {
        let (i, r) = discord.connections();
        (i + r > identifies + resumes).then_some(())
    })
    .await;
    discord.user_says(None, "500", "42", "back again", false);
    until_said("an answer after reconnecting", "echo: back again", || {
        discord.contents_in("500")
    })
    .await;

    // A scheduled task delivers into a channel.
    deliver_soon(&onyx, "weekly report", "discord:500").await;
    until_said("the delivered report", "echo: weekly report", || {
        discord.contents_in("500")
    })
    .await;
    let sessions = onyx.get_json("/v1/sessions?agent=main").await;
    assert!(
        sessions["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["source"] == "discord"),
        "{sessions}"
    );
}

#[tokio::test]
async fn misconfigured_plugins_stop_startup_with_a_clear_message() {
    let fakes = Fakes::start().await;
    let no_token = config(
        &fakes,
        json!({ "enabled": ["telegram"], "telegram": { "allowFrom": ["1"] } }),
    );
    let (code, stderr) = Onyx::try_start(Some(&no_token), &[])
        .await
        .err()
        .expect("started without a token");
    assert_ne!(code, Some(0));
    assert!(stderr.contains("TELEGRAM_BOT_TOKEN"), "{stderr}");
    let unknown = config(&fakes, json!({ "enabled": ["irc"] }));
    let (_, stderr) = Onyx::try_start(Some(&unknown), &[])
        .await
        .err()
        .expect("started an unknown plugin");
    assert!(stderr.contains("no plugin \"irc\""), "{stderr}");
}

#[tokio::test]
async fn stop_in_a_chat_cancels_the_answer_under_way() {
    let fakes = Fakes::start().await;
    let telegram = FakeTelegram::start(TG_TOKEN).await.unwrap();
    let config = TestConfig::new(&fakes)
        .merge(json!({
            "agents": {
                "defaults": { "model": "openai/fake-slow", "permissionMode": "allow-all" },
                "list": [ { "id": "main", "default": true, "name": "Onyx" } ],
            },
            "plugins": { "enabled": ["telegram"], "telegram": {
                "token": TG_TOKEN, "apiUrl": telegram.url(), "allowFrom": ["111"], "pollTimeoutSeconds": 1,
            } },
        }))
        .build();
    let onyx = Onyx::start(Some(&config), &[]).await;
    wait_until_up(&onyx, "telegram").await;

    telegram.user_says(111, 111, "Ann", "tell me a long story");
    let run = eventually("the run starts", async || {
        let runs = onyx.get_json("/v1/runs?status=running").await;
        ids(&runs).into_iter().next()
    })
    .await;
    telegram.user_says(111, 111, "Ann", "/stop");
    until_said("the stop is confirmed", "Stopped.", || telegram.messages_to(111)).await;
    let record = eventually("the run is cancelled", async || {
        let record = onyx.get_json(&format!("/v1/runs/{run}")).await;
        (record["status"] == "cancelled").then_some(record)
    })
    .await;
    assert_eq!(record["source"], "telegram");
    // The slow answer (three seconds) never arrives; the turn is kept, marked aborted.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(telegram.messages_to(111), vec!["Stopped."]);
    let session = onyx
        .get_json(&format!("/v1/sessions/{}", record["session"].as_str().unwrap()))
        .await;
    assert_eq!(session["messages"][1]["aborted"], true, "{session}");

    telegram.user_says(111, 111, "Ann", "/stop");
    until_said("nothing to stop", "Nothing is running.", || {
        telegram.messages_to(111)
    })
    .await;
}
