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

/// Set for the process if the user has not set them (they are read before
/// `main`, or by libraries, so the binary starts itself again with them).
const RUNTIME_SETTINGS: [(&str, &str); 2] = [(EAGER_COMMIT, "0"), (LIBRARY_BACKTRACES, "0")];

fn main() -> std::process::ExitCode {
    let unset: Vec<_> = RUNTIME_SETTINGS
        .into_iter()
        .filter(|(name, _)| std::env::var_os(name).is_none())
        .collect();
    if cfg!(not(debug_assertions)) && !unset.is_empty() {
        restart_with(&unset);
    }
    onyx::cli::main()
}

/// Starts this binary again with `settings` in its environment: mimalloc
/// commits arena memory as it is used rather than up front (idle anonymous
/// memory goes from ~40 MB to ~11 MB at the same throughput, bench/README.md),
/// and library errors capture no backtrace (panics still print one with
/// `RUST_BACKTRACE=1`). Returns only if the binary cannot be started again;
/// it then runs as it is.
fn restart_with(settings: &[(&str, &str)]) {
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let mut args = std::env::args_os();
    let mut command = std::process::Command::new(exe);
    if let Some(name) = args.next() {
        command.arg0(name);
    }
    command.args(args).envs(settings.iter().copied());
    let _ = command.exec();
}
