#!/usr/bin/env bash
# Gateway overhead, side by side in one run: wrk against the fake OpenAI
# upstream directly, then through Onyx to the same upstream. Release build;
# Onyx pinned to core 0, the upstream and wrk to core 1.
#   bench/gateway_overhead.sh            (needs: wrk, curl, taskset)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
DURATION=${DURATION:-10s}
KEY=onyx_sk_bench_key_0000000000
cargo build --release -q -p onyx -p onyx-test-fakes
bin=$CARGO_TARGET_DIR/release
tmp=$(mktemp -d)
cleanup() { kill "${pids[@]}" 2>/dev/null || true; rm -rf "$tmp"; }
pids=()
trap cleanup EXIT

taskset -c 1 "$bin/onyx-fake-upstream" > "$tmp/fake.json" &
pids+=($!)
until [ -s "$tmp/fake.json" ]; do sleep 0.05; done
upstream=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["openai"])' "$tmp/fake.json")
upstream_key=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["key"])' "$tmp/fake.json")
cat > "$tmp/onyx.json5" <<JSON
{ gateway: { auth: { apiKeys: ["$KEY"] } },
  providers: { up: { type: "openai", baseUrl: "$upstream", apiKey: "$upstream_key", maxRetries: 0 } } }
JSON
ONYX_LOG=warn HOME=$tmp TOKIO_WORKER_THREADS=${TOKIO_WORKER_THREADS:-} taskset -c 0 "$bin/onyx" serve --config "$tmp/onyx.json5" --listen 127.0.0.1:0 > "$tmp/onyx.out" &
onyx_pid=$!
pids+=($onyx_pid)
until grep -q '^listening on' "$tmp/onyx.out" 2>/dev/null; do sleep 0.05; done
onyx=$(sed -n 's/^listening on //p' "$tmp/onyx.out")
until curl -sf "$onyx/health" >/dev/null; do sleep 0.05; done
up_base=${upstream%/v1}
rss() { awk '/VmRSS/ {printf "%.1f", $2/1024}' "/proc/$onyx_pid/status"; }

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "onyx idle RSS: $(rss) MB"

run() { # label url model conns delay
  BENCH_MODEL=$3 BENCH_KEY=$([ "$1" = direct ] && echo "$upstream_key" || echo "$KEY") BENCH_DELAY_MS=$5 \
    taskset -c 1 wrk -t1 -c"$4" -d"$DURATION" --latency -s bench/chat.lua "$2" > "$tmp/wrk.txt"
  local p50 p99 rps
  p50=$(awk '$1=="50%" {print $2}' "$tmp/wrk.txt")
  p99=$(awk '$1=="99%" {print $2}' "$tmp/wrk.txt")
  rps=$(awk '/Requests\/sec/ {print $2}' "$tmp/wrk.txt")
  errors=$(grep -E 'Non-2xx|Socket errors' "$tmp/wrk.txt" || true)
  printf '| %-8s | %-22s | %8s | %8s | %10s | %s\n' "$1" "$6" "$p50" "$p99" "$rps" "$errors"
}

echo
echo "| path     | load                   |      p50 |      p99 |      req/s |"
echo "| -------- | ---------------------- | -------- | -------- | ---------- |"
run direct "$up_base" fake-echo 1 0 "1 connection"
run onyx "$onyx" up/fake-echo 1 0 "1 connection"
run direct "$up_base" fake-echo 4 3 "~1,000 req/s (paced)"
run onyx "$onyx" up/fake-echo 4 3 "~1,000 req/s (paced)"
run direct "$up_base" fake-echo 64 0 "64 connections (max)"
run onyx "$onyx" up/fake-echo 64 0 "64 connections (max)"
echo
echo "onyx RSS after load: $(rss) MB"

ttfb() { # url model key
  for _ in $(seq 200); do
    curl -s -o /dev/null -w '%{time_starttransfer}\n' "$1/v1/chat/completions" -H "Authorization: Bearer $3" \
      -H 'content-type: application/json' \
      -d "{\"model\":\"$2\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"
  done | sort -n | awk '{a[NR]=$1} END {printf "%.3f ms", a[int(NR/2)]*1000}'
}
echo "streaming time to first byte, median of 200: direct $(ttfb "$up_base" fake-echo "$upstream_key"), through onyx $(ttfb "$onyx" up/fake-echo "$KEY")"
