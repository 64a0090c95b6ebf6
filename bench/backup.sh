#!/usr/bin/env bash
# Backup and restore at scale: `onyx backup` and `onyx restore` time and the
# archive's size for a data dir with N memory chunks (384-d vectors, written
# by memory-bench through the real index) and M sessions (chats through the
# gateway against the fake OpenAI server), release build, embedded SurrealKV
# and the local object store.
#   bench/backup.sh [CHUNKS] [SESSIONS]      (default: 100000 1000)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
chunks=${1:-100000}
sessions=${2:-1000}
# Built one package at a time, as the other benches (shared dependencies keep their features).
cargo build --release -q -p onyx --bin onyx
cargo build --release -q -p onyx-bench --bin memory-bench
cargo build --release -q -p onyx-test-fakes
bin=$CARGO_TARGET_DIR/release
work=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

"$bin/onyx-fake-upstream" > "$work/fakes.json" 2>/dev/null &
pids+=($!)
until [ -s "$work/fakes.json" ]; do sleep 0.05; done
openai=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["openai"])' "$work/fakes.json")
fake_key=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["key"])' "$work/fakes.json")
key=onyx_sk_bench_backup_0123456789

config() { # data dir → config text (memory-bench writes the "bench" database)
  cat <<JSON
{ gateway: { auth: { apiKeys: ["$key"] } },
  providers: { openai: { type: "openai", baseUrl: "$openai", apiKey: "$fake_key", maxRetries: 0 } },
  agents: { defaults: { model: "openai/fake-echo" } },
  storage: { dataDir: "$1", surrealdb: { database: "bench" } } }
JSON
}
mkdir -p "$work/source" "$work/target" "$work/home"
config "$work/source/data" > "$work/source.json5"
config "$work/target/data" > "$work/target.json5"

echo "== writing $chunks memory chunks (memory-bench)"
"$bin/memory-bench" "$chunks" "surrealkv://$work/source/data/db" 1 > "$work/memory-bench.log"
tail -n 3 "$work/memory-bench.log"

echo "== writing $sessions sessions through the gateway"
HOME=$work/home ONYX_LOG=warn "$bin/onyx" serve --config "$work/source.json5" --listen 127.0.0.1:0 > "$work/onyx.out" 2> "$work/onyx.err" &
onyx_pid=$!
pids+=($onyx_pid)
until grep -q '^listening on' "$work/onyx.out" 2>/dev/null; do sleep 0.05; done
url=$(sed -n 's/^listening on //p' "$work/onyx.out")
until curl -sf "$url/health" >/dev/null; do sleep 0.05; done
seq 1 "$sessions" | xargs -P 4 -I{} curl -sf -o /dev/null -H "authorization: Bearer $key" \
  -H 'content-type: application/json' "$url/v1/chat/completions" \
  -d '{"model": "onyx:main", "messages": [{"role": "user", "content": "session {}: what did we decide about the garden shed and the spare key?"}]}'
kill -TERM $onyx_pid
wait $onyx_pid || true
du -sh "$work/source/data" | sed 's/^/data dir: /'

echo "== onyx backup"
start=$(date +%s.%N)
HOME=$work/home "$bin/onyx" backup --config "$work/source.json5" "$work/onyx.tar.zst"
backup_s=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
size=$(stat -c %s "$work/onyx.tar.zst")

echo "== onyx restore"
start=$(date +%s.%N)
HOME=$work/home "$bin/onyx" restore --config "$work/target.json5" "$work/onyx.tar.zst"
restore_s=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")

echo
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GB; $(uname -r)"
echo "chunks=$chunks sessions=$sessions backup_s=$backup_s restore_s=$restore_s archive_bytes=$size archive_mb=$(python3 -c "print(f'{$size/1e6:.1f}')")"
