//! The helper side on Linux: the network namespace, the pids cgroup, the
//! resource limits and the Landlock ruleset, applied to this (still
//! single-threaded) process before it execs the command. Also the probe of
//! what the kernel offers, and the clean-up after a command.

use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, Scope, path_beneath_rules,
};
use nix::sys::resource::{Resource, setrlimit};

use super::{Policy, Support};

/// The newest ABI this build asks for (older kernels get what they have).
const ABI_WANTED: ABI = ABI::V6;

/// Where the pids cgroups of commands live (cgroup v1 here, v2 where unified).
const PIDS_CGROUP_ROOTS: &[&str] = &["/sys/fs/cgroup/pids", "/sys/fs/cgroup"];
const CGROUP_PREFIX: &str = "onyx-exec-";

/// Device files every shell expects to write to.
const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"];
const DEVICES_READ: &[&str] = &["/dev/urandom", "/dev/random"];

pub(super) fn probe() -> Support {
    let landlock_abi = [ABI::V6, ABI::V5, ABI::V4, ABI::V3, ABI::V2, ABI::V1]
        .into_iter()
        .find(|abi| {
            Ruleset::default()
                .set_compatibility(CompatLevel::HardRequirement)
                .handle_access(AccessFs::from_all(*abi))
                .and_then(|r| r.create())
                .is_ok()
        })
        .map(|abi| abi as u8);
    Support {
        landlock_abi,
        network_namespace: network_namespace_works(),
    }
}

/// Runs the helper once, network cut and required, on `true`: whether a
/// network namespace can really be made here (root in a container may lack
/// the capability; unprivileged user namespaces may be off).
fn network_namespace_works() -> bool {
    let Ok(exe) = std::env::current_exe() else {
        return false;
    };
    let policy = Policy {
        workspace: std::env::temp_dir(),
        hidden: Vec::new(),
        network: false,
        require: false,
        limits: super::Limits::default(),
    };
    let child = std::process::Command::new(exe)
        .args(super::helper_args(&policy, "true", &[]))
        .env(NETWORK_REQUIRED, "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    let Ok(mut child) = child else {
        return false;
    };
    let pid = child.id();
    let ok = child.wait().is_ok_and(|status| status.success());
    reap(pid);
    ok
}

/// Set by the probe: a helper that cannot cut the network fails instead of
/// running with it.
const NETWORK_REQUIRED: &str = "ONYX_SANDBOX_PROBE";

pub(super) fn enter_and_exec(policy: &Policy, command: &[String]) -> u8 {
    if let Err(message) = confine(policy) {
        eprintln!("onyx sandbox-exec: {message}");
        return 126;
    }
    super::env::exec(command)
}

fn confine(policy: &Policy) -> Result<(), String> {
    if !policy.network
        && let Err(e) = cut_network()
    {
        // Reported by /health and doctor (the probe); refused only when confinement is required.
        if policy.require || std::env::var_os(NETWORK_REQUIRED).is_some() {
            return Err(format!(
                "cannot cut the network ({e}); set tools.exec.network: true to run with it"
            ));
        }
    }
    join_pids_cgroup(policy.limits.processes);
    limit(policy)?;
    let status = landlock(policy).map_err(|e| format!("cannot apply the Landlock rules: {e}"))?;
    if status == RulesetStatus::NotEnforced && policy.require {
        return Err(
            "refused: Landlock is not available on this kernel and tools.exec.requireSandbox is true".into(),
        );
    }
    Ok(())
}

/// A new network namespace: only a loopback interface, down.
fn cut_network() -> nix::Result<()> {
    use nix::sched::{CloneFlags, unshare};
    unshare(CloneFlags::CLONE_NEWNET)
        .or_else(|_| unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNET))
}

/// `RLIMIT_NPROC` never applies to root: as root, a pids cgroup caps the
/// command's processes instead (best effort: without one, root runs unbounded).
fn join_pids_cgroup(max: u64) {
    if !nix::unistd::geteuid().is_root() {
        return;
    }
    let pid = std::process::id();
    for root in PIDS_CGROUP_ROOTS {
        let root = Path::new(root);
        if !root.join("pids.max").exists() && !root.join("cgroup.procs").exists() {
            continue;
        }
        let dir = root.join(format!("{CGROUP_PREFIX}{pid}"));
        let joined = std::fs::create_dir_all(&dir).is_ok()
            && std::fs::write(dir.join("pids.max"), max.to_string()).is_ok()
            && std::fs::write(dir.join("cgroup.procs"), pid.to_string()).is_ok();
        if joined {
            return;
        }
        let _ = std::fs::remove_dir(&dir);
    }
}

fn limit(policy: &Policy) -> Result<(), String> {
    let l = policy.limits;
    for (resource, value, name) in [
        (Resource::RLIMIT_CPU, l.cpu_seconds, "CPU seconds"),
        (Resource::RLIMIT_AS, l.memory_bytes, "address space"),
        (Resource::RLIMIT_NPROC, l.processes, "processes"),
        (Resource::RLIMIT_FSIZE, l.file_bytes, "file size"),
        (Resource::RLIMIT_CORE, 0, "core files"),
    ] {
        setrlimit(resource, value, value).map_err(|e| format!("cannot limit {name}: {e}"))?;
    }
    Ok(())
}

fn landlock(policy: &Policy) -> Result<RulesetStatus, landlock::RulesetError> {
    let abi = ABI_WANTED;
    let roots: Vec<PathBuf> = super::SYSTEM_DIRS.iter().map(PathBuf::from).collect();
    let readable = super::paths::readable(&roots, &policy.hidden);
    // Scopes (ABI 6+): no signals to processes outside the sandbox (the
    // gateway runs as the same user), no abstract sockets outside it.
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))?
        .scope(Scope::from_all(abi))?;
    if !policy.network {
        // Beside the namespace: no TCP connect or bind at all (Landlock ABI 4+).
        ruleset = ruleset.handle_access(AccessNet::from_all(abi))?;
    }
    let status = ruleset
        .create()?
        .add_rules(path_beneath_rules(&readable, AccessFs::from_read(abi)))?
        .add_rules(path_beneath_rules(DEVICES_READ, AccessFs::from_read(abi)))?
        .add_rules(path_beneath_rules(DEVICES, AccessFs::from_all(abi)))?
        .add_rules(path_beneath_rules([&policy.workspace], AccessFs::from_all(abi)))?
        .restrict_self()?;
    Ok(status.ruleset)
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
