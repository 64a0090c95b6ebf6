//! `onyx-surreal-test-server start --bind 127.0.0.1:PORT --user root --pass root memory`:
//! a real SurrealDB server, same version as Onyx's client, built from crates.io
//! because no registry here ships the `surreal` binary.

// A release build of surrealdb-server's query engine needs more than the default 128.
#![recursion_limit = "256"]

fn main() -> std::process::ExitCode {
    surrealdb_server::init(surrealdb_server::core::CommunityComposer())
}
