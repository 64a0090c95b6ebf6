#!/usr/bin/env bash
# Memory search speed: ingest rate, hybrid search p50/p99 and RSS at 10,000 and
# 100,000 chunks (384-d precomputed vectors), release build, embedded SurrealKV.
#   bench/memory.sh [SIZES...]      (default: 10000 100000)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
cargo build --release -q -p onyx-bench --bin memory-bench
for chunks in "${@:-10000 100000}"; do
  for n in $chunks; do
    echo "== $n chunks"
    "$CARGO_TARGET_DIR/release/memory-bench" "$n"
  done
done
