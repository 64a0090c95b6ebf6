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
/// Whether library errors (`anyhow`) capture a backtrace; with only
/// `RUST_BACKTRACE=1` set they do, and SurrealDB makes such errors in its
/// normal work (a key that exists already), so every one cost a stack walk.
const LIBRARY_BACKTRACES: &str = "RUST_LIB_BACKTRACE";

fn main() -> std::process::ExitCode {
    if cfg!(not(debug_assertions)) && std::env::var_os(EAGER_COMMIT).is_none() {
        restart_with_runtime_settings();
    }
    onyx::cli::main()
}

/// Starts this binary again with mimalloc committing arena memory as it is
/// used rather than up front: idle anonymous memory goes from ~40 MB to
/// ~11 MB at the same throughput (bench/README.md). Library errors capture
/// no backtrace unless `RUST_LIB_BACKTRACE` asks (panics still print one with
/// `RUST_BACKTRACE=1`). Returns only if the binary cannot be started again;
/// it then runs as it is.
fn restart_with_runtime_settings() {
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let mut args = std::env::args_os();
    let mut command = std::process::Command::new(exe);
    if let Some(name) = args.next() {
        command.arg0(name);
    }
    command.args(args).env(EAGER_COMMIT, "0");
    if std::env::var_os(LIBRARY_BACKTRACES).is_none() {
        command.env(LIBRARY_BACKTRACES, "0");
    }
    let _ = command.exec();
}
