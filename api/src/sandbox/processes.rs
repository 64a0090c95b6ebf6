//! The processes of a sandboxed command: the namespaces the helper
//! unshares (PID, mount and network; inside a user namespace when not
//! root), the private `/proc` its init mounts, the pids cgroup root joins,
//! and the clean-up after a command.

use std::path::Path;

use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};

/// Where the pids cgroups of commands live (cgroup v1 here, v2 where unified).
const PIDS_CGROUP_ROOTS: &[&str] = &["/sys/fs/cgroup/pids", "/sys/fs/cgroup"];
const CGROUP_PREFIX: &str = "onyx-exec-";

/// The namespaces this process now lives in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Namespaces {
    /// Its children start in a new PID namespace.
    pub pid: bool,
    /// A mount namespace of its own, with every mount made private (so a
    /// `/proc` mounted in it is seen nowhere else).
    pub private_mounts: bool,
    pub network_cut: bool,
}

/// New PID, mount and (unless `network`) network namespaces: directly where
/// this process may (root), else inside a new user namespace that maps this
/// user to itself; where no PID namespace can be made, the network alone.
pub(super) fn unshare_namespaces(network: bool) -> Namespaces {
    let net = if network {
        CloneFlags::empty()
    } else {
        CloneFlags::CLONE_NEWNET
    };
    let pid = CloneFlags::CLONE_NEWPID | CloneFlags::CLONE_NEWNS;
    let user = CloneFlags::CLONE_NEWUSER;
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    for flags in [pid | net, user | pid | net, net, user | net] {
        if flags.is_empty() || unshare(flags).is_err() {
            continue;
        }
        if flags.contains(user) {
            map_ids(uid.as_raw(), gid.as_raw());
        }
        let private_mounts = flags.contains(CloneFlags::CLONE_NEWNS)
            && mount(
                None::<&str>,
                "/",
                None::<&str>,
                MsFlags::MS_REC | MsFlags::MS_PRIVATE,
                None::<&str>,
            )
            .is_ok();
        return Namespaces {
            pid: flags.contains(CloneFlags::CLONE_NEWPID),
            private_mounts,
            network_cut: !network,
        };
    }
    Namespaces::default()
}

/// Maps the user and group to themselves in a new user namespace (without
/// it they read as the overflow id); supplementary groups are dropped.
fn map_ids(uid: u32, gid: u32) {
    let _ = std::fs::write("/proc/self/setgroups", "deny");
    let _ = std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1"));
    let _ = std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1"));
}

/// Keeps `CAP_SYS_ADMIN` (over the new namespaces) across the exec of the
/// init, which needs it to mount `/proc`: in a user namespace whose user is
/// not root, an exec would drop it. The init drops it again
/// ([`drop_kept_capabilities`]) before the command.
pub(super) fn keep_mount_capability() -> bool {
    use rustix::thread::{
        CapabilitySet, capabilities, configure_capability_in_ambient_set, set_capabilities,
    };
    let Ok(mut sets) = capabilities(None) else {
        return false;
    };
    sets.inheritable |= CapabilitySet::SYS_ADMIN;
    set_capabilities(None, sets).is_ok()
        && configure_capability_in_ambient_set(CapabilitySet::SYS_ADMIN, true).is_ok()
}

/// Clears what [`keep_mount_capability`] kept: the command execs without it.
pub(super) fn drop_kept_capabilities() -> Result<(), String> {
    use rustix::thread::{CapabilitySet, capabilities, clear_ambient_capability_set, set_capabilities};
    clear_ambient_capability_set().map_err(|e| format!("cannot clear the ambient capabilities: {e}"))?;
    let mut sets = capabilities(None).map_err(|e| format!("cannot read the capabilities: {e}"))?;
    sets.inheritable = CapabilitySet::empty();
    set_capabilities(None, sets).map_err(|e| format!("cannot clear the inheritable capabilities: {e}"))
}

/// Asks the kernel to SIGKILL this new process when its parent ends, then
/// checks that the parent (`expected`, where this process can see it) has
/// not ended already, before the request was made. Runs between fork and
/// exec: system calls only, no allocation.
pub(super) fn die_with_parent(expected: Option<u32>) -> std::io::Result<()> {
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)?;
    match expected {
        Some(parent) if nix::unistd::getppid().as_raw().cast_unsigned() != parent => {
            Err(nix::errno::Errno::ESRCH.into())
        }
        _ => Ok(()),
    }
}

/// Mounts a `/proc` of the PID namespace this process is the init of:
/// programs read their own `/proc/self` (a runtime's stack bounds from
/// `maps`), and only the sandbox's processes are in it, not the gateway's
/// (whose `environ` holds its credentials). Whether it could.
pub(super) fn mount_private_proc() -> bool {
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    mount(Some("proc"), "/proc", Some("proc"), flags, None::<&str>).is_ok()
}

/// `RLIMIT_NPROC` never applies to root: as root, a pids cgroup caps the
/// command's processes instead (and lets the gateway kill them all when
/// no PID namespace can be made). Whether it joined one.
pub(super) fn join_pids_cgroup(max: u64) -> bool {
    if !nix::unistd::geteuid().is_root() {
        return false;
    }
    let pid = std::process::id();
    for root in PIDS_CGROUP_ROOTS {
        let root = Path::new(root);
        if !root.join("pids.max").exists() && !root.join("cgroup.procs").exists() {
            continue;
        }
        let dir = root.join(format!("{CGROUP_PREFIX}{pid}"));
        let joined = std::fs::create_dir_all(&dir).is_ok()
            && std::fs::write(dir.join("pids.max"), pids_max(max)).is_ok()
            && std::fs::write(dir.join("cgroup.procs"), pid.to_string()).is_ok();
        if joined {
            return true;
        }
        let _ = std::fs::remove_dir(&dir);
    }
    false
}

fn pids_max(max: u64) -> String {
    if max == u64::MAX {
        "max".into()
    } else {
        max.to_string()
    }
}

/// Kills the process group `pgid` and whatever is left in its pids cgroup,
/// then removes the cgroup (and any left by helpers whose process is gone,
/// such as those of a gateway that crashed).
pub(super) fn reap(pgid: u32) {
    use nix::sys::signal::{Signal, kill, killpg};
    use nix::unistd::Pid;
    let Ok(raw) = i32::try_from(pgid) else { return };
    let _ = killpg(Pid::from_raw(raw), Signal::SIGKILL);
    for root in PIDS_CGROUP_ROOTS {
        let dir = Path::new(root).join(format!("{CGROUP_PREFIX}{pgid}"));
        if !dir.exists() {
            continue;
        }
        for _ in 0..50 {
            let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
            let pids: Vec<i32> = procs.lines().filter_map(|l| l.trim().parse().ok()).collect();
            if pids.is_empty() {
                break;
            }
            for pid in pids {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        // The last ones may take a moment to leave the cgroup.
        for _ in 0..50 {
            if std::fs::remove_dir(&dir).is_ok() || !dir.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        sweep(Path::new(root));
    }
}

/// Removes the empty cgroups of helpers that no longer run. (One whose
/// helper still runs is left alone: it may be about to join it.)
fn sweep(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(CGROUP_PREFIX)) else {
            continue;
        };
        if !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}
