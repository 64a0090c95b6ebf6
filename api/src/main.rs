//! The `onyx` binary; see `onyx --help`.

/// mimalloc instead of glibc's malloc in release builds: at saturation
/// glibc's allocator took a fifth of the gateway's CPU (bench/README.md,
/// "Where the time goes"). Debug builds (the tests) keep glibc's: mimalloc
/// is compiled unoptimized there and slowed the long tests.
#[cfg(not(debug_assertions))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    onyx::cli::main()
}
