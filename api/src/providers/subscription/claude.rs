//! `claude-subscription/…`: Claude Pro/Max through the Claude Code CLI in its
//! headless streaming-JSON mode (the protocol the Agent SDK drives): the
//! request goes in as one `user` line, the answer comes back as
//! `stream_event` text deltas and a closing `result` with usage. The system
//! prompt is read from a 0600 file (`--system-prompt-file`). Its tools,
//! settings files, other MCP servers and slash commands are off; sessions
//! are not saved. In an agent run its one MCP server is Onyx's `/mcp`
//! (`--mcp-config`, a 0600 file holding the run token), whose tools
//! (`mcp__onyx__*`) are the only ones it may call.

use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

use super::driver::{CliProvider, Dialect, Step};
use super::process::{PromptFile, Spawn};
use super::{OnyxTools, home};
use crate::config::{ProviderConfig, ProviderKind};
use crate::providers::ProviderError;
use crate::providers::types::Usage;

const DEFAULT_BASE_URL: &str = "https://api.anthropic.com/";

pub struct Claude {
    /// `ANTHROPIC_BASE_URL` for the CLI, when the config points elsewhere.
    base_url: Option<String>,
    /// An API key instead of the signed-in subscription (API billing, tests).
    api_key: Option<SecretString>,
}

pub fn provider(config: &ProviderConfig) -> CliProvider<Claude> {
    let base = config.base_url.as_str();
    let dialect = Claude {
        base_url: (base != DEFAULT_BASE_URL).then(|| base.trim_end_matches('/').to_string()),
        api_key: config.api_key.clone(),
    };
    CliProvider::new(config, dialect)
}

impl Dialect for Claude {
    const KIND: ProviderKind = ProviderKind::ClaudeSubscription;
    const CLI: &'static str = "claude";
    const PROGRAM: &'static str = "Claude Code";
    const DEFAULT_COMMAND: &'static str = "claude";
    const MODELS: &'static [&'static str] = &["sonnet", "opus", "haiku"];

    fn spawn(&self, command: &str, model: &str, system: &str, tools: Option<&OnyxTools>) -> Spawn {
        let dir = home("claude");
        let mut env = vec![
            ("CLAUDE_CONFIG_DIR".to_string(), dir.display().to_string()),
            ("DISABLE_AUTOUPDATER".into(), "1".into()),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".into(), "1".into()),
        ];
        if let Some(url) = &self.base_url {
            env.push(("ANTHROPIC_BASE_URL".into(), url.clone()));
        }
        if let Some(key) = &self.api_key {
            env.push(("ANTHROPIC_API_KEY".into(), key.expose_secret().to_string()));
        }
        let prompt_file = PromptFile::new(&dir, system);
        let prompt_path = prompt_file.path.display().to_string();
        let mut args = vec![
            "-p",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
            "--include-partial-messages",
            "--no-session-persistence",
            "--model",
            model,
            "--system-prompt-file",
            &prompt_path,
            // Onyx's agent loop runs tools; the CLI runs none of its own.
            "--tools",
            "",
            "--permission-mode",
            "dontAsk",
            "--setting-sources",
            "",
            "--strict-mcp-config",
            "--disable-slash-commands",
        ];
        let mut files = vec![prompt_file];
        let mcp_path;
        if let Some(tools) = tools {
            let config = json!({"mcpServers": {"onyx": {
                "type": "http", "url": tools.url, "headers": {"Authorization": tools.bearer()},
            }}});
            let file = PromptFile::named(&dir, "mcp", "json", &config.to_string());
            mcp_path = file.path.display().to_string();
            files.push(file);
            args.extend(["--mcp-config", &mcp_path, "--allowedTools", "mcp__onyx"]);
        }
        Spawn {
            program: command.to_string(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env,
            home: dir.clone(),
            cwd: dir.join("work"),
            files,
        }
    }

    fn request(&self, user: &str) -> String {
        json!({"type": "user", "message": {"role": "user", "content": user}}).to_string()
    }

    fn step(&self, provider: &str, line: &Value) -> Step {
        step(provider, line)
    }
}

fn step(provider: &str, line: &Value) -> Step {
    match line["type"].as_str() {
        Some("stream_event") => {
            let event = &line["event"];
            match (event["type"].as_str(), event["delta"]["type"].as_str()) {
                (Some("content_block_delta"), Some("text_delta")) => {
                    Step::Text(event["delta"]["text"].as_str().unwrap_or_default().to_string())
                }
                _ => Step::Skip,
            }
        }
        Some("result") if line["is_error"] == true || line["subtype"] != "success" => {
            let status = line["api_error_status"]
                .as_u64()
                .and_then(|s| u16::try_from(s).ok())
                .filter(|s| *s >= 400)
                .unwrap_or(502);
            let message = line["result"]
                .as_str()
                .map(str::to_string)
                .or_else(|| {
                    line["subtype"]
                        .as_str()
                        .map(|s| format!("the run ended with {s}"))
                })
                .unwrap_or_else(|| "the run failed".into());
            Step::Failed(ProviderError::Upstream {
                provider: provider.to_string(),
                status,
                message,
                kind: None,
                code: Some("subscription_error".into()),
                param: None,
            })
        }
        Some("result") => Step::Done {
            usage: usage(&line["usage"]),
            finish: crate::providers::anthropic::finish_reason(line["stop_reason"].as_str()),
        },
        _ => Step::Skip,
    }
}

/// The `result` line's usage (Anthropic's counts) in OpenAI's shape.
fn usage(usage: &Value) -> Usage {
    let count = |key: &str| usage[key].as_u64().unwrap_or(0);
    let (read, written) = (
        count("cache_read_input_tokens"),
        count("cache_creation_input_tokens"),
    );
    let prompt = count("input_tokens") + read + written;
    Usage::new(prompt, count("output_tokens")).with_cache(read, written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_deltas_and_the_result_line_become_the_answer() {
        let delta = json!({"type": "stream_event", "event": {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}}});
        assert!(matches!(step("c", &delta), Step::Text(t) if t == "Hi"));
        let init = json!({"type": "system", "subtype": "init"});
        assert!(matches!(step("c", &init), Step::Skip));
        let result = json!({"type": "result", "subtype": "success", "is_error": false, "result": "Hi there", "stop_reason": "max_tokens",
            "usage": {"input_tokens": 3, "cache_creation_input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 7}});
        let Step::Done { usage, finish } = step("c", &result) else {
            panic!("not done")
        };
        assert_eq!(finish, "length");
        assert_eq!(usage.prompt_tokens, 18);
        assert_eq!(usage.completion_tokens, 7);
        assert_eq!(usage.cached_tokens(), 5);
    }

    #[test]
    fn an_error_result_keeps_the_upstream_status_and_message() {
        let result = json!({"type": "result", "subtype": "success", "is_error": true, "api_error_status": 401, "result": "Invalid API key"});
        let Step::Failed(ProviderError::Upstream { status, message, .. }) = step("c", &result) else {
            panic!("not failed")
        };
        assert_eq!((status, message.as_str()), (401, "Invalid API key"));
        let cut = json!({"type": "result", "subtype": "error_max_turns", "is_error": true});
        let Step::Failed(ProviderError::Upstream { status, message, .. }) = step("c", &cut) else {
            panic!("not failed")
        };
        assert_eq!(status, 502);
        assert!(message.contains("error_max_turns"));
    }
}
