//! Whether a subscription CLI is signed in, read from the credential files it
//! keeps in its config dir under the data dir: the plaintext while the CLI
//! runs, else the sealed form ([`sealed`](super::sealed)). Onyx sends the
//! tokens nowhere; only the CLI uses them.

use std::path::Path;

use serde::Serialize;
use serde_json::Value;

/// What the UI and `GET /v1/subscriptions` show for one CLI.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct SubscriptionStatus {
    /// `claude`, `codex` or `copilot`.
    pub cli: &'static str,
    pub connected: bool,
    /// Signed in once, but the credentials have run out: sign in again.
    pub expired: bool,
    /// The account's e-mail or name, where the CLI records it.
    pub account: Option<String>,
}

/// The status of `cli` whose config dir is `home`, at `now_ms` (Unix ms).
pub fn status(cli: &'static str, home: &Path, now_ms: u64) -> SubscriptionStatus {
    let read = |name: &str| -> Option<Value> {
        let text = super::sealed::read(cli, home, name)?;
        serde_json::from_str(&text).ok()
    };
    let mut status = SubscriptionStatus {
        cli,
        connected: false,
        expired: false,
        account: None,
    };
    if cli == "codex" {
        // The Codex CLI: `auth.json` holds the ChatGPT sign-in's tokens (or an API key).
        let Some(auth) = read("auth.json") else {
            return status;
        };
        let tokens = &auth["tokens"];
        let signed_in = tokens["refresh_token"].as_str().is_some_and(|t| !t.is_empty())
            || auth["OPENAI_API_KEY"].as_str().is_some_and(|k| !k.is_empty());
        status.connected = signed_in;
        status.account = tokens["account_id"].as_str().map(str::to_string);
        return status;
    }
    if cli == "copilot" {
        // The Copilot CLI without a system keychain (a server, a container):
        // `config.json` holds the tokens by host and login, and the last account.
        let Some(config) = read("config.json") else {
            return status;
        };
        status.connected = config["copilot_tokens"]
            .as_object()
            .is_some_and(|tokens| tokens.values().any(|t| t.as_str().is_some_and(|t| !t.is_empty())));
        status.account = config["last_logged_in_user"]["login"]
            .as_str()
            .map(str::to_string);
        return status;
    }
    if cli == "claude" {
        // Claude Code on Linux: `.credentials.json` holds the OAuth grant,
        // `.claude.json` the account it belongs to.
        let Some(oauth) = read(".credentials.json").map(|c| c["claudeAiOauth"].clone()) else {
            return status;
        };
        if !oauth.is_object() {
            return status;
        }
        let has_refresh = oauth["refreshToken"].as_str().is_some_and(|t| !t.is_empty());
        let expired = oauth["expiresAt"].as_u64().is_some_and(|at| at <= now_ms);
        // An expired access token with a refresh token is renewed by the CLI itself.
        status.expired = expired && !has_refresh;
        status.connected = !status.expired;
        status.account = read(".claude.json").and_then(|c| {
            let account = &c["oauthAccount"];
            account["emailAddress"]
                .as_str()
                .or_else(|| account["displayName"].as_str())
                .map(str::to_string)
        });
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn write(dir: &Path, name: &str, value: Value) {
        std::fs::write(dir.join(name), value.to_string()).unwrap();
    }

    #[test]
    fn claude_is_connected_expired_or_signed_out_by_its_files() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            status("claude", dir.path(), 1_000),
            SubscriptionStatus {
                cli: "claude",
                connected: false,
                expired: false,
                account: None
            }
        );
        write(
            dir.path(),
            ".credentials.json",
            json!({"claudeAiOauth": {"accessToken": "a", "refreshToken": "r", "expiresAt": 500}}),
        );
        write(
            dir.path(),
            ".claude.json",
            json!({"oauthAccount": {"emailAddress": "ada@example.com"}}),
        );
        let renewable = status("claude", dir.path(), 1_000);
        assert!(renewable.connected && !renewable.expired);
        assert_eq!(renewable.account.as_deref(), Some("ada@example.com"));
        write(
            dir.path(),
            ".credentials.json",
            json!({"claudeAiOauth": {"accessToken": "a", "expiresAt": 500}}),
        );
        let expired = status("claude", dir.path(), 1_000);
        assert!(!expired.connected && expired.expired);
        let fresh = status("claude", dir.path(), 100);
        assert!(fresh.connected && !fresh.expired);
    }

    #[test]
    fn copilot_is_connected_by_the_tokens_in_its_config_file() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!status("copilot", dir.path(), 0).connected);
        write(
            dir.path(),
            "config.json",
            json!({"copilot_tokens": {}, "banner": "never"}),
        );
        assert!(!status("copilot", dir.path(), 0).connected);
        write(
            dir.path(),
            "config.json",
            json!({
                "last_logged_in_user": {"host": "https://github.com", "login": "octocat"},
                "copilot_tokens": {"https://github.com:octocat": "gho_x"},
            }),
        );
        let signed_in = status("copilot", dir.path(), 0);
        assert!(signed_in.connected);
        assert_eq!(signed_in.account.as_deref(), Some("octocat"));
    }

    #[test]
    fn codex_is_connected_by_its_auth_file() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!status("codex", dir.path(), 0).connected);
        write(
            dir.path(),
            "auth.json",
            json!({"tokens": {"id_token": "i", "access_token": "a", "refresh_token": "r", "account_id": "acct-1"}}),
        );
        let signed_in = status("codex", dir.path(), 0);
        assert!(signed_in.connected);
        assert_eq!(signed_in.account.as_deref(), Some("acct-1"));
    }
}
