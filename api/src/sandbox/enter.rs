//! The helper side on Linux: what `onyx sandbox-exec` applies to itself
//! (still single-threaded) before the command runs. In two stages where a
//! PID namespace can be made: the outer helper joins the pids cgroup (root)
//! and unshares the namespaces ([`super::processes`]), then starts itself
//! again as the namespace's init (`--init`), which mounts a private `/proc`,
//! sets the resource limits, applies the Landlock ruleset and the seccomp
//! filter and execs the command: when the command (now the init) ends, the
//! kernel kills everything it left behind, `setsid` and double forks
//! included. Where no PID namespace can be made, the one helper does it all
//! and execs. Both stages die with their parent (the gateway, then the outer
//! helper: [`super::tether`]), so a gateway killed without its clean-up
//! takes the namespace with it. Also the probe of what the kernel offers.

use std::ffi::OsString;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, Scope, path_beneath_rules,
};
use nix::sys::resource::{Resource, setrlimit};

use super::processes::{self, Namespaces};
use super::{Policy, Stage, Support};

/// The newest ABI this build asks for (older kernels get what they have).
const ABI_WANTED: ABI = ABI::V6;

/// Device files every shell expects to write to.
const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"];
const DEVICES_READ: &[&str] = &["/dev/urandom", "/dev/random"];

/// Set by the probe: each stage reports what it could apply (lines on
/// stderr starting with [`PROBE_REPORT`]) instead of refusing.
const PROBE: &str = "ONYX_SANDBOX_PROBE";
const PROBE_REPORT: &str = "onyx-sandbox-probe:";

/// What the helpers managed to apply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Applied {
    pid_namespace: bool,
    pids_cgroup: bool,
    network_cut: bool,
    seccomp: bool,
    landlock: bool,
}

fn report(parts: &[(&str, bool)]) {
    let words: Vec<String> = parts
        .iter()
        .map(|(name, held)| format!("{name}={held}"))
        .collect();
    eprintln!("{PROBE_REPORT} {}", words.join(" "));
}

impl Applied {
    /// Every report line of `text` (one per stage), merged.
    fn parse(text: &str) -> Option<Self> {
        let lines: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix(PROBE_REPORT))
            .collect();
        if lines.is_empty() {
            return None;
        }
        let flag = |name: &str| {
            let word = format!("{name}=true");
            lines.iter().any(|l| l.split_whitespace().any(|w| w == word))
        };
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
    processes::reap(pid);
    Applied::parse(&String::from_utf8_lossy(&output?.stderr))
}

fn probing() -> bool {
    std::env::var_os(PROBE).is_some()
}

fn refuse(message: &str) -> u8 {
    eprintln!("onyx sandbox-exec: refused: {message}");
    126
}

pub(super) fn enter_and_exec(policy: &Policy, command: &[String], stage: Stage) -> u8 {
    match stage {
        Stage::Outer { gateway } => {
            if let Some(gateway) = gateway
                && let Err(message) = super::tether::tie_to(gateway)
            {
                return refuse(&message);
            }
            outer(policy, command)
        }
        Stage::Init { proc } => {
            // The outer helper's death (itself on the gateway's) ends the
            // namespace. Its parent is outside the namespace, where `getppid`
            // reads 0: nothing to check.
            if let Err(err) = processes::die_with_parent(None) {
                return refuse(&format!("cannot tie the command to the helper's life: {err}"));
            }
            let proc = proc && processes::mount_private_proc();
            if let Err(message) = processes::drop_kept_capabilities() {
                return refuse(&message);
            }
            confine_and_exec(policy, command, proc)
        }
    }
}

fn outer(policy: &Policy, command: &[String]) -> u8 {
    // The cgroup first: a user namespace would take the right to join it.
    let pids_cgroup = processes::join_pids_cgroup(policy.limits.processes);
    let namespaces = processes::unshare_namespaces(policy.network);
    if probing() {
        report(&[
            ("pid_namespace", namespaces.pid),
            ("pids_cgroup", pids_cgroup),
            ("network_cut", namespaces.network_cut),
        ]);
    } else if let Err(message) = check_outer(policy, pids_cgroup, namespaces) {
        return refuse(&message);
    }
    if namespaces.pid {
        run_init(namespaces.private_mounts && processes::keep_mount_capability())
    } else {
        confine_and_exec(policy, command, false)
    }
}

/// Refuses what must not run: a network that could not be cut (unless
/// allowed); with `requireSandbox`, descendants that nothing would end.
fn check_outer(policy: &Policy, pids_cgroup: bool, namespaces: Namespaces) -> Result<(), String> {
    if !policy.network && !namespaces.network_cut {
        return Err(
            "the network cannot be cut here (no network namespace); set tools.exec.network: true to run commands with it"
                .into(),
        );
    }
    if policy.require && !namespaces.pid && !pids_cgroup {
        return Err(
            "no PID namespace or pids cgroup can be made here (background processes would outlive the command) and tools.exec.requireSandbox is true"
                .into(),
        );
    }
    Ok(())
}

/// This binary again, with the same arguments plus `--init`, as the PID
/// namespace's init; waits for it and exits as it did.
fn run_init(private_mounts: bool) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    let Ok(exe) = std::env::current_exe() else {
        return refuse("cannot find the onyx binary for the namespace's init");
    };
    let mut args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let flag = if private_mounts {
        "--init-with-proc"
    } else {
        "--init"
    };
    args.insert(1, flag.into());
    match std::process::Command::new(exe).args(args).status() {
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(1),
            (None, Some(signal)) => u8::try_from(128 + (signal & 0x7f)).unwrap_or(1),
            (None, None) => 1,
        },
        Err(err) => refuse(&format!("cannot start the namespace's init: {err}")),
    }
}

/// Limits, Landlock and seccomp on this process, then the command.
fn confine_and_exec(policy: &Policy, command: &[String], proc: bool) -> u8 {
    if let Err(message) = limit(policy) {
        return refuse(&message);
    }
    let landlock = match landlock(policy, proc) {
        Ok(status) => status != RulesetStatus::NotEnforced,
        Err(err) => return refuse(&format!("cannot apply the Landlock rules: {err}")),
    };
    let seccomp = super::seccomp::deny_unix_sockets().is_ok();
    if probing() {
        report(&[("landlock", landlock), ("seccomp", seccomp)]);
    } else if let Err(message) = check_confined(policy, landlock, seccomp) {
        return refuse(&message);
    }
    super::env::exec(command)
}

/// With `requireSandbox`: the files and sockets rules must hold.
fn check_confined(policy: &Policy, landlock: bool, seccomp: bool) -> Result<(), String> {
    let missing: Vec<&str> = [(!landlock, "Landlock"), (!seccomp, "the seccomp filter")]
        .into_iter()
        .filter_map(|(missing, what)| missing.then_some(what))
        .collect();
    if policy.require && !missing.is_empty() {
        return Err(format!(
            "{} not available here and tools.exec.requireSandbox is true",
            missing.join(" and ")
        ));
    }
    Ok(())
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

/// `proc`: a private `/proc` is mounted (only the sandbox's processes):
/// readable too.
fn landlock(policy: &Policy, proc: bool) -> Result<RulesetStatus, landlock::RulesetError> {
    let abi = ABI_WANTED;
    let readable = super::paths::readable(&super::paths::system_paths(&policy.read_only), &policy.hidden);
    let own_proc: &[&str] = if proc { &["/proc"] } else { &[] };
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
        .add_rules(path_beneath_rules(own_proc, AccessFs::from_read(abi)))?
        .add_rules(path_beneath_rules(DEVICES_READ, AccessFs::from_read(abi)))?
        .add_rules(path_beneath_rules(DEVICES, AccessFs::from_all(abi)))?
        .add_rules(path_beneath_rules([&policy.workspace], AccessFs::from_all(abi)))?
        .restrict_self()?;
    Ok(status.ruleset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stages_reports_merge() {
        let stderr = format!(
            "some warning\n{PROBE_REPORT} pid_namespace=true pids_cgroup=false network_cut=true\n{PROBE_REPORT} landlock=true seccomp=true\n"
        );
        let applied = Applied::parse(&stderr).unwrap();
        assert_eq!(
            applied,
            Applied {
                pid_namespace: true,
                pids_cgroup: false,
                network_cut: true,
                seccomp: true,
                landlock: true,
            }
        );
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
        let none = Namespaces::default();
        let err = check_outer(&policy(false, false), false, none).unwrap_err();
        assert!(err.contains("network cannot be cut"), "{err}");
        assert!(
            check_outer(&policy(true, false), false, none).is_ok(),
            "unrequired, networked: runs"
        );
        let err = check_outer(&policy(true, true), false, none).unwrap_err();
        assert!(err.contains("PID namespace"), "{err}");
        assert!(
            check_outer(&policy(true, true), true, none).is_ok(),
            "root's cgroup ends them"
        );
        let err = check_confined(&policy(true, true), false, false).unwrap_err();
        assert!(err.contains("Landlock") && err.contains("seccomp"), "{err}");
        assert!(check_confined(&policy(true, false), false, false).is_ok());
    }
}
