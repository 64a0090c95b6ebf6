//! One Copilot session per request: the `session.create` parameters (the
//! shape `@github/copilot-sdk` 1.0.14 sends from `CopilotClient.createSession`
//! in `dist/client.js`) and how the session's events (`dist/generated/
//! session-events.d.ts`) become [`Step`]s. Every built-in tool is off
//! (`availableTools: []`), and so are skills, config and instruction
//! discovery, memory, the session store and infinite sessions: the CLI only
//! answers, Onyx's agent loop runs the tools. In an agent run the session's
//! one MCP server is Onyx's `/mcp` with the run token (sent over stdin), and
//! its tools (`mcp:*`) are the only ones available.

use std::collections::HashSet;

use serde_json::{Value, json};

use super::super::OnyxTools;
use super::super::driver::Step;
use crate::providers::ProviderError;
use crate::providers::types::Usage;

/// The protocol versions this client speaks (`SDK_PROTOCOL_VERSION`, `MIN_PROTOCOL_VERSION`).
pub const PROTOCOLS: std::ops::RangeInclusive<u64> = 3..=3;

/// A BYOK upstream (an OpenAI-compatible chat completions API) instead of
/// the signed-in GitHub account.
pub struct Byok {
    pub base_url: String,
    pub api_key: Option<String>,
}

/// The `session.create` parameters for a session `id` answering with `model`.
pub fn create(
    id: &str,
    model: &str,
    system: &str,
    cwd: &str,
    byok: Option<&Byok>,
    tools: Option<&OnyxTools>,
) -> Value {
    let system = if system.is_empty() {
        "You are a helpful assistant."
    } else {
        system
    };
    let mut params = json!({
        "model": model,
        "sessionId": id,
        "clientName": "onyx",
        "systemMessage": {"mode": "replace", "content": system},
        "availableTools": [],
        "requestPermission": false,
        "requestUserInput": false,
        "requestElicitation": false,
        "requestExitPlanMode": false,
        "requestAutoModeSwitch": false,
        "hooks": false,
        "streaming": true,
        "includeSubAgentStreamingEvents": false,
        "envValueMode": "direct",
        "workingDirectory": cwd,
        "enableConfigDiscovery": false,
        "enableOnDemandInstructionDiscovery": false,
        "enableFileHooks": false,
        "enableHostGitOperations": false,
        "enableSessionStore": false,
        "enableSkills": false,
        "memory": {"enabled": false},
        "infiniteSessions": {"enabled": false},
    });
    if let Some(tools) = tools {
        params["availableTools"] = json!(["mcp:*"]);
        // Each call is approved by `permission` (Onyx decides at `/mcp`).
        params["requestPermission"] = json!(true);
        params["mcpServers"] = json!({"onyx": {
            "type": "http", "url": tools.url, "headers": {"Authorization": tools.bearer()}, "tools": ["*"],
        }});
    }
    if let Some(byok) = byok {
        let mut provider = json!({"type": "openai", "wireApi": "completions", "baseUrl": byok.base_url});
        if let Some(key) = &byok.api_key {
            provider["apiKey"] = json!(key);
        }
        params["provider"] = provider;
    }
    params
}

/// The answer to a `permission.requested` event of session `id` (the
/// parameters of `session.permissions.handlePendingPermissionRequest`): a
/// call of Onyx's own MCP server goes ahead (Onyx checks it at `/mcp`, with
/// the run's permission mode and approvals); anything else is refused.
pub fn permission(id: &str, event: &Value) -> Option<Value> {
    let data = &event["data"];
    if event["type"] != "permission.requested" || data["resolvedByHook"] == true {
        return None;
    }
    let request = &data["permissionRequest"];
    let result = if request["kind"] == "mcp" && request["serverName"] == "onyx" {
        json!({"kind": "approve-once"})
    } else {
        json!({"kind": "reject", "feedback": "only Onyx's tools are available here"})
    };
    Some(json!({"sessionId": id, "requestId": data["requestId"], "result": result}))
}

/// What one turn has seen so far.
#[derive(Default)]
pub struct Turn {
    /// Messages whose text came as deltas (their closing message repeats it).
    streamed: HashSet<String>,
    input: u64,
    output: u64,
    cache_read: u64,
    cache_write: u64,
}

impl Turn {
    /// What `event` means for the answer.
    pub fn step(&mut self, provider: &str, event: &Value) -> Step {
        let data = &event["data"];
        let message_id = data["messageId"].as_str().unwrap_or_default().to_string();
        match event["type"].as_str() {
            Some("assistant.message_delta") => {
                self.streamed.insert(message_id);
                Step::Text(data["deltaContent"].as_str().unwrap_or_default().to_string())
            }
            Some("assistant.message") if !self.streamed.contains(&message_id) => {
                match data["content"].as_str() {
                    Some(text) if !text.is_empty() => Step::Text(text.to_string()),
                    _ => Step::Skip,
                }
            }
            Some("assistant.usage") => {
                let count = |key: &str| data[key].as_u64().unwrap_or(0);
                self.input += count("inputTokens");
                self.output += count("outputTokens");
                self.cache_read += count("cacheReadTokens");
                self.cache_write += count("cacheWriteTokens");
                Step::Skip
            }
            Some("session.idle") => Step::Done {
                // Reported OpenAI's way: the input count holds the cached tokens.
                usage: Usage::new(self.input, self.output).with_cache(self.cache_read, self.cache_write),
                finish: "stop",
            },
            Some("session.error") => Step::Failed(ProviderError::Upstream {
                provider: provider.to_string(),
                status: 502,
                message: data["message"]
                    .as_str()
                    .unwrap_or("the Copilot session failed")
                    .to_string(),
                kind: None,
                code: Some("subscription_error".into()),
                param: None,
            }),
            _ => Step::Skip,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: &str, data: Value) -> Value {
        json!({"type": kind, "data": data, "id": "e", "timestamp": "t", "parentId": null})
    }

    #[test]
    fn deltas_are_the_text_the_closing_message_is_not_repeated_and_usage_adds_up() {
        let mut turn = Turn::default();
        let delta = event(
            "assistant.message_delta",
            json!({"messageId": "m1", "deltaContent": "echo: "}),
        );
        assert!(matches!(turn.step("c", &delta), Step::Text(t) if t == "echo: "));
        let whole = event(
            "assistant.message",
            json!({"messageId": "m1", "content": "echo: hi"}),
        );
        assert!(matches!(turn.step("c", &whole), Step::Skip));
        let unstreamed = event("assistant.message", json!({"messageId": "m2", "content": "more"}));
        assert!(matches!(turn.step("c", &unstreamed), Step::Text(t) if t == "more"));
        for _ in 0..2 {
            let usage = event(
                "assistant.usage",
                json!({"inputTokens": 11, "outputTokens": 2, "cacheReadTokens": 4, "cacheWriteTokens": 0}),
            );
            assert!(matches!(turn.step("c", &usage), Step::Skip));
        }
        let Step::Done { usage, finish } =
            turn.step("c", &event("session.idle", json!({"mode": "interactive"})))
        else {
            panic!("not done")
        };
        assert_eq!(
            (
                usage.prompt_tokens,
                usage.completion_tokens,
                usage.cached_tokens()
            ),
            (22, 4, 8)
        );
        assert_eq!(finish, "stop");
        let error = event(
            "session.error",
            json!({"errorType": "authentication", "message": "not signed in"}),
        );
        assert!(
            matches!(turn.step("c", &error), Step::Failed(ProviderError::Upstream { message, status: 502, .. }) if message == "not signed in")
        );
    }

    #[test]
    fn an_agent_run_gets_onyx_as_its_one_mcp_server_and_only_its_calls_are_approved() {
        let tools = OnyxTools {
            url: "http://127.0.0.1:9/mcp".into(),
            token: secrecy::SecretString::from("onyx_rt_x"),
        };
        let params = create("s1", "gpt-5", "", "/w", None, Some(&tools));
        assert_eq!(params["availableTools"], json!(["mcp:*"]));
        assert_eq!(
            params["mcpServers"],
            json!({"onyx": {"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer onyx_rt_x"}, "tools": ["*"]}})
        );
        let asked = |kind: &str, server: &str| {
            event(
                "permission.requested",
                json!({"requestId": "p1", "permissionRequest": {"kind": kind, "serverName": server, "toolName": "memory_write"}}),
            )
        };
        let ours = permission("s1", &asked("mcp", "onyx")).unwrap();
        assert_eq!(
            ours,
            json!({"sessionId": "s1", "requestId": "p1", "result": {"kind": "approve-once"}})
        );
        for (kind, server) in [("mcp", "other"), ("shell", "onyx")] {
            let refused = permission("s1", &asked(kind, server)).unwrap();
            assert_eq!(refused["result"]["kind"], "reject", "{kind} {server}");
        }
        assert!(permission("s1", &event("session.idle", json!({}))).is_none());
    }

    #[test]
    fn sessions_have_no_tools_and_a_byok_upstream_only_when_configured() {
        let signed_in = create("s1", "gpt-5", "Be brief.", "/w", None, None);
        assert_eq!(signed_in["availableTools"], json!([]));
        assert_eq!(
            signed_in["systemMessage"],
            json!({"mode": "replace", "content": "Be brief."})
        );
        assert_eq!(signed_in["requestPermission"], false);
        assert!(signed_in.get("provider").is_none());
        let byok = Byok {
            base_url: "http://127.0.0.1:9/v1".into(),
            api_key: Some("sk-x".into()),
        };
        let custom = create("s2", "m", "", "/w", Some(&byok), None);
        assert_eq!(
            custom["provider"],
            json!({"type": "openai", "wireApi": "completions", "baseUrl": "http://127.0.0.1:9/v1", "apiKey": "sk-x"})
        );
        assert_eq!(custom["systemMessage"]["content"], "You are a helpful assistant.");
    }
}
