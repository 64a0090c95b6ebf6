//! Confinement for what agents and vendor CLIs run. Files an agent names
//! are opened beneath its workspace ([`Beneath`], openat2). Commands (`exec`,
//! the vendor CLIs) run through `onyx sandbox-exec … -- PROGRAM ARGS`, a
//! helper mode of this binary that, single-threaded and before anything
//! else, joins a pids cgroup when root, unshares PID and mount namespaces
//! (inside a user namespace when not root) and, unless allowed, the
//! network, then (as the namespace's init, a second stage of the helper)
//! mounts a private `/proc`, sets resource limits (CPU seconds, address
//! space, processes, file size), applies a Landlock ruleset (read-write in the workspace only, read-only
//! on system directories and the needed parts of `/etc`, nothing else: not
//! the data dir, the config or home; no signals or abstract sockets out) and
//! a seccomp filter (no Unix-domain sockets), then execs the command as the
//! namespace's init, so everything it leaves behind dies with it. Callers
//! pass it only the allow-listed environment ([`allowed_env`]).
//!
//! `support()` says what this kernel offers, for `/health`, `onyx doctor`
//! and `tools.exec.requireSandbox`.

mod beneath;
#[cfg(target_os = "linux")]
mod enter;
mod env;
mod paths;
#[cfg(target_os = "linux")]
mod processes;
#[cfg(target_os = "linux")]
mod seccomp;
pub mod tether;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::Serialize;

pub use beneath::{Beneath, Entry, Kind, is_link_refusal, openat2_available};
pub use env::{allowed_env, is_allowed};
pub use paths::{ETC_ENTRIES, SYSTEM_DIRS};

/// Which side of the PID namespace a helper is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Started by the gateway (whose PID is `gateway`): unshares, then starts the init.
    Outer { gateway: Option<u32> },
    /// The PID namespace's init; `proc`: mount a private `/proc` first.
    Init { proc: bool },
}

/// The name of the helper subcommand.
pub const SUBCOMMAND: &str = "sandbox-exec";

/// Resource limits of one command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub cpu_seconds: u64,
    pub memory_bytes: u64,
    pub processes: u64,
    pub file_bytes: u64,
}

impl Limits {
    /// No limit at all (the vendor CLIs: long-lived programs, not one command).
    pub const UNLIMITED: Self = Self {
        cpu_seconds: u64::MAX,
        memory_bytes: u64::MAX,
        processes: u64::MAX,
        file_bytes: u64::MAX,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            cpu_seconds: 60,
            memory_bytes: 2 << 30,
            processes: 256,
            file_bytes: 256 << 20,
        }
    }
}

/// How one command is confined.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Read-write (the agent's workspace, a CLI's config dir).
    pub workspace: PathBuf,
    /// Readable beside the system directories (a CLI's install, `tools.exec.readOnly`).
    pub read_only: Vec<PathBuf>,
    /// Never readable, even beneath a system directory (data dir, config file, home).
    pub hidden: Vec<PathBuf>,
    pub network: bool,
    /// Refuse to run without Landlock, the seccomp filter and a PID namespace or cgroup.
    pub require: bool,
    pub limits: Limits,
}

/// What the kernel offers, as the helper found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[derive(schemars::JsonSchema)]
#[schemars(rename = "SandboxSupport")]
#[cfg_attr(test, derive(ts_rs::TS), ts(rename = "SandboxSupport"))]
pub struct Support {
    /// Agent-named files are opened with openat2 (else an `O_NOFOLLOW` walk, as safe, slower).
    pub openat2: bool,
    /// The Landlock ABI version, when Landlock is enforced.
    pub landlock_abi: Option<u8>,
    /// The seccomp filter (no Unix-domain sockets) is applied.
    pub seccomp: bool,
    /// Each command gets a PID namespace: its init's exit kills every descendant.
    pub pid_namespace: bool,
    /// As root, each command joins a pids cgroup (a process cap; the gateway kills what is left).
    pub pids_cgroup: bool,
    /// A network namespace can be made (the network can be cut).
    pub network_namespace: bool,
}

impl Support {
    /// Confined means files (Landlock), sockets (seccomp) and descendants
    /// (PID namespace or pids cgroup) are all held.
    pub fn confined(&self) -> bool {
        self.landlock_abi.is_some() && self.seccomp && (self.pid_namespace || self.pids_cgroup)
    }

    /// One line for `/health` and `onyx doctor`: each part, held or not.
    pub fn describe(&self) -> String {
        let files = match self.landlock_abi {
            Some(abi) => format!(
                "Landlock ABI {abi} (workspace read-write, system directories and parts of /etc read-only)"
            ),
            None => "no Landlock (Linux 5.13+ with landlock in lsm=)".into(),
        };
        let sockets = if self.seccomp {
            "seccomp (no Unix sockets)"
        } else {
            "no seccomp filter"
        };
        let processes = match (self.pid_namespace, self.pids_cgroup) {
            (true, _) => "PID namespace (every descendant ends with the command)",
            (false, true) => "pids cgroup (every descendant is killed after the command)",
            (false, false) => "no PID namespace or cgroup (background processes can outlive a command)",
        };
        let network = if self.network_namespace {
            "network cut unless tools.exec.network"
        } else {
            "no network namespace: exec is refused unless tools.exec.network"
        };
        let opens = if self.openat2 {
            "file tools: openat2"
        } else {
            "file tools: O_NOFOLLOW walk (no openat2)"
        };
        let parts = [
            files.as_str(),
            sockets,
            processes,
            network,
            opens,
            "resource limits",
            "allow-listed environment",
        ];
        if self.confined() {
            format!("confined: {}", parts.join(", "))
        } else {
            format!(
                "UNCONFINED: {}; set tools.exec.requireSandbox: true to refuse exec here",
                parts.join(", ")
            )
        }
    }
}

/// Why a command must not run here: `require` is set and `support` cannot
/// confine it, or the network must be cut and cannot be.
pub fn refusal(support: Support, require: bool, network: bool) -> Option<String> {
    if require && !support.confined() {
        return Some(format!(
            "exec is refused: {} (tools.exec.requireSandbox is true)",
            support.describe()
        ));
    }
    (!network && !support.network_namespace).then(|| {
        "exec is refused: the network cannot be cut here (no network namespace); \
         set tools.exec.network: true to run commands with the network"
            .to_string()
    })
}

/// What this kernel offers (probed once).
pub fn support() -> Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    *SUPPORT.get_or_init(|| {
        #[cfg(target_os = "linux")]
        {
            enter::probe()
        }
        #[cfg(not(target_os = "linux"))]
        {
            Support {
                openat2: false,
                landlock_abi: None,
                seccomp: false,
                pid_namespace: false,
                pids_cgroup: false,
                network_namespace: false,
            }
        }
    })
}

/// The helper's arguments for `policy`, then `--`, then the command.
pub fn helper_args(policy: &Policy, program: &str, args: &[&str]) -> Vec<String> {
    let mut out = vec![
        SUBCOMMAND.to_string(),
        tether::PARENT_FLAG.into(),
        std::process::id().to_string(),
        "--workspace".into(),
        path_arg(&policy.workspace),
    ];
    for path in &policy.read_only {
        out.push("--read".into());
        out.push(path_arg(path));
    }
    for hidden in &policy.hidden {
        out.push("--hide".into());
        out.push(path_arg(hidden));
    }
    if policy.network {
        out.push("--network".into());
    }
    if policy.require {
        out.push("--require".into());
    }
    let l = policy.limits;
    for (flag, value) in [
        ("--cpu-seconds", l.cpu_seconds),
        ("--memory-bytes", l.memory_bytes),
        ("--processes", l.processes),
        ("--file-bytes", l.file_bytes),
    ] {
        out.push(flag.into());
        out.push(value.to_string());
    }
    out.push("--".into());
    out.push(program.into());
    out.extend(args.iter().map(|a| a.to_string()));
    out
}

fn path_arg(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// Applies `policy` to this process and execs `command`; returns only on
/// failure (the exit code to use). Call it before any thread is started.
pub fn enter_and_exec(policy: &Policy, command: &[String], stage: Stage) -> u8 {
    #[cfg(target_os = "linux")]
    {
        enter::enter_and_exec(policy, command, stage)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = stage;
        if policy.require {
            eprintln!("onyx sandbox-exec: no sandbox on this platform and requireSandbox is set");
            return 126;
        }
        env::exec(command)
    }
}

/// Ends what is left of a command started as process group `pgid` (its
/// background children too) and removes its pids cgroup.
pub fn reap(pgid: u32) {
    #[cfg(target_os = "linux")]
    processes::reap(pgid);
    #[cfg(not(target_os = "linux"))]
    let _ = pgid;
}

#[cfg(test)]
mod tests {
    use super::*;

    const NONE: Support = Support {
        openat2: false,
        landlock_abi: None,
        seccomp: false,
        pid_namespace: false,
        pids_cgroup: false,
        network_namespace: false,
    };
    const FULL: Support = Support {
        openat2: true,
        landlock_abi: Some(6),
        seccomp: true,
        pid_namespace: true,
        pids_cgroup: false,
        network_namespace: true,
    };

    #[test]
    fn an_unconfined_kernel_is_reported_and_refused_when_required() {
        assert!(!NONE.confined());
        assert!(NONE.describe().starts_with("UNCONFINED"), "{}", NONE.describe());
        let refused = refusal(NONE, true, true).unwrap();
        assert!(
            refused.contains("requireSandbox") && refused.contains("UNCONFINED"),
            "{refused}"
        );
        assert_eq!(
            refusal(NONE, false, true),
            None,
            "reported, but runs with the network allowed"
        );
        let uncut = refusal(NONE, false, false).unwrap();
        assert!(uncut.contains("network cannot be cut"), "{uncut}");
        assert_eq!(refusal(FULL, true, false), None);
        let text = FULL.describe();
        for part in [
            "Landlock ABI 6",
            "seccomp",
            "PID namespace",
            "network cut",
            "openat2",
        ] {
            assert!(text.contains(part), "{part}: {text}");
        }
        let no_seccomp = Support {
            seccomp: false,
            ..FULL
        };
        assert!(!no_seccomp.confined() && no_seccomp.describe().starts_with("UNCONFINED"));
    }

    #[test]
    fn helper_arguments_carry_the_policy_then_the_command() {
        let policy = Policy {
            workspace: "/w".into(),
            read_only: vec!["/opt/tool".into()],
            hidden: vec!["/data".into()],
            network: false,
            require: true,
            limits: Limits::default(),
        };
        let args = helper_args(&policy, "sh", &["-c", "echo hi"]);
        let dash = args.iter().position(|a| a == "--").unwrap();
        assert_eq!(&args[dash + 1..], ["sh", "-c", "echo hi"]);
        assert!(args.contains(&"--require".to_string()) && !args.contains(&"--network".to_string()));
        assert!(args.windows(2).any(|w| w == ["--read", "/opt/tool"]));
        assert_eq!(args[0], SUBCOMMAND);
        assert_eq!(
            args[1..3],
            [tether::PARENT_FLAG.to_string(), std::process::id().to_string()]
        );
    }
}
