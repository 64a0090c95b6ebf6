//! The `onyx` binary; see `onyx --help`.

use std::os::unix::process::CommandExt;

/// mimalloc instead of glibc's malloc in release builds: at saturation
/// glibc's allocator took a fifth of the gateway's CPU (bench/README.md,
/// "Where the time goes"). Debug builds (the tests) keep glibc's: mimalloc
/// is compiled unoptimized there and slowed the long tests.
#[cfg(not(debug_assertions))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Read by mimalloc when the process starts, before `main` can set anything.
const EAGER_COMMIT: &str = "MIMALLOC_ARENA_EAGER_COMMIT";

fn main() -> std::process::ExitCode {
    if cfg!(not(debug_assertions)) && std::env::var_os(EAGER_COMMIT).is_none() {
        commit_memory_as_used();
    }
    onyx::cli::main()
}

/// Starts this binary again with mimalloc committing arena memory as it is
/// used rather than up front: idle anonymous memory goes from ~40 MB to
/// ~11 MB at the same throughput (bench/README.md). Returns only if the
/// binary cannot be started again; it then runs as it is.
fn commit_memory_as_used() {
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let mut args = std::env::args_os();
    let mut command = std::process::Command::new(exe);
    if let Some(name) = args.next() {
        command.arg0(name);
    }
    let _ = command.args(args).env(EAGER_COMMIT, "0").exec();
}
