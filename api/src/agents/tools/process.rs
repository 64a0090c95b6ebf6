//! Background commands: `exec` with `background: true` starts one under the
//! same sandbox as `exec` and returns its id (`p-<n>`, Onyx's own, not the
//! OS pid); the `process` tool lists the agent's own, reads their output
//! and stops them. The table lives in this replica's memory: a restart or
//! another replica does not know them. Each agent may have
//! [`MAX_RUNNING`] running; each keeps the last [`RING_BYTES`] of its output
//! (stdout and stderr as they arrive). Stopping ends the whole tree the way
//! `exec` does ([`sandbox::reap`]: the process group, so the PID namespace's
//! init and with it every descendant, and the pids cgroup). Another agent's
//! id reads as unknown. Every process is stopped at shutdown.

use std::collections::{HashMap, VecDeque};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::{Notify, watch};

use super::sandboxed::sandboxed;
use super::tool::{Needs, Tool};
use super::{ToolContext, ToolError, ToolKind, fail, text};
use crate::sandbox;

/// Running background processes one agent may have at once.
pub const MAX_RUNNING: usize = 8;
/// Processes (running or ended) one agent's table keeps; the oldest ended
/// ones go first.
const MAX_KEPT: usize = 32;
/// Bytes of output kept per process (the newest).
pub const RING_BYTES: usize = 64 * 1024;
/// Bytes of output one `output` call returns.
const MAX_ANSWER: usize = 16 * 1024;
/// How long `stop` waits for the tree to be gone.
const STOP_WAIT: Duration = Duration::from_secs(10);

pub const PROCESS: Tool = Tool {
    name: "process",
    description: "Your background commands (started by exec with background: true). action list: each one's id, command, start time and state; output: what one printed (give id; offset to read on from where the last answer ended); stop: end one and everything it started.",
    parameters: || {
        json!({"type": "object", "properties": {
            "action": {"type": "string", "enum": ["list", "output", "stop"]},
            "id": {"type": "string", "description": "The process id exec returned, e.g. p-1 (output, stop)"},
            "offset": {"type": "integer", "minimum": 0, "description": "output: the byte to read from (default: the oldest kept)"}
        }, "required": ["action"]})
    },
    kind: ToolKind::Dangerous,
    needs: Needs::Nothing,
    over_mcp: false,
    asks_first: None,
    call: |ctx, args| Box::pin(call(ctx, args)),
};

/// In `group:exec` beside `exec`.
pub const TOOLS: &[Tool] = &[PROCESS];

/// Where a process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Running,
    /// Ended by itself, with its exit code (-1: by a signal).
    Exited(i32),
    /// Ended by `stop` or shutdown.
    Stopped,
}

/// The newest [`RING_BYTES`] of a process's output, and how many bytes came
/// before them (offsets count from the first byte ever printed).
#[derive(Debug, Default)]
struct Ring {
    bytes: VecDeque<u8>,
    dropped: u64,
}

impl Ring {
    fn push(&mut self, chunk: &[u8]) {
        self.bytes.extend(chunk);
        let over = self.bytes.len().saturating_sub(RING_BYTES);
        self.bytes.drain(..over);
        self.dropped += over as u64;
    }

    fn end(&self) -> u64 {
        self.dropped + self.bytes.len() as u64
    }
}

/// One background process.
struct Background {
    id: String,
    command: String,
    started: chrono::DateTime<chrono::Utc>,
    output: Mutex<Ring>,
    state: watch::Receiver<State>,
    stop: Notify,
}

impl Background {
    fn state(&self) -> State {
        *self.state.borrow()
    }

    fn output(&self) -> std::sync::MutexGuard<'_, Ring> {
        self.output.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Asks its task to end the tree and waits until it has.
    async fn stop(&self) -> State {
        // `notify_one` keeps the permit if the task is not waiting yet.
        self.stop.notify_one();
        let mut state = self.state.clone();
        let _ = tokio::time::timeout(STOP_WAIT, state.wait_for(|s| *s != State::Running)).await;
        self.state()
    }
}

/// Every agent's background processes on this replica.
#[derive(Default)]
pub struct Processes {
    by_agent: Mutex<HashMap<String, Vec<Arc<Background>>>>,
    next: AtomicU64,
}

impl Processes {
    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<Arc<Background>>>> {
        self.by_agent.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Agent `agent`'s process `id`; another agent's reads as unknown.
    fn find(&self, agent: &str, id: &str) -> Result<Arc<Background>, ToolError> {
        self.table()
            .get(agent)
            .and_then(|list| list.iter().find(|p| p.id == id))
            .cloned()
            .ok_or_else(|| fail!("you have no background process {id:?} (process list shows yours)"))
    }

    /// How many of `agent`'s processes run.
    fn running(&self, agent: &str) -> usize {
        running_in(&self.table(), agent)
    }

    /// Adds `process` to `agent`'s table unless that would pass
    /// [`MAX_RUNNING`] (checked under the lock: calls in parallel cannot
    /// pass the bound); ended ones beyond [`MAX_KEPT`] are forgotten.
    fn admit(&self, agent: &str, process: Arc<Background>) -> bool {
        let mut table = self.table();
        if running_in(&table, agent) >= MAX_RUNNING {
            return false;
        }
        let list = table.entry(agent.to_string()).or_default();
        list.push(process);
        while list.len() > MAX_KEPT {
            match list.iter().position(|p| p.state() != State::Running) {
                Some(oldest_ended) => list.remove(oldest_ended),
                None => break,
            };
        }
        true
    }

    /// Stops every process (shutdown).
    pub async fn stop_all(&self) {
        let all: Vec<Arc<Background>> = self.table().values().flatten().cloned().collect();
        for process in all.iter().filter(|p| p.state() == State::Running) {
            process.stop().await;
        }
    }
}

fn running_in(table: &HashMap<String, Vec<Arc<Background>>>, agent: &str) -> usize {
    table.get(agent).map_or(0, |list| {
        list.iter().filter(|p| p.state() == State::Running).count()
    })
}

fn too_many() -> ToolError {
    fail!(
        "you already have {MAX_RUNNING} background processes running, the most allowed; stop one first (process stop)"
    )
}

/// `exec` with `background: true`: starts `command` sandboxed and returns at
/// once with its id.
pub(super) async fn start(ctx: &ToolContext, command: &str) -> Result<String, ToolError> {
    let processes = &ctx.processes;
    let agent = ctx.agent.id.clone();
    if processes.running(&agent) >= MAX_RUNNING {
        return Err(too_many());
    }
    let mut child = sandboxed(ctx, command)?
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start sh: {e}"))?;
    let id = format!("p-{}", processes.next.fetch_add(1, Ordering::Relaxed) + 1);
    let (state_tx, state) = watch::channel(State::Running);
    let process = Arc::new(Background {
        id: id.clone(),
        command: command.to_string(),
        started: chrono::Utc::now(),
        output: Mutex::new(Ring::default()),
        state,
        stop: Notify::new(),
    });
    if !processes.admit(&agent, process.clone()) {
        if let Some(pgid) = child.id() {
            let _ = tokio::task::spawn_blocking(move || sandbox::reap(pgid)).await;
        }
        return Err(too_many());
    }
    let readers = [
        tokio::spawn(copy_into(child.stdout.take(), process.clone())),
        tokio::spawn(copy_into(child.stderr.take(), process.clone())),
    ];
    tokio::spawn(async move {
        let pgid = child.id();
        let ended = tokio::select! {
            status = child.wait() => match status {
                Ok(status) => State::Exited(status.code().unwrap_or(-1)),
                Err(_) => State::Exited(-1),
            },
            () = process.stop.notified() => State::Stopped,
        };
        // As `exec` does: the PID namespace's init, the process group and
        // the pids cgroup, so nothing the command started is left.
        if let Some(pgid) = pgid {
            let _ = tokio::task::spawn_blocking(move || sandbox::reap(pgid)).await;
        }
        let _ = child.wait().await;
        for reader in readers {
            let _ = tokio::time::timeout(Duration::from_secs(5), reader).await;
        }
        let _ = state_tx.send(ended);
    });
    Ok(format!(
        "started background process {id}; read its output with process output, end it with process stop"
    ))
}

/// Copies a pipe into the process's ring until it closes.
async fn copy_into(pipe: Option<impl AsyncRead + Unpin>, process: Arc<Background>) {
    let Some(mut pipe) = pipe else { return };
    let mut buffer = vec![0; 8192];
    while let Ok(read) = pipe.read(&mut buffer).await {
        if read == 0 {
            break;
        }
        process.output().push(&buffer[..read]);
    }
}

fn describe(state: State) -> String {
    match state {
        State::Running => "running".into(),
        State::Exited(code) => format!("exited with code {code}"),
        State::Stopped => "stopped".into(),
    }
}

async fn call(ctx: &ToolContext, args: &Value) -> Result<String, ToolError> {
    let processes = &ctx.processes;
    let agent = ctx.agent.id.as_str();
    match text(args, "action")? {
        "list" => {
            let list: Vec<Arc<Background>> = processes.table().get(agent).cloned().unwrap_or_default();
            if list.is_empty() {
                return Ok("no background processes".into());
            }
            let lines: Vec<String> = list
                .iter()
                .map(|p| {
                    format!(
                        "{}  {}  started {}  {}",
                        p.id,
                        describe(p.state()),
                        p.started.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                        crate::text::one_line(&p.command, 200)
                    )
                })
                .collect();
            Ok(lines.join("\n"))
        }
        "output" => {
            let process = processes.find(agent, text(args, "id")?)?;
            let state = process.state();
            let ring = process.output();
            let from = args["offset"]
                .as_u64()
                .unwrap_or(0)
                .clamp(ring.dropped, ring.end());
            let skip = usize::try_from(from - ring.dropped).unwrap_or(usize::MAX);
            let bytes: Vec<u8> = ring.bytes.iter().skip(skip).take(MAX_ANSWER).copied().collect();
            let to = from + bytes.len() as u64;
            let mut answer = format!(
                "{} {}; output bytes {from}..{to} of {}",
                process.id,
                describe(state),
                ring.end()
            );
            if ring.dropped > 0 {
                answer.push_str(&format!(" (the first {} are no longer kept)", ring.dropped));
            }
            if to < ring.end() {
                answer.push_str(&format!("; more from offset {to}"));
            }
            answer.push('\n');
            answer.push_str(&String::from_utf8_lossy(&bytes));
            Ok(answer)
        }
        "stop" => {
            let process = processes.find(agent, text(args, "id")?)?;
            if process.state() != State::Running {
                return Ok(format!(
                    "{} had already ended: {}",
                    process.id,
                    describe(process.state())
                ));
            }
            match process.stop().await {
                State::Running => Err(fail!(
                    "{} did not end within {} s",
                    process.id,
                    STOP_WAIT.as_secs()
                )),
                ended => Ok(format!("{} {}", process.id, describe(ended))),
            }
        }
        other => Err(fail!("unknown action {other:?}: use list, output or stop")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_keeps_the_newest_bytes_and_counts_the_rest() {
        let mut ring = Ring::default();
        ring.push(&[b'a'; RING_BYTES]);
        ring.push(b"tail");
        assert_eq!(ring.bytes.len(), RING_BYTES);
        assert_eq!(ring.dropped, 4);
        assert_eq!(ring.end(), RING_BYTES as u64 + 4);
        let last: Vec<u8> = ring.bytes.iter().rev().take(4).rev().copied().collect();
        assert_eq!(last, b"tail");
    }
}
