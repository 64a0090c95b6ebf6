//! `codex/…` (type `codex` or `chatgpt`): ChatGPT Plus/Pro through the Codex
//! CLI's non-interactive JSON mode (`codex exec --json`): the request on
//! stdin, the answer as `agent_message` items and the usage on
//! `turn.completed`; the system prompt from a 0600 file
//! (`model_instructions_file`). Its own tools are off ([`TOOLS_OFF`]), under a
//! read-only sandbox, no approvals, no saved session. In an agent run its one
//! MCP server is Onyx's `/mcp`, the run token in an environment variable the
//! config names (`bearer_token_env_var`). It reports whole messages, so a
//! stream carries each message as one delta.

use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;

use super::driver::{CliProvider, Dialect, Step};
use super::process::{PromptFile, Spawn};
use super::{OnyxTools, home};
use crate::config::{ProviderConfig, ProviderKind};
use crate::providers::ProviderError;
use crate::providers::types::Usage;

const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// The environment variable the custom upstream's key is passed in.
const KEY_VAR: &str = "ONYX_CODEX_UPSTREAM_KEY";
/// The environment variable the run token for Onyx's `/mcp` is passed in.
const TOOLS_TOKEN_VAR: &str = "ONYX_RUN_TOKEN";

/// Config overrides that turn every one of Codex's own tools off (as Codex
/// 0.169 names them: its shell, patches, web search, images, sub-agents,
/// goals and questions to the user); none is offered to the model.
const TOOLS_OFF: [&str; 8] = [
    "features.shell_tool=false",
    "features.unified_exec=false",
    "features.apply_patch_freeform=false",
    "features.view_image=false",
    "features.multi_agent=false",
    "features.goals=false",
    "web_search=\"disabled\"",
    "tools.experimental_request_user_input={enabled=false}",
];

pub struct Codex {
    /// A Responses API upstream instead of the signed-in ChatGPT account.
    base_url: Option<String>,
    api_key: Option<SecretString>,
}

pub fn provider(config: &ProviderConfig) -> CliProvider<Codex> {
    let base = config.base_url.as_str().trim_end_matches('/');
    let dialect = Codex {
        base_url: (base != DEFAULT_BASE_URL).then(|| base.to_string()),
        api_key: config.api_key.clone(),
    };
    CliProvider::new(config, dialect)
}

/// A TOML string (JSON's escapes are TOML's).
fn toml_string(text: &str) -> String {
    Value::String(text.to_string()).to_string()
}

impl Dialect for Codex {
    const KIND: ProviderKind = ProviderKind::Codex;
    const CLI: &'static str = "codex";
    const PROGRAM: &'static str = "Codex";
    const DEFAULT_COMMAND: &'static str = "codex";
    const MODELS: &'static [&'static str] = &["gpt-5.1-codex", "gpt-5.1"];

    fn spawn(&self, command: &str, model: &str, system: &str, tools: Option<&OnyxTools>) -> Spawn {
        let dir = home("codex");
        let mut env = vec![("CODEX_HOME".to_string(), dir.display().to_string())];
        let mut args: Vec<String> = [
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--ephemeral",
            "--sandbox",
            "read-only",
            "--color",
            "never",
            "-m",
            model,
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        // Onyx's system prompt stands in for Codex's own (a coding agent's,
        // whose tools are off here), read from a 0600 file.
        let prompt_file = (!system.is_empty()).then(|| PromptFile::new(&dir, system));
        if let Some(file) = &prompt_file {
            args.push("-c".into());
            args.push(format!(
                "model_instructions_file={}",
                toml_string(&file.path.display().to_string())
            ));
        }
        if let Some(url) = &self.base_url {
            args.push("-c".into());
            args.push("model_provider=\"onyx_upstream\"".into());
            args.push("-c".into());
            args.push(format!(
                "model_providers.onyx_upstream={{name=\"Onyx upstream\", base_url={}, env_key=\"{KEY_VAR}\", wire_api=\"responses\"}}",
                toml_string(url)
            ));
            let key = self.api_key.as_ref().map(|k| k.expose_secret().to_string());
            env.push((KEY_VAR.into(), key.unwrap_or_default()));
        }
        for setting in TOOLS_OFF {
            args.push("-c".into());
            args.push(setting.into());
        }
        if let Some(tools) = tools {
            use secrecy::ExposeSecret;
            let server = format!(
                "mcp_servers.onyx={{url={}, bearer_token_env_var=\"{TOOLS_TOKEN_VAR}\", default_tools_approval_mode=\"approve\"}}",
                toml_string(&tools.url)
            );
            args.push("-c".into());
            args.push(server);
            env.push((TOOLS_TOKEN_VAR.into(), tools.token.expose_secret().to_string()));
        }
        // The prompt is read from stdin.
        args.push("-".into());
        Spawn {
            program: command.to_string(),
            args,
            env,
            home: dir.clone(),
            cwd: dir.join("work"),
            files: prompt_file.into_iter().collect(),
        }
    }

    fn request(&self, user: &str) -> String {
        user.to_string()
    }

    fn step(&self, provider: &str, line: &Value) -> Step {
        step(provider, line)
    }
}

fn step(provider: &str, line: &Value) -> Step {
    let failed = |message: String| {
        Step::Failed(ProviderError::Upstream {
            provider: provider.to_string(),
            status: 502,
            message,
            kind: None,
            code: Some("subscription_error".into()),
            param: None,
        })
    };
    match line["type"].as_str() {
        Some("item.completed") if line["item"]["type"] == "agent_message" => {
            Step::Text(line["item"]["text"].as_str().unwrap_or_default().to_string())
        }
        Some("turn.completed") => {
            let usage = &line["usage"];
            let count = |key: &str| usage[key].as_u64().unwrap_or(0);
            // OpenAI's input count already holds the cached tokens.
            let usage = Usage::new(count("input_tokens"), count("output_tokens"))
                .with_cache(count("cached_input_tokens"), count("cache_write_input_tokens"));
            Step::Done {
                usage,
                finish: "stop",
            }
        }
        Some("turn.failed") => failed(
            line["error"]["message"]
                .as_str()
                .unwrap_or("the turn failed")
                .to_string(),
        ),
        Some("error") => failed(line["message"].as_str().unwrap_or("error").to_string()),
        _ => Step::Skip,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn agent_messages_and_turn_completed_become_the_answer() {
        let message = json!({"type": "item.completed", "item": {"id": "item_1", "type": "agent_message", "text": "echo: hi\n"}});
        assert!(matches!(step("c", &message), Step::Text(t) if t == "echo: hi\n"));
        let warning = json!({"type": "item.completed", "item": {"type": "error", "message": "Model metadata not found"}});
        assert!(matches!(step("c", &warning), Step::Skip));
        let done = json!({"type": "turn.completed", "usage": {"input_tokens": 30, "cached_input_tokens": 10, "output_tokens": 3}});
        let Step::Done { usage, finish } = step("c", &done) else {
            panic!("not done")
        };
        assert_eq!(
            (
                usage.prompt_tokens,
                usage.completion_tokens,
                usage.cached_tokens()
            ),
            (30, 3, 10)
        );
        assert_eq!(finish, "stop");
        let failed = json!({"type": "turn.failed", "error": {"message": "usage limit reached"}});
        assert!(
            matches!(step("c", &failed), Step::Failed(ProviderError::Upstream { message, .. }) if message == "usage limit reached")
        );
    }

    #[test]
    fn the_system_prompt_and_a_custom_upstream_go_in_as_config_overrides() {
        let codex = Codex {
            base_url: Some("http://127.0.0.1:9/v1".into()),
            api_key: Some(SecretString::from("sk-x")),
        };
        let system = "Be \"brief\".\nReally.";
        let spawn = codex.spawn("codex", "m", system, None);
        let file = spawn.files.first().unwrap();
        let arg = format!(
            "model_instructions_file={}",
            toml_string(&file.path.display().to_string())
        );
        assert!(spawn.args.contains(&arg), "{:?}", spawn.args);
        assert!(
            !spawn.args.iter().any(|a| a.contains("brief")),
            "the prompt is not on the command line: {:?}",
            spawn.args
        );
        assert!(
            spawn
                .args
                .iter()
                .any(|a| a.contains("base_url=\"http://127.0.0.1:9/v1\""))
        );
        assert_eq!(spawn.args.last().map(String::as_str), Some("-"));
        assert!(spawn.env.contains(&(KEY_VAR.to_string(), "sk-x".to_string())));
        for setting in TOOLS_OFF {
            assert!(spawn.args.iter().any(|a| a == setting), "{setting}");
        }
        assert!(!spawn.args.iter().any(|a| a.starts_with("mcp_servers")));
    }

    #[test]
    fn an_agent_run_gets_onyx_as_an_mcp_server_with_the_token_out_of_the_command_line() {
        let codex = Codex {
            base_url: None,
            api_key: None,
        };
        let tools = OnyxTools {
            url: "http://127.0.0.1:9/mcp".into(),
            token: SecretString::from("onyx_rt_secret"),
        };
        let spawn = codex.spawn("codex", "m", "", Some(&tools));
        assert!(
            spawn.args.iter().any(|a| a.starts_with(
                "mcp_servers.onyx={url=\"http://127.0.0.1:9/mcp\", bearer_token_env_var=\"ONYX_RUN_TOKEN\""
            )),
            "{:?}",
            spawn.args
        );
        assert!(!spawn.args.iter().any(|a| a.contains("onyx_rt_secret")));
        assert!(
            spawn
                .env
                .contains(&(TOOLS_TOKEN_VAR.to_string(), "onyx_rt_secret".to_string()))
        );
    }
}
