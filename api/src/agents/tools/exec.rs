//! `exec`: a shell command in the agent's work dir, with a time limit and an
//! output cap, confined by `sandbox` (the `onyx sandbox-exec` helper:
//! Landlock, seccomp, a PID namespace whose end kills every descendant,
//! resource limits, no network unless `tools.exec.network`) with the
//! allow-listed environment. Never offered in `safe` mode; needs approval in
//! `ask` mode. Where the network cannot be cut it refuses unless the network
//! is allowed; with `tools.exec.requireSandbox` it refuses to run where the
//! kernel cannot confine it. With `background: true` it returns at once
//! with an id the `process` tool knows ([`super::process`]).

use std::process::Stdio;

use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

use super::sandboxed::sandboxed;
use super::tool::{Needs, Tool};
use super::{ToolContext, ToolError, ToolKind, fail, text};
use crate::sandbox;

pub const EXEC: Tool = Tool {
    name: "exec",
    description: "Run a shell command (sh -c) in your work directory. Returns the exit code and the output (stdout then stderr, capped). With background: true it returns at once with a process id; the process tool lists, reads and stops it.",
    parameters: || {
        json!({"type": "object", "properties": {
            "command": {"type": "string"},
            "background": {"type": "boolean", "description": "Start it and return at once (default false)"}
        }, "required": ["command"]})
    },
    kind: ToolKind::Dangerous,
    needs: Needs::Nothing,
    over_mcp: false,
    asks_first: None,
    call: |ctx, args| Box::pin(call(ctx, args)),
};

pub const TOOLS: &[Tool] = &[EXEC];

/// How long the output may still take to arrive once the command ended.
const READ_AFTER_EXIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Up to `cap` + 1 bytes of a pipe; the pipe is closed after (a writer that
/// goes on gets EPIPE rather than blocking).
async fn read_capped(pipe: Option<impl tokio::io::AsyncRead + Unpin>, cap: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    if let Some(pipe) = pipe {
        let _ = pipe.take(cap as u64 + 1).read_to_end(&mut bytes).await;
    }
    bytes
}

async fn call(ctx: &ToolContext, args: &Value) -> Result<String, ToolError> {
    let command = text(args, "command")?;
    let dir = &ctx.agent.work_dir;
    tokio::fs::create_dir_all(dir.join(".tmp"))
        .await
        .map_err(|e| e.to_string())?;
    if args["background"].as_bool() == Some(true) {
        return super::process::start(ctx, command).await;
    }
    let mut child = sandboxed(ctx, command)?
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start sh: {e}"))?;
    let pgid = child.id();
    let cap = ctx.settings.exec_max_output;
    let out = tokio::spawn(read_capped(child.stdout.take(), cap));
    let err = tokio::spawn(read_capped(child.stderr.take(), cap));
    let limit = ctx.settings.exec_timeout;
    let finished = tokio::time::timeout(limit, child.wait()).await;
    // The command ends with its shell: its PID namespace ends what it left
    // running (background jobs, `setsid`, a fork flood); the process group
    // and the pids cgroup are killed too, which also closes the output pipes.
    if let Some(pgid) = pgid {
        let _ = tokio::task::spawn_blocking(move || sandbox::reap(pgid)).await;
    }
    let Ok(status) = finished else {
        return Err(fail!(
            "the command did not finish within {} s and was killed",
            limit.as_secs()
        ));
    };
    let collect = |task: tokio::task::JoinHandle<Vec<u8>>| async move {
        tokio::time::timeout(READ_AFTER_EXIT, task)
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default()
    };
    let (out, err) = (collect(out).await, collect(err).await);
    let code = status.map_err(|e| e.to_string())?.code().unwrap_or(-1);
    let mut output = String::from_utf8_lossy(&out).into_owned();
    if !err.is_empty() {
        output.push_str(&String::from_utf8_lossy(&err));
    }
    if output.len() > cap {
        let mut cut = cap;
        while !output.is_char_boundary(cut) {
            cut -= 1;
        }
        output.truncate(cut);
        output.push_str("\n[… output truncated]");
    }
    Ok(format!("exit code {code}\n{output}"))
}
