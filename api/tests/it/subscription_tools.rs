//! Issue 41, point 1: an agent whose model is a subscription's CLI gets
//! Onyx's tools through Onyx's own `/mcp`, with a token made for its run.
//! The real Claude Code, Codex and Copilot CLIs (`tests/cli/node_modules`)
//! against the fake upstreams, whose `fake-memory-write` model calls
//! `memory_write`: the write lands in the agent's memory, the answer streams
//! back and the session records the call. A stand-in for Claude Code (the
//! provider's `command`) attacks with the token it is given: another agent,
//! other routes, a write in `safe` mode, the token after the run ended or
//! was cancelled; and reports where the token is visible.

use std::os::unix::fs::PermissionsExt;

use serde_json::{Value, json};

use crate::harness::*;

/// A vendor CLI installed by `npm ci` in `tests/cli`.
fn cli(program: &str) -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let path = root.join("tests/cli/node_modules/.bin").join(program);
    assert!(
        path.exists(),
        "{} is missing: run `npm ci` in tests/cli",
        path.display()
    );
    path.display().to_string()
}

#[tokio::test]
async fn each_cli_writes_the_agents_memory_through_onyx_mcp_and_the_answer_streams_back() {
    let fakes = Fakes::start().await;
    let openai = format!("{}/v1", fakes.openai.url());
    let anthropic = fakes.anthropic.url();
    let provider = |kind: &str, program: &str, url: &str| json!({"type": kind, "command": cli(program), "baseUrl": url, "apiKey": "${FAKE_KEY}", "maxRetries": 0});
    let config = TestConfig::new(&fakes)
        .merge(json!({ "providers": {
            "claude-subscription": provider("claude-subscription", "claude", &anthropic),
            "codex": provider("codex", "codex", &openai),
            "copilot": provider("copilot", "copilot", &openai),
        } }))
        .agent(json!({"id": "main", "default": true, "model": "openai/fake-echo"}))
        .agent(json!({"id": "claude", "model": "claude-subscription/fake-memory-write", "permissionMode": "ask"}))
        .agent(json!({"id": "codex", "model": "codex/fake-memory-write", "permissionMode": "ask"}))
        .agent(json!({"id": "copilot", "model": "copilot/fake-memory-write", "permissionMode": "ask"}))
        .build();
    let onyx = Onyx::start(Some(&config), &[]).await;
    for agent in ["claude", "codex", "copilot"] {
        let marker = format!("marker-{agent}-7f3a");
        let response = onyx
            .post("/v1/chat/completions")
            .json(&json!({"model": format!("onyx:{agent}"), "stream": true,
                "messages": [{"role": "user", "content": format!("Remember {marker}")}]}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{agent}");
        let session = session_id(&response);
        let text = streamed_text(&chunks(&sse_events(response).await));
        // `saved: <memory_write's result>`, as the fake model answers after the call.
        let path = text
            .split("wrote ")
            .nth(1)
            .and_then(|rest| rest.split(" (").next())
            .unwrap_or_else(|| panic!("{agent}: no write in the answer: {text}"));
        assert!(text.contains("saved: "), "{agent}: {text}");
        let (status, file) = reply(onyx.get(&format!("/v1/memory/files/{agent}/{path}"))).await;
        assert_eq!(status, 200, "{agent}: {file}");
        assert!(
            file.to_string().contains(&marker),
            "{agent}: the write did not land: {file}"
        );
        // The session holds the call and its result before the answer.
        let recorded = onyx.get_json(&format!("/v1/sessions/{session}")).await;
        let messages = recorded["messages"].as_array().unwrap();
        let call = messages
            .iter()
            .find(|m| m["tool_calls"][0]["function"]["name"] == "memory_write")
            .unwrap_or_else(|| panic!("{agent}: no tool call recorded: {recorded}"));
        let id = call["tool_calls"][0]["id"].as_str().unwrap();
        let result = messages
            .iter()
            .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
            .unwrap_or_else(|| panic!("{agent}: no tool result recorded: {recorded}"));
        assert!(
            result["content"].as_str().unwrap().starts_with("wrote memory/"),
            "{result}"
        );
        assert_eq!(messages.last().unwrap()["role"], "assistant");
    }
    // The per-run files (the system prompt, Claude Code's MCP config with the token) are gone.
    let prompts = onyx.dir.path().join("data/subscriptions/claude/prompts");
    wait_until(secs(10), "the run's files are removed", async || {
        (std::fs::read_dir(&prompts).map_or(0, |d| d.count()) == 0).then_some(())
    })
    .await;
}

/// Stands in for Claude Code: reads the run's MCP config and attacks with
/// its token (see the module docs), then answers its report as JSON in
/// Claude Code's stream-json. `ASK` in the prompt calls `fs_write` (which
/// waits for approval in `ask` mode); `HANG` leaves the token in
/// `leaked-token` in its config dir and never answers.
const STAND_IN: &str = r#"#!/usr/bin/env node
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
const args = process.argv.slice(2);
const after = (flag) => (args.indexOf(flag) >= 0 ? args[args.indexOf(flag) + 1] : null);
const lines = createInterface({ input: process.stdin });
const line = await new Promise((resolve) => lines.once('line', resolve));
const say = (value) => process.stdout.write(JSON.stringify(value) + '\n');
const report = { args };
const configPath = after('--mcp-config');
if (configPath) {
  const server = JSON.parse(readFileSync(configPath, 'utf8')).mcpServers.onyx;
  const auth = server.headers.Authorization;
  const token = auth.slice('Bearer '.length);
  const base = server.url.replace(/\/mcp$/, '');
  const rpc = async (method, params) => {
    const res = await fetch(server.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: auth },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    });
    return { status: res.status, body: await res.json().catch(() => null) };
  };
  report.token = token;
  report.configMode = (await import('node:fs')).statSync(configPath).mode & 0o777;
  if (line.includes('HANG')) {
    // Written whole, then renamed: the test never reads it half-written.
    const leaked = join(process.env.CLAUDE_CONFIG_DIR, 'leaked-token');
    writeFileSync(leaked + '.tmp', token);
    renameSync(leaked + '.tmp', leaked);
    setInterval(() => {}, 1000);
    await new Promise(() => {});
  }
  report.tools = (await rpc('tools/list', {})).body?.result?.tools?.map((t) => t.name);
  report.otherAgent = (await rpc('tools/call', { name: 'memory_get', arguments: { agent: 'other', path: 'MEMORY.md' } })).status;
  report.routes = {};
  for (const [method, path] of [
    ['GET', '/v1/sessions'], ['GET', '/v1/models'], ['POST', '/v1/chat/completions'], ['GET', '/v1/keys'],
    ['GET', '/v1/memory/files/other/MEMORY.md'], ['GET', '/v1/memory/files/main/MEMORY.md'], ['GET', '/v1/runs'],
  ]) {
    const res = await fetch(base + path, {
      method,
      headers: { authorization: auth, 'content-type': 'application/json' },
      body: method === 'POST' ? JSON.stringify({ model: 'onyx:other', messages: [{ role: 'user', content: 'hi' }] }) : undefined,
    });
    report.routes[`${method} ${path}`] = res.status;
  }
  report.write = (await rpc('tools/call', { name: 'fs_write', arguments: { path: 'notes.txt', content: 'from the CLI' } })).body?.result;
  report.envHasToken = Object.values(process.env).some((v) => v.includes(token));
  const system = readFileSync(after('--system-prompt-file'), 'utf8');
  report.promptHasToken = line.includes(token) || system.includes(token) || args.join(' ').includes(token);
}
const text = JSON.stringify(report);
say({ type: 'stream_event', event: { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } } });
say({ type: 'result', subtype: 'success', is_error: false, result: text, stop_reason: 'end_turn', usage: { input_tokens: 1, output_tokens: 1 } });
"#;

struct StandIn {
    onyx: Onyx,
    _install: tempfile::TempDir,
}

async fn with_stand_in() -> StandIn {
    let install = tempfile::tempdir().unwrap();
    std::fs::set_permissions(install.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let program = install.path().join("claude-stand-in.mjs");
    std::fs::write(&program, STAND_IN).unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let fakes = Fakes::start().await;
    let config = TestConfig::new(&fakes)
        .merge(json!({ "providers": { "standin": {
            "type": "claude-subscription", "command": program.display().to_string(), "maxRetries": 0,
        } } }))
        .agent(json!({"id": "main", "default": true, "model": "standin/any", "permissionMode": "ask"}))
        .agent(json!({"id": "reader", "model": "standin/any", "permissionMode": "safe"}))
        .agent(json!({"id": "other", "model": "openai/fake-echo"}))
        .build();
    StandIn {
        onyx: Onyx::start(Some(&config), &[]).await,
        _install: install,
    }
}

/// The stand-in's report for one turn of `agent`.
async fn report(onyx: &Onyx, agent: &str, text: &str) -> Value {
    let answer = onyx.agent_answer(agent, text).await;
    serde_json::from_str(&answer).unwrap_or_else(|_| panic!("not a report: {answer}"))
}

/// The strings of a JSON array.
fn strings(list: &Value) -> Vec<&str> {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|item| item.as_str().unwrap())
        .collect()
}

/// `main`'s answer to `text`, asked in a task of its own (the test goes on meanwhile).
fn in_background(onyx: &Onyx, text: &str) -> tokio::task::JoinHandle<reqwest::Result<Value>> {
    let request = onyx
        .post("/v1/chat/completions")
        .json(&json!({"model": "onyx:main", "messages": [{"role": "user", "content": text}]}));
    tokio::spawn(async move { request.send().await?.json::<Value>().await })
}

async fn tools_list(onyx: &Onyx, token: &str) -> (u16, Value) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    reply(onyx.with_key("POST", "/mcp", token).json(&body)).await
}

#[tokio::test]
async fn a_run_token_opens_only_its_agents_mcp_in_its_mode_and_dies_with_its_run() {
    let StandIn { onyx, _install } = with_stand_in().await;
    let seen = report(&onyx, "reader", "PROBE").await;
    let token = seen["token"]
        .as_str()
        .expect("the CLI got Onyx's /mcp")
        .to_string();
    assert!(token.starts_with("onyx_rt_"), "{seen}");
    assert_eq!(seen["configMode"], 0o600, "{seen}");
    // Claude Code's own tools off, only Onyx's server, only its tools.
    let args = strings(&seen["args"]);
    for flag in ["--strict-mcp-config", "--allowedTools", "mcp__onyx", "--tools"] {
        assert!(args.contains(&flag), "{flag}: {args:?}");
    }
    // A `safe` run's token lists read-only tools and cannot write.
    let tools = strings(&seen["tools"]);
    assert!(
        tools.contains(&"memory_search") && tools.contains(&"fs_read"),
        "{tools:?}"
    );
    for write in [
        "memory_write",
        "fs_write",
        "exec",
        "schedule_task",
        "send_message",
    ] {
        assert!(!tools.contains(&write), "{write} offered in safe mode: {tools:?}");
    }
    assert_eq!(seen["write"]["isError"], true, "{seen}");
    assert!(
        seen["write"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("not available"),
        "{seen}"
    );
    // Another agent: 403; every other route: 403.
    assert_eq!(seen["otherAgent"], 403, "{seen}");
    let routes = seen["routes"].as_object().unwrap();
    assert_eq!(routes.len(), 7, "{seen}");
    for (route, status) in routes {
        assert_eq!(status, 403, "{route} with a run token: {seen}");
    }
    // Never in the prompt, the command line or the CLI's environment.
    assert_eq!(seen["promptHasToken"], false, "{seen}");
    assert_eq!(seen["envHasToken"], false, "{seen}");
    // The run is over: the token is dead, and was never one of the user's keys.
    let (status, body) = tools_list(&onyx, &token).await;
    assert_eq!(status, 401, "{body}");
    let keys = onyx.get_json("/v1/keys").await;
    assert!(!keys.to_string().contains("onyx_rt_"), "{keys}");
    // A made-up run token is refused the same way, on /mcp and elsewhere.
    let (status, _) = tools_list(&onyx, "onyx_rt_0000000000000000000000000000000000").await;
    assert_eq!(status, 401);
}

#[tokio::test]
async fn an_ask_mode_run_waits_for_the_owners_approval_of_a_cli_call() {
    let StandIn { onyx, _install } = with_stand_in().await;
    let asking = in_background(&onyx, "ASK");
    let approval = wait_until(secs(30), "the CLI's fs_write waits for approval", async || {
        let pending = onyx.get_json("/v1/approvals").await;
        pending["data"].as_array()?.first().cloned()
    })
    .await;
    assert_eq!(approval["tool"], "fs_write", "{approval}");
    assert_eq!(approval["agent"], "main", "{approval}");
    let id = approval["id"].as_str().unwrap();
    let (status, body) = reply(
        onyx.post(&format!("/v1/approvals/{id}"))
            .json(&json!({"decision": "approve"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let answer = asking.await.unwrap().unwrap();
    let seen: Value =
        serde_json::from_str(answer["choices"][0]["message"]["content"].as_str().unwrap()).unwrap();
    assert_eq!(seen["write"]["isError"], false, "{seen}");
    let tools = strings(&seen["tools"]);
    assert!(
        tools.contains(&"fs_write") && tools.contains(&"memory_write"),
        "{tools:?}"
    );
    let events = answer["x_onyx"]["events"].to_string();
    assert!(events.contains("approval_required"), "{events}");
}

#[tokio::test]
async fn a_cancelled_runs_token_stops_working() {
    let StandIn { onyx, _install } = with_stand_in().await;
    let hanging = in_background(&onyx, "HANG");
    let leaked = onyx.dir.path().join("data/subscriptions/claude/leaked-token");
    let token = wait_until(secs(30), "the CLI has its token", async || {
        std::fs::read_to_string(&leaked).ok()
    })
    .await;
    let (status, body) = tools_list(&onyx, &token).await;
    assert_eq!(status, 200, "alive while its run is: {body}");
    assert!(body["result"]["tools"].as_array().unwrap().len() > 8, "{body}");
    let run = wait_until(secs(10), "the run is listed", async || {
        let runs = onyx.get_json("/v1/runs?agent=main&status=running").await;
        runs["data"].as_array()?.first()?["id"].as_str().map(String::from)
    })
    .await;
    let (status, body) = reply(onyx.post(&format!("/v1/runs/{run}/cancel"))).await;
    assert!(status < 300, "{body}");
    wait_until(secs(10), "the token dies with its run", async || {
        (tools_list(&onyx, &token).await.0 == 401).then_some(())
    })
    .await;
    hanging.abort();
}

/// A `kill -9` of the gateway runs none of its clean-up (no `KillOnDrop`):
/// the CLI it started dies with it all the same, by the parent-death signal
/// of the sandbox helper and of the namespace's init.
#[tokio::test]
async fn a_killed_gateway_takes_its_cli_with_it() {
    let StandIn { onyx, _install } = with_stand_in().await;
    let program = _install.path().join("claude-stand-in.mjs").display().to_string();
    let hanging = in_background(&onyx, "HANG");
    let leaked = onyx.dir.path().join("data/subscriptions/claude/leaked-token");
    wait_until(secs(30), "the CLI runs", async || {
        std::fs::read_to_string(&leaked).ok()
    })
    .await;
    assert!(
        !running_with(&program).is_empty(),
        "the stand-in is not seen running"
    );
    let _dir = onyx.crash().await;
    assert_all_end(secs(10), "the killed gateway", || running_with(&program)).await;
    hanging.abort();
}
