#!/usr/bin/env bash
# Soak: Onyx with embedded storage (SurrealKV + a local object store) and the
# fake upstreams, driven for SOAK_MINUTES (default 30) by a mixed load: chat
# completions, streaming chats, agent runs (`onyx:main`), memory writes and
# memory searches (hybrid, through the fake Ollama's embeddings). Prints, each
# minute, the gateway's RSS, the data dir's size, requests and errors by kind,
# and at the end the RSS slope over the last 10 minutes (or the second half of
# a shorter run).
# Exits 1 on any error.
#
#   bench/soak.sh             release build (needs: python3, curl)
#   bench/soak.sh --debug     debug build
#   SOAK_MINUTES=3 SOAK_WORKERS=4 bench/soak.sh --debug
#   SOAK_MIX=chat=35,stream=20,memory_search=15 bench/soak.sh   (a load that stores nothing)
#   SOAK_CONFIG='storage: { surrealdb: { blockKb: 8 } },' bench/soak.sh   (extra config keys)
#   SOAK_LOG=warn,onyx::sql=trace SOAK_KEEP_LOG=/tmp/onyx.log bench/soak.sh
#       (each SurrealDB query and its time, kept; bench/sql_growth.py sums them by minute)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
profile=release
[ "${1:-}" = --debug ] && profile=debug
KEY=onyx_sk_soak_key_000000000000
# BUILD=0 measures the binaries already built.
if [ "${BUILD:-1}" != 0 ]; then
  if [ "$profile" = release ]; then
    # onyx alone, as users build it (see gateway_overhead.sh).
    cargo build --release -q -p onyx && cargo build --release -q -p onyx-test-fakes
  else
    cargo build -q -p onyx -p onyx-test-fakes
  fi
fi
bin=$CARGO_TARGET_DIR/$profile
tmp=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

"$bin/onyx-fake-upstream" > "$tmp/fakes.json" 2>/dev/null &
pids+=($!)
until [ -s "$tmp/fakes.json" ]; do sleep 0.05; done
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$tmp/fakes.json" "$1"; }
cat > "$tmp/onyx.json5" <<JSON
{ gateway: { auth: { apiKeys: ["$KEY"] } },
  providers: {
    openai: { type: "openai", baseUrl: "$(field openai)", apiKey: "$(field key)", maxRetries: 0 },
    anthropic: { type: "anthropic", baseUrl: "$(field anthropic)", apiKey: "$(field key)", maxRetries: 0 },
    ollama: { type: "ollama", baseUrl: "$(field ollama)" },
  },
  memory: { embedder: { type: "ollama", model: "fake-embed", baseUrl: "$(field ollama)" } },
  agents: { list: [{ id: "main", default: true, model: "openai/fake-echo" }] },
  ${SOAK_CONFIG:-}
}
JSON
# SOAK_WRAP: a command prefix the gateway runs under (it must exec its arguments,
# keeping the pid), e.g. to show it less memory (see bench/README.md, Soak).
ONYX_LOG=${SOAK_LOG:-warn} ONYX_LOG_BUFFER_LINES=${SOAK_LOG_BUFFER:-16384} HOME=$tmp ONYX_DATA_DIR=$tmp/data ${SOAK_WRAP:-} "$bin/onyx" serve --config "$tmp/onyx.json5" --listen 127.0.0.1:0 \
  > "$tmp/onyx.out" 2> "$tmp/onyx.err" &
onyx_pid=$!
pids+=($onyx_pid)
until grep -q '^listening on' "$tmp/onyx.out" 2>/dev/null; do
  kill -0 "$onyx_pid" 2>/dev/null || { cat "$tmp/onyx.err" >&2; exit 1; }
  sleep 0.05
done
onyx=$(sed -n 's/^listening on //p' "$tmp/onyx.out")
until curl -sf "$onyx/health" >/dev/null; do sleep 0.05; done

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "build: $profile; minutes: ${SOAK_MINUTES:-30}; workers: ${SOAK_WORKERS:-4}${SOAK_CONFIG:+; config: $SOAK_CONFIG}"
status=0
python3 bench/soak.py --url "$onyx" --key "$KEY" --pid "$onyx_pid" --data-dir "$tmp/data" \
  --minutes "${SOAK_MINUTES:-30}" --workers "${SOAK_WORKERS:-4}" || status=$?
[ -n "${SOAK_KEEP_LOG:-}" ] && cp "$tmp/onyx.err" "$SOAK_KEEP_LOG"
warnings=$(grep -c -E ' (WARN|ERROR) ' "$tmp/onyx.err" || true)
echo "onyx warnings and errors logged: $warnings"
grep -E ' (WARN|ERROR) ' "$tmp/onyx.err" | head -5 || true
exit "$status"
