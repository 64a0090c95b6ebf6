#!/usr/bin/env bash
# Memory search speed: ingest rate, restart-to-searchable, hybrid search p50/p99 and RSS at
# 10,000 and 100,000 chunks (384-d precomputed vectors), release build, embedded SurrealKV.
# Each size runs twice: the writing replica (ingest, snapshot, loads), then a fresh process
# restarting on the same database and snapshot (what a restarted replica costs).
#   bench/memory.sh [SIZES...]      (default: 10000 100000)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
cargo build --release -q -p onyx-bench --bin memory-bench
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for n in ${@:-10000 100000}; do
  echo "== $n chunks: writing replica"
  MEMORY_BENCH_SNAPSHOT="$work/$n.snapshot" "$CARGO_TARGET_DIR/release/memory-bench" "$n" "surrealkv://$work/$n"
  echo "== $n chunks: restarted replica"
  MEMORY_BENCH_RESTART="$work/$n.snapshot" "$CARGO_TARGET_DIR/release/memory-bench" "$n" "surrealkv://$work/$n"
done
