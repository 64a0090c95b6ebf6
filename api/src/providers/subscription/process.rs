//! A vendor CLI's process: a child in its own process group, started
//! through Onyx's sandbox ([`super::confine`]), the last lines of its stderr kept for the log
//! ([`Group`]); and one run of a one-request CLI on top of it ([`Run`]):
//! stdin for the request line, stdout read as JSON lines. Every live group
//! is listed so shutdown can end them all ([`stop_all`]); dropping a group
//! kills it.

use std::collections::{BTreeSet, VecDeque};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop, ProcessGroup};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::ChildStdout;

/// The process groups of the runs alive now.
static LIVE: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());
const STDERR_LINES: usize = 20;
/// How long a CLI may take to exit once its answer is complete.
const EXIT_WAIT: Duration = Duration::from_secs(5);

/// What to start.
pub struct Spawn {
    pub program: String,
    pub args: Vec<String>,
    /// Added to the allow-listed environment.
    pub env: Vec<(String, String)>,
    /// The CLI's config dir: the only place it may write (and, of the data dir, read).
    pub home: PathBuf,
    pub cwd: PathBuf,
    /// What the CLI reads from files, never from its command line, which
    /// `ps` shows every local user: the system prompt, a run's MCP config
    /// with its run token.
    pub files: Vec<PromptFile>,
}

/// A system prompt (or a run's MCP config) in a 0600 file under the CLI's
/// config dir, written when the CLI starts and removed when its run ends.
pub struct PromptFile {
    pub path: PathBuf,
    text: String,
}

impl PromptFile {
    /// A new file name under `home` for `text` (nothing is written yet).
    pub fn new(home: &std::path::Path, text: &str) -> Self {
        Self::named(home, "system", "md", text)
    }

    /// A new file `{stem}-{uuid}.{extension}` under `home` (nothing is written yet).
    pub fn named(home: &std::path::Path, stem: &str, extension: &str, text: &str) -> Self {
        let name = format!("{stem}-{}.{extension}", uuid::Uuid::new_v4().simple());
        Self {
            path: home.join("prompts").join(name),
            text: text.to_string(),
        }
    }

    fn write(&self) -> std::io::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&self.path)?;
        file.write_all(self.text.as_bytes())
    }
}

impl Drop for PromptFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

pub struct Run {
    group: Group,
    lines: Lines<BufReader<ChildStdout>>,
}

/// A child started from a [`Spawn`] in its own process group, listed for
/// [`stop_all`], the last lines of its stderr kept.
pub struct Group {
    pub child: Box<dyn ChildWrapper>,
    pub pid: u32,
    pub stderr: Arc<Mutex<VecDeque<String>>>,
    /// Removed when the group is dropped.
    _files: Vec<PromptFile>,
}

impl Group {
    pub fn start(spawn: Spawn) -> std::io::Result<Self> {
        std::fs::create_dir_all(&spawn.cwd)?;
        let tmp = spawn.home.join("tmp");
        std::fs::create_dir_all(&tmp)?;
        for file in &spawn.files {
            file.write()?;
        }
        let mut cmd = super::confine::command(&spawn.program, &spawn.args, &spawn.home)?;
        cmd.env_clear()
            .envs(crate::sandbox::allowed_env())
            .env("HOME", &spawn.home)
            .env("TMPDIR", &tmp)
            .envs(spawn.env.iter().map(|(name, value)| (name, value)))
            .current_dir(&spawn.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut wrapped = CommandWrap::from(cmd);
        wrapped.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
        let mut child = wrapped.spawn()?;
        let pid = child.id().unwrap_or_default();
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(pipe) = child.stderr().take() {
            let tail = stderr.clone();
            tokio::spawn(async move {
                let mut lines = BufReader::new(pipe).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if let Ok(mut tail) = tail.lock() {
                        if tail.len() == STDERR_LINES {
                            tail.pop_front();
                        }
                        tail.push_back(line);
                    }
                }
            });
        }
        if let Ok(mut live) = LIVE.lock() {
            live.insert(pid);
        }
        Ok(Self {
            child,
            pid,
            stderr,
            _files: spawn.files,
        })
    }

    /// How the child ended (waiting a moment for it), with its last stderr lines.
    pub async fn ended(&mut self) -> String {
        let status = match tokio::time::timeout(EXIT_WAIT, self.child.wait()).await {
            Ok(Ok(status)) => status.to_string(),
            Ok(Err(err)) => err.to_string(),
            Err(_) => "still running".to_string(),
        };
        let tail = self
            .stderr
            .lock()
            .map(|t| t.iter().cloned().collect::<Vec<_>>().join("\n"))
            .unwrap_or_default();
        format!("{status}; stderr: {tail}")
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if let Ok(mut live) = LIVE.lock() {
            live.remove(&self.pid);
        }
        // KillOnDrop ends the group of a child that has not exited.
    }
}

impl Run {
    pub fn start(spawn: Spawn) -> std::io::Result<Self> {
        let mut group = Group::start(spawn)?;
        let stdout = group
            .child
            .stdout()
            .take()
            .ok_or_else(|| std::io::Error::other("the child has no stdout"))?;
        Ok(Self {
            lines: BufReader::new(stdout).lines(),
            group,
        })
    }

    pub fn pid(&self) -> u32 {
        self.group.pid
    }

    /// Writes `line` and closes stdin: one request per run.
    pub async fn send(&mut self, line: &str) -> std::io::Result<()> {
        let mut stdin = self
            .group
            .child
            .stdin()
            .take()
            .ok_or_else(|| std::io::Error::other("the child has no stdin"))?;
        stdin.write_all(line.as_bytes()).await?;
        stdin.write_all(b"\n").await?;
        stdin.flush().await?;
        drop(stdin);
        Ok(())
    }

    /// The next JSON object on stdout (other lines are skipped); `None` once
    /// stdout closes.
    pub async fn next(&mut self) -> Option<Value> {
        loop {
            match self.lines.next_line().await {
                Ok(Some(line)) => match serde_json::from_str::<Value>(&line) {
                    Ok(value @ Value::Object(_)) => return Some(value),
                    _ => tracing::debug!(pid = self.group.pid, %line, "subscription CLI: not a JSON line"),
                },
                Ok(None) | Err(_) => return None,
            }
        }
    }

    /// How the child ended (waiting a moment for it), with its last stderr lines.
    pub async fn ended(&mut self) -> String {
        self.group.ended().await
    }

    /// Waits for a clean exit after the answer; a CLI that lingers is killed.
    pub async fn finish(mut self) {
        if tokio::time::timeout(EXIT_WAIT, self.group.child.wait())
            .await
            .is_err()
        {
            let _ = Box::into_pin(self.group.child.kill()).await;
        }
    }
}

/// Kills every CLI still running (shutdown).
pub fn stop_all() {
    use nix::sys::signal::{Signal, killpg};
    use nix::unistd::Pid;
    let pids: Vec<u32> = LIVE
        .lock()
        .map(|l| l.iter().copied().collect())
        .unwrap_or_default();
    for pid in pids {
        if let Ok(raw) = i32::try_from(pid)
            && raw > 0
        {
            let _ = killpg(Pid::from_raw(raw), Signal::SIGKILL);
        }
    }
}
