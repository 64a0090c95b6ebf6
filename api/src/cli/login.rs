//! `onyx login claude|codex|copilot`: signs a subscription CLI in with its own sign-in
//! (which shows the URL and code and waits for them), its config dir pointed
//! at `{dataDir}/subscriptions/{cli}/` so the credentials stay with Onyx's
//! data; then polls the credential files until they show a connection and
//! seals them at rest under the master key.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::config::{self, ProviderKind};
use crate::providers::subscription::device_login::sign_in_command;
use crate::providers::subscription::status::{SubscriptionStatus, status};
use crate::providers::subscription::{cli_home, sealed};

/// The subscription CLIs Onyx can sign in.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Cli {
    /// Claude Pro/Max through Claude Code (`claude auth login`).
    Claude,
    /// ChatGPT Plus/Pro through the Codex CLI (`codex login --device-auth`).
    Codex,
    /// GitHub Copilot through the Copilot CLI (`copilot login --device-code`).
    Copilot,
}

impl Cli {
    fn name(self) -> &'static str {
        match self {
            Self::Claude => "claude",
            Self::Codex => "codex",
            Self::Copilot => "copilot",
        }
    }

    fn kind(self) -> ProviderKind {
        match self {
            Self::Claude => ProviderKind::ClaudeSubscription,
            Self::Codex => ProviderKind::Codex,
            Self::Copilot => ProviderKind::Copilot,
        }
    }
}

/// How long the credential files may take to appear after the sign-in ends.
const POLL_FOR: Duration = Duration::from_secs(10);
const POLL_EVERY: Duration = Duration::from_millis(250);

pub async fn run(config_path: Option<PathBuf>, cli: Cli, command: Option<String>) -> ExitCode {
    let path = config::locate(config_path.as_deref());
    let config = match config::load(path.as_deref()) {
        Ok(config) => config,
        Err(err) => {
            eprintln!("onyx login: {err}");
            return ExitCode::FAILURE;
        }
    };
    let name = cli.name();
    let home = cli_home(&config.storage.data_dir, name);
    if let Err(err) = std::fs::create_dir_all(&home) {
        eprintln!("onyx login: cannot create {}: {err}", home.display());
        return ExitCode::FAILURE;
    }
    let program = command
        .or_else(|| {
            config
                .providers
                .values()
                .find(|p| p.kind == cli.kind())
                .and_then(|p| p.command.clone())
        })
        .unwrap_or_else(|| name.into());
    eprintln!(
        "Signing {name} in (credentials in {}); follow its instructions.",
        home.display()
    );
    let (args, home_var) = sign_in_command(name);
    let mut sign_in = tokio::process::Command::new(&program);
    sign_in.args(args).env(home_var, &home);
    if matches!(cli, Cli::Copilot) {
        // The token in the config dir (to be sealed there), not the desktop keychain.
        sign_in.env("COPILOT_DISABLE_KEYTAR", "1");
    }
    let exit = sign_in.status().await;
    match exit {
        Ok(exit) if !exit.success() => eprintln!("onyx login: {program} ended with {exit}"),
        Ok(_) => {}
        Err(err) => {
            eprintln!("onyx login: cannot run {program:?}: {err}");
            return ExitCode::FAILURE;
        }
    }
    // The credentials are sealed at rest as soon as the sign-in wrote them.
    let vault = match crate::secrets::vault_from_env(&config.storage.data_dir) {
        Ok(vault) => vault,
        Err(err) => {
            eprintln!("onyx login: {err}");
            return ExitCode::FAILURE;
        }
    };
    let started = tokio::time::Instant::now();
    loop {
        let now = u64::try_from(crate::clock::now().timestamp_millis()).unwrap_or(0);
        let found = status(name, &home, now);
        if found.connected {
            if let Err(err) = sealed::seal(&vault, name, &home) {
                eprintln!("onyx login: cannot seal the credentials: {err}");
                return ExitCode::FAILURE;
            }
            println!("{}", line(&found));
            return ExitCode::SUCCESS;
        }
        if started.elapsed() >= POLL_FOR {
            println!("{}", line(&found));
            return ExitCode::FAILURE;
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// "Connected ✓ (account)", or what to do next.
pub fn line(status: &SubscriptionStatus) -> String {
    match (status.connected, status.expired, &status.account) {
        (true, _, Some(account)) => format!("{}: Connected ✓ ({account})", status.cli),
        (true, _, None) => format!("{}: Connected ✓", status.cli),
        (false, true, _) => format!(
            "{}: expired, sign in again with `onyx login {}`",
            status.cli, status.cli
        ),
        (false, false, _) => format!(
            "{}: not connected; sign in with `onyx login {}`",
            status.cli, status.cli
        ),
    }
}
