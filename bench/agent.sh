#!/usr/bin/env bash
# Per-turn overhead of an agent run without the model: prompt composition,
# memory injection, session append and the daily-log line (release build).
#   bench/agent.sh [TURNS]      (default 300)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
cargo build --release -q -p onyx-bench --bin agent-bench
"$CARGO_TARGET_DIR/release/agent-bench" "${1:-300}"
