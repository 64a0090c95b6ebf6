//! `ask` mode where the user is: in a Telegram or Discord chat an agent's
//! own-memory and task tools run without a prompt, and a dangerous call posts
//! Approve/Deny buttons only an allowlisted user can press (a timeout
//! denies; the chat keeps its order). A scheduled task in `ask` mode waits on
//! the Approvals page, announced in its `deliver_to` chat. `tools.allow` /
//! `tools.deny` take groups and refuse unknown names at startup.

use onyx_test_fakes::discord::FakeDiscord;
use onyx_test_fakes::telegram::FakeTelegram;
use serde_json::{Value, json};

use crate::harness::*;

const TG_TOKEN: &str = "123456:fake-telegram-token";
const DISCORD_TOKEN: &str = "fake-discord-token";
const OWNER: i64 = 111;
const STRANGER: i64 = 999;
const REFUSAL: &str = "Sorry, only my owner can answer this.";

/// The default permission mode (`ask`), the scripted fake model, and a short approval timeout.
fn config(fakes: &Fakes, plugins: Value) -> String {
    TestConfig::new(fakes)
        .merge(json!({
            "agents": {
                "defaults": { "model": "openai/fake-script" },
                "list": [ { "id": "main", "default": true, "name": "Onyx" } ],
            },
            "tools": { "approvalTimeoutSeconds": 10 },
            "plugins": plugins,
        }))
        .build()
}

async fn telegram_onyx(fakes: &Fakes, telegram: &FakeTelegram) -> Onyx {
    let plugins = json!({ "enabled": ["telegram"], "telegram": {
        "token": TG_TOKEN, "apiUrl": telegram.url(), "allowFrom": [OWNER.to_string()], "pollTimeoutSeconds": 1,
    } });
    let onyx = Onyx::start(Some(&config(fakes, plugins)), &[]).await;
    wait_until(secs(20), "telegram up", async || {
        (dependency(&onyx.health().await, "telegram")["status"] == "up").then_some(())
    })
    .await;
    onyx
}

async fn eventually<T>(what: &str, check: impl AsyncFnMut() -> Option<T>) -> T {
    wait_until(secs(30), what, check).await
}

/// The `n`th (0-based) keyboard the bot sent to the owner's chat: its text and button data.
async fn nth_keyboard(telegram: &FakeTelegram, n: usize) -> (String, Vec<String>) {
    eventually(&format!("approval keyboard {n}"), async || {
        telegram.keyboards_to(OWNER).get(n).cloned()
    })
    .await
}

/// Waits for a message in the owner's chat that starts with `prefix`.
async fn said(telegram: &FakeTelegram, prefix: &str) -> String {
    eventually(&format!("a message starting {prefix:?}"), async || {
        telegram
            .messages_to(OWNER)
            .into_iter()
            .find(|m| m.starts_with(prefix))
    })
    .await
}

/// The owner asks the agent to run a shell command.
fn owner_runs(telegram: &FakeTelegram, command: &str) {
    let script = format!(r#"script: exec {{"command": "{command}"}} ; answer"#);
    telegram.user_says(OWNER, OWNER, "Ann", &script);
}

async fn pending_approvals(onyx: &Onyx) -> Vec<Value> {
    onyx.get_json("/v1/approvals").await["data"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn telegram_chats_write_memory_without_asking_and_approve_dangerous_calls_with_buttons() {
    let fakes = Fakes::start().await;
    let telegram = FakeTelegram::start(TG_TOKEN).await.unwrap();
    let onyx = telegram_onyx(&fakes, &telegram).await;

    // "Remember that…" and "remind me every morning" just work in `ask` mode.
    telegram.user_says(
        OWNER,
        OWNER,
        "Ann",
        r#"script: memory_write {"path": "MEMORY.md", "mode": "append", "content": "The dog is called Rex."} & schedule_task {"prompt": "say good morning", "schedule_type": "cron", "schedule_value": "0 9 * * *"} ; answer"#,
    );
    let done = said(&telegram, "script done:").await;
    assert!(!done.contains("error"), "{done}");
    let tasks = onyx.get_json("/v1/tasks").await;
    assert!(
        pluck(&tasks["data"], "/prompt").contains(&"say good morning".to_string()),
        "{tasks}"
    );
    let memory = onyx.get_json("/v1/memory/files/main/MEMORY.md").await;
    assert!(memory.to_string().contains("The dog is called Rex."), "{memory}");
    assert!(telegram.keyboards_to(OWNER).is_empty());

    // A dangerous call asks in the chat; a stranger's press is refused.
    owner_runs(&telegram, "echo approved-run");
    let (text, data) = nth_keyboard(&telegram, 0).await;
    assert!(text.contains("exec") && text.contains("approved-run"), "{text}");
    assert_eq!(data.len(), 2, "{data:?}");
    assert!(
        data[0].starts_with("approve:") && data[1].starts_with("deny:"),
        "{data:?}"
    );
    telegram.user_says(OWNER, OWNER, "Ann", "hello after");
    telegram.press(OWNER, STRANGER, "Eve", &data[0]);
    eventually("the stranger refused", async || {
        telegram
            .callback_answers()
            .contains(&REFUSAL.to_string())
            .then_some(())
    })
    .await;
    assert!(
        telegram.keyboards_removed().is_empty(),
        "a refused press leaves the buttons"
    );
    let pending = pending_approvals(&onyx).await;
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0]["tool"], "exec");
    assert_eq!(format!("approve:{}", pending[0]["id"].as_str().unwrap()), data[0]);

    // The owner approves: the command runs, then the queued message is answered.
    telegram.press(OWNER, OWNER, "Ann", &data[0]);
    let answer = said(&telegram, "script done: exit code").await;
    assert!(answer.contains("approved-run"), "{answer}");
    said(&telegram, "echo: hello after").await;
    let messages = telegram.messages_to(OWNER);
    let position = |prefix: &str| messages.iter().position(|m| m.starts_with(prefix));
    assert!(
        position("script done: exit code") < position("echo: hello after"),
        "{messages:?}"
    );
    assert!(telegram.callback_answers().contains(&"Approved.".to_string()));
    assert!(pending_approvals(&onyx).await.is_empty());
    // Decided, the request's buttons are taken off its message.
    eventually("the decided request's keyboard removed", async || {
        let removed = telegram.keyboards_removed();
        (removed.len() == 1 && removed[0].0 == OWNER).then_some(())
    })
    .await;

    // Deny.
    owner_runs(&telegram, "echo denied-run");
    let (_, data) = nth_keyboard(&telegram, 1).await;
    telegram.press(OWNER, OWNER, "Ann", &data[1]);
    let denied = said(&telegram, "script done: error: the user denied").await;
    assert!(denied.contains("exec"), "{denied}");
    assert!(telegram.callback_answers().contains(&"Denied.".to_string()));
    // A second press on an answered request decides nothing.
    telegram.press(OWNER, OWNER, "Ann", &data[0]);
    eventually("the late press answered", async || {
        telegram
            .callback_answers()
            .iter()
            .any(|a| a.contains("already answered"))
            .then_some(())
    })
    .await;

    // Nobody answers: the timeout denies.
    owner_runs(&telegram, "echo never-run");
    nth_keyboard(&telegram, 2).await;
    let timed_out = said(&telegram, "script done: error: nobody approved").await;
    assert!(!timed_out.contains("never-run\n"), "{timed_out}");
}

#[tokio::test]
async fn discord_buttons_approve_and_deny_and_refuse_strangers() {
    let fakes = Fakes::start().await;
    let discord = FakeDiscord::start(DISCORD_TOKEN).await.unwrap();
    let plugins = json!({ "enabled": ["discord"], "discord": {
        "token": DISCORD_TOKEN, "apiUrl": discord.api_url(), "gatewayUrl": discord.gateway_url(), "allowFrom": ["42"],
    } });
    let onyx = Onyx::start(Some(&config(&fakes, plugins)), &[]).await;
    eventually("discord up", async || {
        (dependency(&onyx.health().await, "discord")["status"] == "up").then_some(())
    })
    .await;
    let answer_starting = async |prefix: &str| {
        eventually(&format!("a Discord message starting {prefix:?}"), async || {
            discord
                .contents_in("500")
                .into_iter()
                .find(|m| m.starts_with(prefix))
        })
        .await
    };

    discord.user_says(
        None,
        "500",
        "42",
        r#"script: exec {"command": "echo from-discord"} ; answer"#,
        false,
    );
    let (text, ids) = eventually("discord buttons", async || {
        discord.buttons_in("500").first().cloned()
    })
    .await;
    assert!(text.contains("from-discord"), "{text}");
    discord.press("500", "66", &ids[0]);
    eventually("the stranger refused", async || {
        discord
            .interaction_replies()
            .contains(&REFUSAL.to_string())
            .then_some(())
    })
    .await;
    assert_eq!(pending_approvals(&onyx).await.len(), 1);
    let refusal = &discord.interaction_responses()[0];
    assert_eq!(
        (refusal["type"].as_u64(), refusal["data"]["flags"].as_u64()),
        (Some(4), Some(64)),
        "{refusal}"
    );
    discord.press("500", "42", &ids[0]);
    let answer = answer_starting("script done: exit code").await;
    assert!(answer.contains("from-discord"), "{answer}");
    // Decided: the request's message says so and its buttons are gone.
    let decided = |word: &str| {
        discord.interaction_responses().iter().any(|r| {
            r["type"] == 7
                && r["data"]["components"] == json!([])
                && r["data"]["content"].as_str().unwrap_or_default().ends_with(word)
        })
    };
    assert!(decided("Approved."), "{:?}", discord.interaction_responses());

    discord.user_says(
        None,
        "500",
        "42",
        r#"script: exec {"command": "echo no"} ; answer"#,
        false,
    );
    let (_, ids) = eventually("the second buttons", async || {
        discord.buttons_in("500").get(1).cloned()
    })
    .await;
    discord.press("500", "42", &ids[1]);
    answer_starting("script done: error: the user denied").await;
    assert!(decided("Denied."), "{:?}", discord.interaction_responses());
}

#[tokio::test]
async fn an_ask_mode_task_waits_on_the_approvals_page_announced_in_its_chat() {
    let fakes = Fakes::start().await;
    let telegram = FakeTelegram::start(TG_TOKEN).await.unwrap();
    let onyx = telegram_onyx(&fakes, &telegram).await;
    let task = json!({
        "prompt": r#"script: exec {"command": "echo from-the-task"} ; answer"#,
        "schedule_type": "once", "schedule_value": "+1s", "deliver_to": format!("telegram:{OWNER}"),
    });
    let (status, created) = reply(onyx.post("/v1/tasks").json(&task)).await;
    assert_eq!(status, 201, "{created}");

    let pending = eventually("the task's approval request", async || {
        pending_approvals(&onyx).await.into_iter().next()
    })
    .await;
    assert_eq!(pending["tool"], "exec");
    let (text, data) = nth_keyboard(&telegram, 0).await;
    assert!(text.contains("from-the-task"), "{text}");
    assert_eq!(data[0], format!("approve:{}", pending["id"].as_str().unwrap()));

    let id = pending["id"].as_str().unwrap();
    let (status, body) = reply(
        onyx.post(&format!("/v1/approvals/{id}"))
            .json(&json!({"decision": "approve"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let delivered = said(&telegram, "script done: exit code").await;
    assert!(delivered.contains("from-the-task"), "{delivered}");
    // The result is delivered just before the run is recorded as finished.
    let runs_path = format!("/v1/tasks/{}/runs", created["id"].as_str().unwrap());
    eventually("the task's run is recorded as succeeded", async || {
        let runs = onyx.get_json(&runs_path).await;
        (runs["data"][0]["status"] == "succeeded").then_some(())
    })
    .await;
}

#[tokio::test]
async fn tool_groups_expand_and_unknown_tool_names_stop_startup() {
    for (patch, expected) in [
        (
            json!({"tools": {"deny": ["exce"]}}),
            r#"tools.deny[0]: there is no tool or group named "exce""#,
        ),
        (
            json!({"agents": {"list": [{"id": "main", "tools": {"allow": ["memory_get", "group:files"]}}]}}),
            r#"agents.list[0].tools.allow[1]: there is no tool or group named "group:files""#,
        ),
    ] {
        let config = TestConfig::empty().merge(patch).build();
        let (code, stderr) = match Onyx::try_start(Some(&config), &[]).await {
            Ok(_) => panic!("{config} started"),
            Err(failure) => failure,
        };
        assert_eq!(code, Some(1), "{config}");
        assert!(stderr.contains(expected), "expected {expected:?} in {stderr}");
    }

    let fakes = Fakes::start().await;
    let config = TestConfig::new(&fakes)
        .merge(json!({
            "agents": {
                "defaults": { "model": "openai/fake-script" },
                "list": [
                    { "id": "main", "default": true, "tools": { "deny": ["group:fs", "exec"] } },
                    { "id": "notes", "tools": { "allow": ["group:memory", "group:messaging"] } },
                ],
            },
            "tools": { "deny": ["group:web"] },
        }))
        .build();
    let onyx = Onyx::start(Some(&config), &[]).await;
    let mut offered = Vec::new();
    for agent in ["main", "notes"] {
        let (status, body) = onyx
            .chat(json!({"model": format!("onyx:{agent}"), "messages": [{"role": "user", "content": "hi"}]}))
            .await;
        assert_eq!(status, 200, "{body}");
        let requests = fakes.openai.state.requests();
        let last = requests
            .iter()
            .rev()
            .find(|r| r["model"] == "fake-script")
            .unwrap();
        let mut names = pluck(&last["tools"], "/function/name");
        names.sort();
        offered.push(names);
    }
    for gone in ["fs_read", "fs_write", "fs_edit", "fs_list", "exec", "web_fetch"] {
        assert!(
            !offered[0].contains(&gone.to_string()),
            "{gone}: {:?}",
            offered[0]
        );
    }
    for kept in ["memory_write", "schedule_task", "send_message", "sessions_list"] {
        assert!(offered[0].contains(&kept.to_string()), "{kept}: {:?}", offered[0]);
    }
    assert_eq!(
        offered[1],
        ["memory_get", "memory_search", "memory_write", "send_message"]
    );
}
