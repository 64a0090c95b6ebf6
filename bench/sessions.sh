#!/usr/bin/env bash
# Session storage benchmark: append latency at the start vs the end of a
# 10,000-message session, and list latency over 10,000 sessions, on the local
# backend and on a real S3 server (tests/s3-server: s3s-fs), release build, embedded SurrealKV.
#   bench/sessions.sh [MESSAGES] [SESSIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
MESSAGES=${1:-10000}
SESSIONS=${2:-10000}
cargo build --release -q -p onyx-bench
cargo build --release -q -p onyx-s3-test-server
s3s=$CARGO_TARGET_DIR/release/onyx-s3-test-server
bench=$CARGO_TARGET_DIR/release/session-bench
tmp=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "== local"
"$bench" local "$tmp/local" "$MESSAGES" "$SESSIONS"

echo "== s3 (tests/s3-server on 127.0.0.1)"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$tmp/s3data"
"$s3s" --host 127.0.0.1 --port "$port" --access-key bench --secret-key bench-secret-key "$tmp/s3data" >/dev/null 2>&1 &
pid=$!
until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do sleep 0.05; done
"$bench" s3 "$tmp/s3" "http://127.0.0.1:$port" bench bench-secret-key "$MESSAGES" "$SESSIONS"
