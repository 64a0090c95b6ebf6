//! The helper side on Linux: what `onyx sandbox-exec` applies to itself
//! (still single-threaded) before it starts the command: the pids cgroup
//! (root), user, PID and network namespaces, the resource limits, the
//! Landlock ruleset and the seccomp filter. With a PID namespace the command
//! is the namespace's init, a child of the helper: when it ends, the kernel
//! kills everything it left behind (`setsid` and double forks included).
//! Also the probe of what the kernel offers, and the clean-up after a command.

use std::path::Path;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, Scope, path_beneath_rules,
};
use nix::sched::{CloneFlags, unshare};
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

/// Set by the probe: the helper reports what it could apply (one line on
/// stderr starting with [`PROBE_REPORT`]) instead of refusing.
const PROBE: &str = "ONYX_SANDBOX_PROBE";
const PROBE_REPORT: &str = "onyx-sandbox-probe:";

/// What the helper managed to apply to itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Applied {
    pid_namespace: bool,
    pids_cgroup: bool,
    network_cut: bool,
    seccomp: bool,
    landlock: bool,
}

impl Applied {
    fn report(&self) -> String {
        format!(
            "{PROBE_REPORT} pid_namespace={} pids_cgroup={} network_cut={} seccomp={} landlock={}",
            self.pid_namespace, self.pids_cgroup, self.network_cut, self.seccomp, self.landlock
        )
    }

    fn parse(text: &str) -> Option<Self> {
        let line = text.lines().find_map(|l| l.strip_prefix(PROBE_REPORT))?;
        let flag = |name: &str| line.split_whitespace().any(|w| w == format!("{name}=true"));
        Some(Self {
            pid_namespace: flag("pid_namespace"),
            pids_cgroup: flag("pids_cgroup"),
            network_cut: flag("network_cut"),
            seccomp: flag("seccomp"),
            landlock: flag("landlock"),
        })
    }
}

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
    let applied = probe_helper().unwrap_or_default();
    Support {
        openat2: super::beneath::openat2_available(),
        landlock_abi: landlock_abi.filter(|_| applied.landlock),
        seccomp: applied.seccomp,
        pid_namespace: applied.pid_namespace,
        pids_cgroup: applied.pids_cgroup,
        network_namespace: applied.network_cut,
    }
}

/// Runs the helper once, network cut, on `true`: what it can really apply
/// here (root in a container may lack the capability; unprivileged user
/// namespaces may be off).
fn probe_helper() -> Option<Applied> {
    let exe = std::env::current_exe().ok()?;
    let policy = Policy {
        workspace: std::env::temp_dir(),
        read_only: Vec::new(),
        hidden: Vec::new(),
        network: false,
        require: false,
        limits: super::Limits::default(),
    };
    let child = std::process::Command::new(exe)
        .args(super::helper_args(&policy, "true", &[]))
        .env_clear()
        .envs(super::allowed_env())
        .env(PROBE, "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .ok()?;
    let pid = child.id();
    let output = child.wait_with_output().ok();
    reap(pid);
    Applied::parse(&String::from_utf8_lossy(&output?.stderr))
}

pub(super) fn enter_and_exec(policy: &Policy, command: &[String]) -> u8 {
    let probing = std::env::var_os(PROBE).is_some();
    let applied = match confine(policy) {
        Ok(applied) => applied,
        Err(message) => {
            eprintln!("onyx sandbox-exec: {message}");
            return 126;
        }
    };
    if probing {
        eprintln!("{}", applied.report());
    } else if let Err(message) = fail_closed(policy, &applied) {
        eprintln!("onyx sandbox-exec: {message}");
        return 126;
    }
    if applied.pid_namespace {
        run_as_init(command)
    } else {
        super::env::exec(command)
    }
}

/// Refuses what must not run: a network that could not be cut (unless
/// allowed), and with `requireSandbox` anything less than full confinement.
fn fail_closed(policy: &Policy, applied: &Applied) -> Result<(), String> {
    if !policy.network && !applied.network_cut {
        return Err(
            "refused: the network cannot be cut here (no network namespace); set tools.exec.network: true to run commands with it"
                .into(),
        );
    }
    if policy.require {
        let missing: Vec<&str> = [
            (!applied.landlock, "Landlock"),
            (!applied.seccomp, "the seccomp filter"),
            (
                !applied.pid_namespace && !applied.pids_cgroup,
                "a PID namespace or pids cgroup",
            ),
        ]
        .into_iter()
        .filter_map(|(missing, what)| missing.then_some(what))
        .collect();
        if !missing.is_empty() {
            return Err(format!(
                "refused: {} not available here and tools.exec.requireSandbox is true",
                missing.join(", ")
            ));
        }
    }
    Ok(())
}

fn confine(policy: &Policy) -> Result<Applied, String> {
    // The cgroup first: a user namespace would take the right to join it.
    let pids_cgroup = join_pids_cgroup(policy.limits.processes);
    let (pid_namespace, network_cut) = unshare_namespaces(policy.network);
    limit(policy)?;
    let status = landlock(policy).map_err(|e| format!("cannot apply the Landlock rules: {e}"))?;
    let seccomp = match super::seccomp::deny_unix_sockets() {
        Ok(()) => true,
        Err(err) if policy.require => return Err(format!("cannot apply the seccomp filter: {err}")),
        Err(_) => false,
    };
    Ok(Applied {
        pid_namespace,
        pids_cgroup,
        network_cut,
        seccomp,
        landlock: status != RulesetStatus::NotEnforced,
    })
}

/// New PID and (unless `network`) network namespaces: directly where this
/// process may (root), else inside a new user namespace that maps this
/// user to itself. Which of the two it got.
fn unshare_namespaces(network: bool) -> (bool, bool) {
    let net = if network {
        CloneFlags::empty()
    } else {
        CloneFlags::CLONE_NEWNET
    };
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    let attempts = [
        (CloneFlags::CLONE_NEWPID | net, true),
        (CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWPID | net, true),
        (net, false),
        (CloneFlags::CLONE_NEWUSER | net, false),
    ];
    for (flags, pid) in attempts {
        if flags.is_empty() || unshare(flags).is_err() {
            continue;
        }
        if flags.contains(CloneFlags::CLONE_NEWUSER) {
            map_ids(uid.as_raw(), gid.as_raw());
        }
        return (pid, !network);
    }
    (false, false)
}

/// Maps the user and group to themselves in a new user namespace (without
/// it they read as the overflow id); supplementary groups are dropped.
fn map_ids(uid: u32, gid: u32) {
    let _ = std::fs::write("/proc/self/setgroups", "deny");
    let _ = std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1"));
    let _ = std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1"));
}

/// Starts the command as the PID namespace's init and waits for it; its
/// exit ends every process left in the namespace.
fn run_as_init(command: &[String]) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    let Some((program, args)) = command.split_first() else {
        eprintln!("onyx sandbox-exec: no command given");
        return 2;
    };
    match std::process::Command::new(program).args(args).status() {
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(1),
            (None, Some(signal)) => u8::try_from(128 + (signal & 0x7f)).unwrap_or(1),
            (None, None) => 1,
        },
        Err(err) => {
            eprintln!("onyx sandbox-exec: cannot run {program}: {err}");
            127
        }
    }
}

/// `RLIMIT_NPROC` never applies to root: as root, a pids cgroup caps the
/// command's processes instead (and lets the gateway kill them all when
/// no PID namespace can be made). Whether it joined one.
fn join_pids_cgroup(max: u64) -> bool {
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

fn limit(policy: &Policy) -> Result<(), String> {
    let l = policy.limits;
    for (resource, value, name) in [
        (Resource::RLIMIT_CPU, l.cpu_seconds, "CPU seconds"),
        (Resource::RLIMIT_AS, l.memory_bytes, "address space"),
        (Resource::RLIMIT_NPROC, l.processes, "processes"),
        (Resource::RLIMIT_FSIZE, l.file_bytes, "file size"),
        (Resource::RLIMIT_CORE, 0, "core files"),
    ] {
        if value == u64::MAX {
            continue; // unlimited: whatever this process has
        }
        setrlimit(resource, value, value).map_err(|e| format!("cannot limit {name}: {e}"))?;
    }
    Ok(())
}

fn landlock(policy: &Policy) -> Result<RulesetStatus, landlock::RulesetError> {
    let abi = ABI_WANTED;
    let readable = super::paths::readable(&super::paths::system_paths(&policy.read_only), &policy.hidden);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_report_round_trips() {
        let applied = Applied {
            pid_namespace: true,
            pids_cgroup: false,
            network_cut: true,
            seccomp: true,
            landlock: true,
        };
        let stderr = format!("some warning\n{}\n", applied.report());
        assert_eq!(Applied::parse(&stderr), Some(applied));
        assert_eq!(Applied::parse("nothing"), None);
    }

    #[test]
    fn requirements_fail_closed() {
        let policy = |network, require| Policy {
            workspace: "/w".into(),
            read_only: Vec::new(),
            hidden: Vec::new(),
            network,
            require,
            limits: super::super::Limits::default(),
        };
        let none = Applied::default();
        let err = fail_closed(&policy(false, false), &none).unwrap_err();
        assert!(err.contains("network cannot be cut"), "{err}");
        assert!(fail_closed(&policy(true, false), &none).is_ok(), "unrequired, networked: runs");
        let err = fail_closed(&policy(true, true), &none).unwrap_err();
        assert!(
            err.contains("Landlock") && err.contains("seccomp") && err.contains("PID namespace"),
            "{err}"
        );
        let cgroup_only = Applied {
            pids_cgroup: true,
            seccomp: true,
            landlock: true,
            ..none
        };
        assert!(fail_closed(&policy(true, true), &cgroup_only).is_ok());
    }
}
