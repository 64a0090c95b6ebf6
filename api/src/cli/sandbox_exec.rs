//! `onyx sandbox-exec` (hidden): the helper `exec` and the vendor CLIs are
//! started through. It confines itself (see `sandbox`) and starts the
//! command as its PID namespace's init (or execs it where there is none);
//! it runs before the async runtime exists, so it is still single-threaded
//! when it unshares.

use std::path::PathBuf;

use clap::Args;

use crate::sandbox::{Limits, Policy, Stage};

#[derive(Debug, Args)]
pub struct SandboxArgs {
    /// The gateway's PID: the helper dies with it (see `sandbox::tether`).
    #[arg(long)]
    parent: Option<u32>,
    /// Read-write directory (the agent's workspace).
    #[arg(long)]
    workspace: PathBuf,
    /// A path to grant read-only beside the system directories.
    #[arg(long = "read")]
    read_only: Vec<PathBuf>,
    /// A path never to grant, even beneath a system directory.
    #[arg(long = "hide")]
    hidden: Vec<PathBuf>,
    /// Keep the network.
    #[arg(long)]
    network: bool,
    /// Refuse to run unconfined.
    #[arg(long)]
    require: bool,
    #[arg(long)]
    cpu_seconds: u64,
    #[arg(long)]
    memory_bytes: u64,
    #[arg(long)]
    processes: u64,
    #[arg(long)]
    file_bytes: u64,
    /// Internal: this helper is the PID namespace's init (started by the outer helper).
    #[arg(long, hide = true)]
    init: bool,
    /// Internal: as `--init`, and mount a private `/proc` first.
    #[arg(long, hide = true)]
    init_with_proc: bool,
    /// The command and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

pub fn run(args: SandboxArgs) -> std::process::ExitCode {
    let policy = Policy {
        workspace: args.workspace,
        read_only: args.read_only,
        hidden: args.hidden,
        network: args.network,
        require: args.require,
        limits: Limits {
            cpu_seconds: args.cpu_seconds,
            memory_bytes: args.memory_bytes,
            processes: args.processes,
            file_bytes: args.file_bytes,
        },
    };
    let stage = match (args.init, args.init_with_proc) {
        (_, true) => Stage::Init { proc: true },
        (true, false) => Stage::Init { proc: false },
        (false, false) => Stage::Outer { gateway: args.parent },
    };
    std::process::ExitCode::from(crate::sandbox::enter_and_exec(&policy, &args.command, stage))
}

/// `onyx tethered` (hidden): what the gateway starts unconfined (MCP servers
/// over stdio, the vendors' sign-ins) goes through it to die with the gateway.
#[derive(Debug, Args)]
pub struct TetheredArgs {
    /// The gateway's PID.
    #[arg(long)]
    parent: u32,
    /// The command and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

pub fn run_tethered(args: TetheredArgs) -> std::process::ExitCode {
    std::process::ExitCode::from(crate::sandbox::tether::run(args.parent, &args.command))
}
