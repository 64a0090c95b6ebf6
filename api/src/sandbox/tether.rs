//! Children that die with the gateway. A `kill -9` of the gateway, or the
//! OOM killer, runs none of its clean-up (`KillOnDrop`, the reaping of a
//! command's process group), so what it started would live on, reparented
//! to init. Each child therefore asks the kernel for a SIGKILL when its
//! parent ends (`PR_SET_PDEATHSIG`), first thing after it starts: the
//! sandbox helper ([`super::helper_args`] passes the gateway's PID), and,
//! for what runs unconfined (MCP servers over stdio, the vendors'
//! sign-ins), `onyx tethered`, which does only that and execs
//! ([`command`]). The child then checks that its parent is still the
//! gateway: if the gateway ended before the request was made, nothing
//! would send the signal.
//!
//! The kernel sends the signal when the *thread* that spawned the child
//! ends: spawn from async tasks (a runtime worker lives as long as the
//! runtime), never from `spawn_blocking`, whose threads end when idle.

use std::path::{Path, PathBuf};

/// The name of the subcommand.
pub const SUBCOMMAND: &str = "tethered";
/// The flag carrying the gateway's PID, for both helpers.
pub const PARENT_FLAG: &str = "--parent";

/// A command running `program` through `onyx tethered` (add its arguments
/// with `.args`), or `program` itself when it cannot be found: its spawn
/// then fails with the usual error, naming it.
pub fn command(program: &str, cwd: Option<&Path>) -> tokio::process::Command {
    match (std::env::current_exe(), findable(program, cwd)) {
        (Ok(exe), true) => {
            let mut cmd = tokio::process::Command::new(exe);
            cmd.args([
                SUBCOMMAND,
                PARENT_FLAG,
                &std::process::id().to_string(),
                "--",
                program,
            ]);
            cmd
        }
        _ => tokio::process::Command::new(program),
    }
}

/// Whether `program` names an executable (relative to `cwd` when it is a
/// relative path) or one on `PATH`.
fn findable(program: &str, cwd: Option<&Path>) -> bool {
    if program.contains('/') {
        let path = match cwd {
            Some(dir) => dir.join(program),
            None => Path::new(program).to_path_buf(),
        };
        return is_executable(&path);
    }
    on_path(program).is_some()
}

/// The executable `program` (a bare name) found on this process's `PATH`.
pub(crate) fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `onyx tethered`: ties this process to `gateway`'s life, then execs `command`.
pub fn run(gateway: u32, command: &[String]) -> u8 {
    if let Err(message) = tie_to(gateway) {
        eprintln!("onyx {SUBCOMMAND}: {message}");
        return 126;
    }
    super::env::exec(command)
}

/// Asks for SIGKILL when the parent ends, and checks the parent is `gateway`.
pub(super) fn tie_to(gateway: u32) -> Result<(), String> {
    #[cfg(target_os = "linux")]
    {
        super::processes::die_with_parent(Some(gateway))
            .map_err(|err| format!("cannot tie the command to the gateway's life: {err}"))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = gateway;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_findable_program_goes_through_the_tether_and_a_missing_one_does_not() {
        let cmd = command("sh", None);
        let args: Vec<_> = cmd.as_std().get_args().collect();
        assert_eq!(args[0], SUBCOMMAND);
        assert_eq!(args[1], PARENT_FLAG);
        assert_eq!(args[2].to_str().unwrap(), std::process::id().to_string());
        assert_eq!(&args[3..], ["--", "sh"]);
        let missing = command("no-such-program-7f3a", None);
        assert_eq!(missing.as_std().get_program(), "no-such-program-7f3a");
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            command("./server", Some(dir.path())).as_std().get_program(),
            "./server",
            "a relative path that is not there"
        );
    }

    #[test]
    fn a_child_whose_parent_is_not_the_gateway_refuses() {
        // This test's process is not its own parent.
        let err = tie_to(std::process::id()).unwrap_err();
        assert!(err.contains("gateway"), "{err}");
    }
}
