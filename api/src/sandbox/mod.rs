//! Confinement for the commands agents run (`exec`). The gateway never
//! confines itself: it starts `onyx sandbox-exec … -- sh -c CMD`, a helper
//! mode of its own binary that, single-threaded and before anything else,
//! cuts the network (a new network namespace, unless allowed), joins a pids
//! cgroup when running as root (where `RLIMIT_NPROC` does not apply), sets
//! resource limits (CPU seconds, address space, processes, file size),
//! applies a Landlock ruleset (read-write in the workspace only, read-only on
//! system directories, nothing else: not the data dir, the config or home)
//! and then execs the command. The environment is scrubbed of secrets before
//! the helper starts.
//!
//! `support()` says what this kernel offers, for `/health`, `onyx doctor`
//! and `tools.exec.requireSandbox`.

#[cfg(target_os = "linux")]
mod enter;
mod env;
mod paths;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub use env::is_secret_name;
pub use paths::SYSTEM_DIRS;

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
    /// Read-write (the agent's workspace).
    pub workspace: PathBuf,
    /// Never readable, even beneath a system directory (data dir, config file, home).
    pub hidden: Vec<PathBuf>,
    pub network: bool,
    /// Refuse to run when Landlock cannot be enforced.
    pub require: bool,
    pub limits: Limits,
}

/// What the kernel offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Support {
    /// The Landlock ABI version, when Landlock is enabled.
    pub landlock_abi: Option<u8>,
    /// Whether a network namespace can be made.
    pub network_namespace: bool,
}

impl Support {
    /// Confined means the file system rules hold (Landlock).
    pub fn confined(&self) -> bool {
        self.landlock_abi.is_some()
    }

    /// One line for `/health` and `onyx doctor`.
    pub fn describe(&self) -> String {
        match self.landlock_abi {
            Some(abi) => format!(
                "confined: Landlock ABI {abi} (workspace read-write, system directories read-only), \
                 resource limits, {}",
                if self.network_namespace {
                    "network cut unless tools.exec.network"
                } else {
                    "network NOT cut (no network namespace available)"
                }
            ),
            None => "UNCONFINED: this kernel has no Landlock (Linux 5.13+ with landlock in lsm=); \
                     exec runs with only resource limits and a scrubbed environment; \
                     set tools.exec.requireSandbox: true to refuse it"
                .into(),
        }
    }
}

/// Why a command must not run: `require` is set and `support` cannot confine it.
pub fn refusal(support: Support, require: bool) -> Option<String> {
    (require && !support.confined()).then(|| {
        format!(
            "exec is refused: {} (tools.exec.requireSandbox is true)",
            support.describe()
        )
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
                landlock_abi: None,
                network_namespace: false,
            }
        }
    })
}

/// The helper's arguments for `policy`, then `--`, then the command.
pub fn helper_args(policy: &Policy, program: &str, args: &[&str]) -> Vec<String> {
    let mut out = vec![
        SUBCOMMAND.to_string(),
        "--workspace".into(),
        path_arg(&policy.workspace),
    ];
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
pub fn enter_and_exec(policy: &Policy, command: &[String]) -> u8 {
    #[cfg(target_os = "linux")]
    {
        enter::enter_and_exec(policy, command)
    }
    #[cfg(not(target_os = "linux"))]
    {
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
    enter::reap(pgid);
    #[cfg(not(target_os = "linux"))]
    let _ = pgid;
}

#[cfg(test)]
mod tests {
    use super::*;

    const NONE: Support = Support {
        landlock_abi: None,
        network_namespace: false,
    };
    const FULL: Support = Support {
        landlock_abi: Some(6),
        network_namespace: true,
    };

    #[test]
    fn an_unconfined_kernel_is_reported_and_refused_when_required() {
        assert!(!NONE.confined());
        assert!(NONE.describe().starts_with("UNCONFINED"), "{}", NONE.describe());
        let refused = refusal(NONE, true).unwrap();
        assert!(
            refused.contains("requireSandbox") && refused.contains("UNCONFINED"),
            "{refused}"
        );
        assert_eq!(refusal(NONE, false), None, "reported, but runs");
        assert_eq!(refusal(FULL, true), None);
        assert!(FULL.describe().contains("Landlock ABI 6"), "{}", FULL.describe());
    }

    #[test]
    fn helper_arguments_carry_the_policy_then_the_command() {
        let policy = Policy {
            workspace: "/w".into(),
            hidden: vec!["/data".into()],
            network: false,
            require: true,
            limits: Limits::default(),
        };
        let args = helper_args(&policy, "sh", &["-c", "echo hi"]);
        let dash = args.iter().position(|a| a == "--").unwrap();
        assert_eq!(&args[dash + 1..], ["sh", "-c", "echo hi"]);
        assert!(args.contains(&"--require".to_string()) && !args.contains(&"--network".to_string()));
        assert_eq!(args[0], SUBCOMMAND);
    }
}
