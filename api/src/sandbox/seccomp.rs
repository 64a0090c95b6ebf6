//! The seccomp filter a sandboxed command runs under: no Unix-domain socket
//! can be made, so no socket outside the sandbox (`docker.sock`, the user's
//! D-Bus, the SSH agent) can be connected to: Landlock up to ABI 6 does not
//! govern `connect()` on path sockets, and a network namespace does not
//! either. Everything else is allowed.
//!
//! - `socket(AF_UNIX, …)` fails with `EACCES`.
//! - `socketpair(AF_UNIX, SOCK_STREAM)` stays: it makes two connected ends
//!   and nothing else (a connected stream socket cannot `connect()` again),
//!   and programs use it for their own children (libuv's stdio pipes).
//!   Datagram and seqpacket pairs are refused, since an unconnected-style
//!   datagram socket can `sendto()` any path.
//! - `io_uring_setup` fails: io_uring's `IORING_OP_SOCKET` would make a
//!   socket without the `socket` system call the filter sees.
//! - On x86-64 the x32 numbers of the same calls are refused too (the same
//!   architecture token with bit 30 set would otherwise slip past).

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    TargetArch,
};

/// The bit x32 system call numbers carry on x86-64.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: i64 = 0x4000_0000;
/// `socket`'s type argument holds flags above the type itself.
const SOCKET_TYPE_MASK: u64 = 0xf;

fn condition(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, seccompiler::BackendError> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value)
}

fn rules() -> Result<BTreeMap<i64, Vec<SeccompRule>>, seccompiler::BackendError> {
    let unix = || condition(0, SeccompCmpOp::Eq, libc::AF_UNIX as u64);
    let of_type = |kind: i32| condition(1, SeccompCmpOp::MaskedEq(SOCKET_TYPE_MASK), kind as u64);
    let socket = vec![SeccompRule::new(vec![unix()?])?];
    let socketpair = vec![
        SeccompRule::new(vec![unix()?, of_type(libc::SOCK_DGRAM)?])?,
        SeccompRule::new(vec![unix()?, of_type(libc::SOCK_SEQPACKET)?])?,
    ];
    let mut rules = BTreeMap::new();
    #[cfg(target_arch = "x86_64")]
    {
        rules.insert(libc::SYS_socket | X32_SYSCALL_BIT, socket.clone());
        rules.insert(libc::SYS_socketpair | X32_SYSCALL_BIT, socketpair.clone());
        rules.insert(libc::SYS_io_uring_setup | X32_SYSCALL_BIT, Vec::new());
    }
    rules.insert(libc::SYS_socket, socket);
    rules.insert(libc::SYS_socketpair, socketpair);
    rules.insert(libc::SYS_io_uring_setup, Vec::new());
    Ok(rules)
}

/// Installs the filter on this thread (and what it starts); the error says why it could not.
pub(super) fn deny_unix_sockets() -> Result<(), String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())?;
    let rules = rules().map_err(|e| e.to_string())?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EACCES as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    let program = BpfProgram::try_from(filter).map_err(|e| e.to_string())?;
    seccompiler::apply_filter(&program).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_compiles_for_this_architecture() {
        let arch = TargetArch::try_from(std::env::consts::ARCH).unwrap();
        let filter = SeccompFilter::new(
            rules().unwrap(),
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EACCES as u32),
            arch,
        )
        .unwrap();
        assert!(!BpfProgram::try_from(filter).unwrap().is_empty());
    }
}
