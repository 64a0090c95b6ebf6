//! The `onyx` command line: `serve`, `doctor`, `hash-password`, `keys`,
//! `reindex`, `login`, `backup`, `restore`, and the hidden `sandbox-exec`
//! helper of the `exec` tool.

mod archive;
mod backup;
mod control;
mod data_files;
mod doctor;
mod error;
mod hash_password;
mod keys;
mod login;
mod reindex;
mod restore;
mod rotate_master;
mod sandbox_exec;
mod serve;
mod skills;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use data_files::{WrittenPath, written_paths};

#[derive(Debug, Parser)]
#[command(
    name = "onyx",
    version,
    about = "Onyx: a self-hosted personal AI assistant gateway"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the gateway (with no config file, on the embedded default).
    Serve {
        /// Config file (JSON5); else $ONYX_CONFIG, else ~/.config/onyx/onyx.json5.
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// Address to listen on (overrides gateway.listen; port 0 picks a free port).
        #[arg(long)]
        listen: Option<SocketAddr>,
    },
    /// Check the config and every configured dependency; print what is reachable.
    Doctor {
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
    /// Hash a password (read from stdin) for gateway.auth.passwordHash.
    HashPassword,
    /// Manage API keys stored in the database.
    Keys {
        #[arg(long, short, global = true)]
        config: Option<PathBuf>,
        #[command(subcommand)]
        command: keys::KeysCommand,
    },
    /// Rebuild the database's derived tables (session metadata) from the object store.
    /// Stop `onyx serve` first when the database is embedded.
    Reindex {
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
    /// Sign a subscription CLI in (its own sign-in; credentials under the data dir).
    Login {
        cli: login::Cli,
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// The CLI to run (default: the provider's `command`, else its name on PATH).
        #[arg(long)]
        command: Option<String>,
    },
    /// Manage skills (folders with a SKILL.md) in the object store.
    Skills {
        #[arg(long, short, global = true)]
        config: Option<PathBuf>,
        #[command(subcommand)]
        command: skills::SkillsCommand,
    },
    /// Write one archive with the database, every object and the data dir's
    /// own files (works while `onyx serve` runs on a SurrealDB server).
    Backup(backup::BackupArgs),
    /// Put a backup back into an empty data dir, database and buckets.
    /// Stop `onyx serve` first.
    Restore(restore::RestoreArgs),
    /// Internal: run a command confined (what the `exec` tool starts).
    #[command(name = "sandbox-exec", hide = true)]
    SandboxExec(sandbox_exec::SandboxArgs),
    /// Internal: run a command that dies with the gateway (MCP servers over stdio, sign-ins).
    #[command(name = "tethered", hide = true)]
    Tethered(sandbox_exec::TetheredArgs),
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    // Before any thread exists: unsharing a namespace needs a single thread.
    let command = match cli.command {
        Command::SandboxExec(args) => return sandbox_exec::run(args),
        Command::Tethered(args) => return sandbox_exec::run_tethered(args),
        command => command,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("onyx: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        match command {
            Command::Serve { config, listen } => serve::run(config, listen).await,
            Command::Doctor { config } => doctor::run(config).await,
            Command::HashPassword => hash_password::run(),
            Command::Reindex { config } => reindex::run(config).await,
            Command::Keys { config, command } => keys::run(config, command).await,
            Command::Skills { config, command } => skills::run(config, command).await,
            Command::Login { cli, config, command } => login::run(config, cli, command).await,
            Command::Backup(args) => backup::run(args).await,
            Command::Restore(args) => restore::run(args).await,
            // Handled above, before the runtime started.
            Command::SandboxExec(args) => sandbox_exec::run(args),
            Command::Tethered(args) => sandbox_exec::run_tethered(args),
        }
    })
}
