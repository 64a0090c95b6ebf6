//! The `onyx` binary; see `onyx --help`.

/// mimalloc instead of glibc's malloc: at saturation glibc's allocator took a
/// fifth of the gateway's CPU (bench/README.md, "Where the time goes").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    onyx::cli::main()
}
