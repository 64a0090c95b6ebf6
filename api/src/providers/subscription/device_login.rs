//! Signing a subscription CLI in from the UI: runs the CLI's own sign-in
//! (the same one `onyx login` runs) in the background with its config dir
//! under the data dir, reads the URL and device code it prints so the Config
//! page can show them, passes on a code the user pastes back (Claude Code's
//! flow asks for one), and when the CLI ends reads the credential files:
//! connected (and sealed at rest) or failed with the CLI's last words. One
//! sign-in per provider at a time, on the replica that started it.

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin};

use super::status::status;
use crate::locks::lock;

/// How long a sign-in may wait for the user before it is given up.
const SIGN_IN_LIMIT: Duration = Duration::from_secs(15 * 60);
/// How long the credential files may take to appear after the CLI ended.
const CREDENTIALS_WAIT: Duration = Duration::from_secs(5);
/// Lines of the CLI's output kept for the page.
const OUTPUT_LINES: usize = 12;

/// The CLI's own sign-in, and the variable naming its config dir.
pub fn sign_in_command(cli: &str) -> (&'static [&'static str], &'static str) {
    match cli {
        "claude" => (&["auth", "login", "--claudeai"], "CLAUDE_CONFIG_DIR"),
        "codex" => (&["login", "--device-auth"], "CODEX_HOME"),
        _ => (&["login", "--device-code"], "COPILOT_HOME"),
    }
}

/// A sign-in as the Config page shows it.
#[derive(Debug, Clone, Serialize, PartialEq, schemars::JsonSchema)]
pub struct SignInView {
    pub provider: String,
    pub cli: &'static str,
    /// `waiting` (for the user), `connected`, `failed` or `cancelled`.
    pub state: &'static str,
    /// Where to sign in, as the CLI printed it.
    pub url: Option<String>,
    /// The device code to enter there, if the CLI printed one.
    pub code: Option<String>,
    /// Whether the CLI waits for a code pasted back (Claude Code).
    pub accepts_code: bool,
    /// The account once connected, or why it failed.
    pub message: Option<String>,
    /// The CLI's last lines (colour codes removed).
    pub output: Vec<String>,
}

struct SignIn {
    view: Mutex<SignInView>,
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    cancel: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
}

static SIGN_INS: LazyLock<Mutex<HashMap<String, Arc<SignIn>>>> = LazyLock::new(Default::default);

/// The provider's sign-in, if one was started on this replica.
pub fn get(provider: &str) -> Option<SignInView> {
    lock(&SIGN_INS).get(provider).map(|s| lock(&s.view).clone())
}

/// Starts `program`'s sign-in for `provider` (its CLI `cli`, config dir
/// `home`); a sign-in already waiting is returned as it is.
pub fn start(provider: &str, cli: &'static str, program: &str, home: &Path) -> Result<SignInView, String> {
    let mut sign_ins = lock(&SIGN_INS);
    if let Some(running) = sign_ins.get(provider) {
        let view = lock(&running.view).clone();
        if view.state == "waiting" {
            return Ok(view);
        }
    }
    std::fs::create_dir_all(home).map_err(|err| format!("cannot create {}: {err}", home.display()))?;
    let (args, home_var) = sign_in_command(cli);
    // Through `onyx tethered`: the sign-in dies with the gateway, however it ends.
    let mut command = crate::sandbox::tether::command(program, None);
    command
        .args(args)
        // The allow-listed environment: no credential of the gateway's reaches the CLI.
        .env_clear()
        .envs(crate::sandbox::allowed_env())
        .envs(std::env::var_os("HOME").map(|h| ("HOME", h)))
        .env(home_var, home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if cli == "copilot" {
        // The token in the config dir (to be sealed there), not a desktop keychain.
        command.env("COPILOT_DISABLE_KEYTAR", "1");
    }
    let mut child = command
        .spawn()
        .map_err(|err| format!("cannot run {program:?} (set the provider's `command`): {err}"))?;
    let view = SignInView {
        provider: provider.into(),
        cli,
        state: "waiting",
        url: None,
        code: None,
        accepts_code: cli == "claude",
        message: None,
        output: Vec::new(),
    };
    let (cancel, cancelled) = tokio::sync::oneshot::channel();
    let sign_in = Arc::new(SignIn {
        view: Mutex::new(view.clone()),
        stdin: tokio::sync::Mutex::new(child.stdin.take()),
        cancel: Mutex::new(Some(cancel)),
    });
    for output in [
        child
            .stdout
            .take()
            .map(|o| Box::new(o) as Box<dyn AsyncRead + Send + Unpin>),
        child
            .stderr
            .take()
            .map(|o| Box::new(o) as Box<dyn AsyncRead + Send + Unpin>),
    ]
    .into_iter()
    .flatten()
    {
        tokio::spawn(read_output(sign_in.clone(), output));
    }
    tokio::spawn(supervise(sign_in.clone(), child, cancelled, home.to_path_buf()));
    sign_ins.insert(provider.into(), sign_in);
    Ok(view)
}

/// Passes a code the user pasted to the CLI's sign-in.
pub async fn send_code(provider: &str, code: &str) -> Result<(), String> {
    let sign_in = lock(&SIGN_INS)
        .get(provider)
        .cloned()
        .ok_or_else(|| format!("no sign-in of {provider:?} is running"))?;
    let mut stdin = sign_in.stdin.lock().await;
    let pipe = stdin
        .as_mut()
        .ok_or("the sign-in does not take a code any more")?;
    let line = format!("{}\n", code.trim());
    pipe.write_all(line.as_bytes())
        .await
        .map_err(|err| format!("the sign-in did not take the code: {err}"))?;
    pipe.flush().await.map_err(|err| err.to_string())
}

/// Stops the provider's sign-in, if one is running.
pub fn cancel(provider: &str) -> bool {
    let Some(sign_in) = lock(&SIGN_INS).get(provider).cloned() else {
        return false;
    };
    lock(&sign_in.cancel)
        .take()
        .is_some_and(|cancel| cancel.send(()).is_ok())
}

/// Keeps the CLI's last lines, and the first URL and device code it prints.
async fn read_output(sign_in: Arc<SignIn>, mut output: Box<dyn AsyncRead + Send + Unpin>) {
    let mut buffer = [0u8; 4096];
    while let Ok(read) = output.read(&mut buffer).await {
        if read == 0 {
            break;
        }
        // Prompts end without a newline, so each read is taken in whole (the
        // CLIs write each message at once).
        let text = String::from_utf8_lossy(&buffer[..read]);
        let mut view = lock(&sign_in.view);
        for line in strip_ansi(&text)
            .split(['\n', '\r'])
            .map(str::trim)
            .filter(|l| !l.is_empty())
        {
            if view.url.is_none() {
                view.url = find_url(line);
            }
            if view.code.is_none() {
                view.code = find_code(line);
            }
            view.output.push(line.to_string());
        }
        let extra = view.output.len().saturating_sub(OUTPUT_LINES);
        view.output.drain(..extra);
    }
}

/// Waits for the CLI to end (or the user to cancel, or the time limit),
/// then reads the credential files and seals them.
async fn supervise(
    sign_in: Arc<SignIn>,
    mut child: Child,
    cancelled: tokio::sync::oneshot::Receiver<()>,
    home: std::path::PathBuf,
) {
    let ended = tokio::select! {
        exit = child.wait() => Some(exit),
        _ = cancelled => None,
        _ = tokio::time::sleep(SIGN_IN_LIMIT) => {
            let _ = child.kill().await;
            lock(&sign_in.view).message = Some("the sign-in timed out".into());
            Some(child.wait().await)
        }
    };
    *sign_in.stdin.lock().await = None;
    let Some(exit) = ended else {
        let _ = child.kill().await;
        let mut view = lock(&sign_in.view);
        view.state = "cancelled";
        view.message = Some("cancelled".into());
        return;
    };
    let cli = lock(&sign_in.view).cli;
    // A sign-in that ended well may write its files a moment later; one that
    // failed is read once.
    let wait = if exit.as_ref().is_ok_and(|e| e.success()) {
        CREDENTIALS_WAIT
    } else {
        Duration::ZERO
    };
    let started = tokio::time::Instant::now();
    let found = loop {
        let now = u64::try_from(crate::clock::now().timestamp_millis()).unwrap_or(0);
        let found = status(cli, &home, now);
        if found.connected || started.elapsed() >= wait {
            break found;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let sealed = match super::sealed::vault() {
        Some(vault) if found.connected => super::sealed::seal(&vault, cli, &home)
            .map(|_| ())
            .map_err(|e| e.to_string()),
        _ => Ok(()),
    };
    let mut view = lock(&sign_in.view);
    match (found.connected, sealed) {
        (true, Ok(())) => {
            view.state = "connected";
            view.message = found.account;
        }
        (true, Err(err)) => {
            view.state = "failed";
            view.message = Some(format!(
                "signed in, but the credentials could not be sealed: {err}"
            ));
        }
        (false, _) => {
            view.state = "failed";
            let exit = exit.map_or_else(|err| err.to_string(), |status| status.to_string());
            let last = view.output.last().cloned().unwrap_or_default();
            let why = view
                .message
                .take()
                .unwrap_or_else(|| format!("the sign-in ended ({exit})"));
            view.message = Some(format!("{why} without credentials. {last}").trim().to_string());
        }
    }
}

/// `text` without terminal escape sequences (colours, cursor moves, links).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        match chars.next() {
            // CSI: parameters up to a final letter.
            Some('[') => {
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() || c == '~' {
                        break;
                    }
                }
            }
            // OSC (e.g. hyperlinks): up to BEL or ESC \.
            Some(']') => {
                while let Some(c) = chars.next() {
                    if c == '\u{7}' || (c == '\u{1b}' && chars.next_if_eq(&'\\').is_some()) {
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    out
}

fn find_url(line: &str) -> Option<String> {
    let at = line.find("https://")?;
    let url: String = line[at..]
        .chars()
        .take_while(|c| !c.is_whitespace() && !matches!(c, '"' | '\'' | '<' | '>' | ')'))
        .collect();
    Some(url.trim_end_matches(['.', ',', ';']).to_string())
}

/// A device code: letters and digits in two groups joined by a dash
/// (`ABCD-1234`), not part of a URL.
fn find_code(line: &str) -> Option<String> {
    line.split(|c: char| c.is_whitespace() || matches!(c, ':' | '"' | '\'' | '(' | ')' | ','))
        .filter(|word| !word.contains("://"))
        .map(|word| word.trim_end_matches('.'))
        .find(|word| {
            let mut parts = word.split('-');
            let (Some(a), Some(b), None) = (parts.next(), parts.next(), parts.next()) else {
                return false;
            };
            let group = |p: &str| {
                (4..=8).contains(&p.len()) && p.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
            };
            group(a) && group(b)
        })
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_device_codes_are_read_from_what_the_clis_print() {
        let printed = "\u{1b}[1mFollow these steps\u{1b}[0m:\n  1. Open \u{1b}[94mhttps://auth.openai.com/codex/device\u{1b}[0m\n  2. Enter this one-time code \u{1b}[94mK7QP-2XWB\u{1b}[0m";
        let text = strip_ansi(printed);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            find_url(lines[1]).as_deref(),
            Some("https://auth.openai.com/codex/device")
        );
        assert_eq!(find_code(lines[2]).as_deref(), Some("K7QP-2XWB"));
        assert_eq!(
            find_code("To authenticate, visit https://github.com/login/device and enter code 1A2B-3C4D."),
            Some("1A2B-3C4D".into())
        );
        assert_eq!(
            find_code("visit https://example.com/AB12-CD34 now"),
            None,
            "not inside a URL"
        );
        assert_eq!(
            find_code("set up 2026-11-24 at 10-20"),
            None,
            "dates are not codes"
        );
        let osc = strip_ansi("\u{1b}]8;;https://claude.ai/x\u{7}link\u{1b}]8;;\u{7} done");
        assert_eq!(osc, "link done");
    }
}
