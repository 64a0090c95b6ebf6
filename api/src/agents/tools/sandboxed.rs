//! The command `exec` and background processes run: this binary's
//! `onyx sandbox-exec` helper with the agent's sandbox policy and the
//! allow-listed environment, in the agent's work dir.

use super::{ToolContext, ToolError, fail};
use crate::sandbox::{self, Policy};

/// The helper command: this binary's `sandbox-exec`, the policy, `sh -c command`.
pub(super) fn sandboxed(ctx: &ToolContext, command: &str) -> Result<tokio::process::Command, ToolError> {
    let settings = &ctx.settings.exec_sandbox;
    if let Some(refused) = sandbox::refusal(sandbox::support(), settings.require, settings.network) {
        return Err(fail!("{refused}"));
    }
    let dir = &ctx.agent.work_dir;
    let policy = Policy {
        workspace: dir.clone(),
        read_only: settings.read_only.clone(),
        hidden: settings.hidden.clone(),
        network: settings.network,
        require: settings.require,
        limits: settings.limits,
    };
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the onyx binary: {e}"))?;
    let mut cmd = tokio::process::Command::new(exe);
    cmd.args(sandbox::helper_args(&policy, "sh", &["-c", command]))
        .env_clear()
        .envs(sandbox::allowed_env())
        .env("HOME", dir)
        .env("TMPDIR", dir.join(".tmp"))
        .current_dir(dir)
        // Its own process group: the gateway can end the helper and its command at once.
        .process_group(0);
    Ok(cmd)
}
