//! `exec`: a shell command in the agent's work dir, with a time limit and an
//! output cap. Never offered in `safe` mode; needs approval in `ask` mode.

use std::process::Stdio;

use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

use super::{ToolContext, ToolError, ToolKind, ToolSpec, fail, text};

pub fn specs() -> Vec<ToolSpec> {
    vec![ToolSpec {
        name: "exec",
        description: "Run a shell command (sh -c) in your work directory. Returns the exit code and the output (stdout then stderr, capped).",
        parameters: json!({"type": "object", "properties": {
            "command": {"type": "string"}
        }, "required": ["command"]}),
        kind: ToolKind::Dangerous,
    }]
}

pub async fn call(ctx: &ToolContext, args: &Value) -> Result<String, ToolError> {
    let command = text(args, "command")?;
    let dir = &ctx.agent.work_dir;
    tokio::fs::create_dir_all(dir).await.map_err(|e| e.to_string())?;
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start sh: {e}"))?;
    let cap = ctx.settings.exec_max_output;
    let (mut stdout, mut stderr) = (child.stdout.take(), child.stderr.take());
    let read = async {
        let mut out = Vec::new();
        let mut err = Vec::new();
        if let Some(s) = stdout.as_mut() {
            let _ = s.take(cap as u64 + 1).read_to_end(&mut out).await;
        }
        if let Some(s) = stderr.as_mut() {
            let _ = s.take(cap as u64 + 1).read_to_end(&mut err).await;
        }
        let status = child.wait().await;
        (out, err, status)
    };
    let limit = ctx.settings.exec_timeout;
    let Ok((out, err, status)) = tokio::time::timeout(limit, read).await else {
        return Err(fail!(
            "the command did not finish within {} s and was killed",
            limit.as_secs()
        ));
    };
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
