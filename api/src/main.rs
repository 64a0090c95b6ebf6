//! The `onyx` binary; see `onyx --help`.

fn main() -> std::process::ExitCode {
    onyx::cli::main()
}
