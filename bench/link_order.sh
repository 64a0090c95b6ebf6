#!/usr/bin/env bash
# Makes api/link/onyx.order: the functions a release build of Onyx runs when it
# starts and serves the gateway's paths (chat completions as JSON and streams,
# /v1/responses, /v1/messages, embeddings, models, health, metrics, usage with
# budgets and rate limits on), hottest first. api/build.rs hands the file to
# the linker, which lays those functions out together at the front of .text.
#
# Why: the binary's code is ~100 MB and the kernel maps it in 64 KB runs
# around each page touched. Left in the compiler's order, the few thousand
# functions a gateway runs are spread over most of those runs, and RSS after
# load was ~60 MB of code alone; laid out together they fit in a few MB.
# The same contiguity helps the instruction cache and TLB.
#
# How: valgrind's callgrind runs the release binary (symbols are kept, see
# [profile.release]) through the workload and lists every function that ran,
# with its own instruction count. A later build renames the shared functions
# of every module that changed (ThinLTO's `.llvm.<hash>` suffixes); the link
# fits the file to those names by itself (api/link/cc-with-order: after a
# one-line change, 8,929 of 8,940 names found instead of 8,546). Run this again
# when the hot path itself changed (new functions), or Cargo.lock did, before
# measuring RSS (bench/README.md shows the effect).
#
#   bench/link_order.sh          (needs: valgrind, curl, wrk, python3; perf if installed; 2-14 minutes)
#   PERF=off leaves out the native pass under perf.
#   BUILD=0 measures the binary already built.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
# onyx alone, as the README and the Dockerfile build it: built together with
# other packages, its dependencies' features (and so its symbol names) differ.
if [ "${BUILD:-1}" != 0 ]; then
  cargo build --release -q -p onyx
  cargo build --release -q -p onyx-test-fakes -p onyx-paced
fi
bin=$CARGO_TARGET_DIR/release
out=api/link/onyx.order
. bench/profile_setup.sh
key=onyx_sk_order_key_00000000000
cat > "$tmp/onyx.json5" <<JSON
{ gateway: { auth: { apiKeys: ["$key"] } },
  usage: { limits: { dailyUsd: 1000000, rpm: 100000000, tpm: 100000000000 } },
  providers: {
    fake: { type: "openai", baseUrl: "$(fake openai)", apiKey: "$(fake key)", maxRetries: 0 },
    claude: { type: "anthropic", baseUrl: "$(fake anthropic)", apiKey: "$(fake key)", maxRetries: 0 },
    llama: { type: "ollama", baseUrl: "$(fake ollama)", maxRetries: 0 },
  } }
JSON

echo "running onyx under callgrind (startup takes a minute)..."
# At the default log level (info), where each request has a tracing span: its
# code is ordered too. At warn (as gateway_overhead.sh runs by default) that
# code does not run, and the ordered front covers the rest all the same.
# The binary starts itself again unless both are set (main.rs); valgrind would lose it.
MIMALLOC_ARENA_EAGER_COMMIT=0 RUST_LIB_BACKTRACE=0 ONYX_LOG=info HOME=$tmp valgrind --tool=callgrind --demangle=no --callgrind-out-file="$tmp/callgrind.out" \
  "$bin/onyx" serve --config "$tmp/onyx.json5" --listen 127.0.0.1:0 > "$tmp/onyx.out" 2> "$tmp/valgrind.log" &
onyx_pid=$!
pids+=($onyx_pid)
wait_listening "$onyx_pid" "$tmp/onyx.out" "$tmp/valgrind.log"
until curl -sf "$onyx/health" >/dev/null; do sleep 0.5; done
# What ran to start is dumped apart (callgrind.out.1), so the serving paths
# can be ordered first.
callgrind_control --dump=startup "$onyx_pid" >/dev/null
until [ -s "$tmp/callgrind.out.1" ]; do sleep 0.5; done

post() { # path body [extra curl args]
  curl -sf -o /dev/null "$onyx$1" -H "Authorization: Bearer $key" -H 'content-type: application/json' -d "$2" "${@:3}" \
    || echo "  (a request to $1 failed)"
}
chat='"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hello to the benchmark"}]'
# The requests every path gets: one per connection round robin, then the load
# gateway_overhead.sh sends.
workload() {
  rounds=${ROUNDS:-200}
  for i in $(seq "$rounds"); do
    post /v1/chat/completions "{\"model\":\"fake/fake-echo\",$chat}"
    if (( i % 4 == 0 )); then
      post /v1/chat/completions "{\"model\":\"fake/fake-echo\",\"stream\":true,$chat}"
      post /v1/responses '{"model":"fake/fake-echo","store":false,"instructions":"You are terse.","input":"Say hello"}'
      post /v1/responses '{"model":"fake/fake-echo","stream":true,"input":"Say hello"}'
      post /v1/messages '{"model":"fake/fake-echo","max_tokens":64,"system":"Terse.","messages":[{"role":"user","content":"Say hello"}]}' \
        -H "x-api-key: $key" -H 'anthropic-version: 2023-06-01'
      post /v1/messages '{"model":"claude/fake-echo","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"Say hello"}]}' \
        -H "x-api-key: $key" -H 'anthropic-version: 2023-06-01'
      post /v1/chat/completions "{\"model\":\"claude/fake-echo\",$chat}"
      post /v1/chat/completions "{\"model\":\"llama/fake-echo\",$chat}"
      post /v1/embeddings '{"model":"fake/fake-embed","input":"hello"}'
      curl -sf -o /dev/null "$onyx/v1/models" -H "Authorization: Bearer $key"
      curl -sf -o /dev/null "$onyx/metrics" -H "Authorization: Bearer $key"
      curl -sf -o /dev/null "$onyx/health"
    fi
    (( i % 50 == 0 )) && echo "  $i of $rounds rounds"
  done
  curl -sf -o /dev/null "$onyx/v1/usage?group_by=model" -H "Authorization: Bearer $key" || true
  # Then the load gateway_overhead.sh sends: connections kept open, one and
  # many at once, and paced. The server runs code there that one request per
  # connection never reaches; left out of the order, each such function
  # touches another 64 KB run of the binary.
  echo "  keep-alive load: chat, responses, messages; 1 and 64 connections; paced"
  for api in chat responses messages; do
    for conns in 1 64; do
      BENCH_API=$api BENCH_MODEL=fake/fake-echo BENCH_KEY=$key \
        wrk -t1 -c"$conns" -d"${KEEP_ALIVE:-4s}" -s bench/chat.lua "$onyx" > /dev/null
    done
  done
  "$bin/onyx-paced" --url "$onyx/v1/chat/completions" --rate 200 --seconds 4 --connections 8 \
    --header "Authorization: Bearer $key" --body "{\"model\":\"fake/fake-echo\",$chat}" > /dev/null
}
workload
kill -TERM "$onyx_pid"
wait "$onyx_pid" || true

# The same again natively, sampled by perf where it is installed: code that runs
# natively but not under valgrind (Landlock's probe, a syscall valgrind does not
# know; CPU-feature variants; the runtime's idle and timer paths, which a
# process kept busy by valgrind seldom takes) is ordered after what callgrind saw.
touch "$tmp/sampled"
if command -v perf > /dev/null && [ "${PERF:-on}" = on ]; then
  echo "running onyx natively under perf..."
  mkdir -p "$tmp/native"
  ONYX_LOG=info HOME=$tmp/native perf record -q -F "${PERF_HZ:-20000}" -o "$tmp/perf.data" -- \
    "$bin/onyx" serve --config "$tmp/onyx.json5" --listen 127.0.0.1:0 > "$tmp/native.out" 2> "$tmp/perf.log" &
  perf_pid=$!
  pids+=($perf_pid)
  wait_listening "$perf_pid" "$tmp/native.out" "$tmp/perf.log"
  workload
  kill -TERM $(pgrep -P "$perf_pid")
  wait "$perf_pid" || true
  # "ip symbol (binary)" per sample; the binary's own symbols only.
  perf script -i "$tmp/perf.data" -F ip,sym,dso --no-demangle 2> /dev/null \
    | awk '$NF ~ /\/onyx\)$/ && $2 != "[unknown]" {print $2}' > "$tmp/sampled"
fi

# Every function of the binary that ran: those that served requests by their
# own instruction count (hottest first), then those only starting ran.
python3 - "$tmp/callgrind.out" "$tmp/callgrind.out.1" "$(basename "$bin/onyx")" "$tmp/sampled" > "$tmp/order" <<'PY'
import collections
import sys
sys.path.insert(0, "bench")
from callgrind import read

serving, _ = read(sys.argv[1], sys.argv[3])
starting, _ = read(sys.argv[2], sys.argv[3])
sampled = collections.Counter(line.strip() for line in open(sys.argv[4]) if line.strip())
# Code callgrind found no symbol for ("0x278c9f0", "(below main)") has no name to order.
named = lambda fn: fn and not fn.startswith(("0x", "("))
seen = set()
for ranked in (serving, starting, sampled):
    for fn, _ in ranked.most_common():
        if named(fn) and fn not in seen:
            seen.add(fn)
            print(fn)
print(f"{sum(fn not in serving and fn not in starting for fn in sampled):,} of them seen only by perf",
      file=sys.stderr)
PY
mkdir -p "$(dirname "$out")"
mv "$tmp/order" "$out"
echo "$(wc -l < "$out") functions in $out"
