#!/usr/bin/env bash
# Where a gateway request's instructions go: runs a release build of Onyx under
# valgrind's callgrind in front of the fake OpenAI upstream, sends it the same
# small request as gateway_overhead.sh with wrk (4 connections) for DURATION,
# and prints the instructions per request, split by part of the path
# (inclusive counts of each part's entry function), then the functions with
# the largest own counts.
#
# Instruction counts do not depend on how busy the machine is, so two builds
# compare exactly even on a noisy VM; time per request is not measured here
# (valgrind runs the code ~50x slower), see gateway_overhead.sh for that.
#
#   bench/instructions.sh                 chat completions (needs valgrind, wrk, python3)
#   API=responses bench/instructions.sh   or messages
#   BENCH_ONYX_BIN=/tmp/onyx-before BUILD=0 bench/instructions.sh   another build, same fakes
#   LIMITS=on   with a budget and rate limits configured; TOP=40 functions listed
#   KEEP=/tmp/chat.callgrind   keeps the callgrind file (callers: bench/callgrind.py)
#   LOG=info    at Onyx's default log level (each request has a tracing span); default warn
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
if [ "${BUILD:-1}" != 0 ]; then
  # onyx alone, as the README builds it (see gateway_overhead.sh).
  cargo build --release -q -p onyx
  cargo build --release -q -p onyx-test-fakes
fi
bin=$CARGO_TARGET_DIR/release
onyx_bin=${BENCH_ONYX_BIN:-$bin/onyx}
api=${API:-chat}
KEY=onyx_sk_bench_key_0000000000
. bench/profile_setup.sh
limits=""
[ "${LIMITS:-off}" = on ] && limits='usage: { limits: { dailyUsd: 1000000, rpm: 100000000, tpm: 100000000000 } },'
cat > "$tmp/onyx.json5" <<JSON
{ gateway: { auth: { apiKeys: ["$KEY"] } },
  $limits
  providers: { far: { type: "openai", baseUrl: "$(fake openai)", apiKey: "$(fake key)", maxRetries: 0 } } }
JSON

echo "starting onyx under callgrind..."
# ONYX_ENV="NAME=value …" adds variables. Builds from before 2026-11-27 start
# themselves again unless MIMALLOC_ARENA_EAGER_COMMIT and RUST_LIB_BACKTRACE are
# both set, and valgrind would lose them: give them those two.
# shellcheck disable=SC2086
env ${ONYX_ENV:-} ONYX_LOG=${LOG:-warn} HOME=$tmp valgrind --tool=callgrind \
  --callgrind-out-file="$tmp/callgrind.out" "$onyx_bin" serve --config "$tmp/onyx.json5" \
  --listen 127.0.0.1:0 > "$tmp/onyx.out" 2> "$tmp/valgrind.log" &
onyx_pid=$!
pids+=($onyx_pid)
wait_listening "$onyx_pid" "$tmp/onyx.out" "$tmp/valgrind.log"
until curl -sf "$onyx/health" >/dev/null; do sleep 0.3; done
load() {
  BENCH_API=$api BENCH_MODEL=far/fake-echo BENCH_KEY=$KEY wrk -t1 -c4 -d"$1" -s bench/chat.lua "$onyx"
}
load 5s > /dev/null # warm: connections, caches, the first usage batch
callgrind_control --zero "$onyx_pid" > /dev/null
load "${DURATION:-15s}" > "$tmp/wrk.txt"
callgrind_control --dump=measured "$onyx_pid" > /dev/null
until ls "$tmp"/callgrind.out.* > /dev/null 2>&1; do sleep 0.3; done
sleep 1
if grep -q Non-2xx "$tmp/wrk.txt"; then
  echo "some requests failed:" >&2
  cat "$tmp/wrk.txt" >&2
  exit 1
fi
[ -n "${KEEP:-}" ] && cp "$(ls "$tmp"/callgrind.out.* | head -1)" "$KEEP"
requests=$(awk '/requests in/ {print $1}' "$tmp/wrk.txt")
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); api: $api; limits: ${LIMITS:-off}; log: ${LOG:-warn}"
python3 - "$(ls "$tmp"/callgrind.out.* | head -1)" "$requests" "${TOP:-25}" <<'PY'
import collections, re, sys
sys.path.insert(0, "bench")
from callgrind import read

path, requests, top = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
call_counts = collections.Counter()
own, calls = read(path, counts=call_counts)
inclusive = collections.Counter(own)
for (caller, called), cost in calls.items():
    if caller != called:
        inclusive[caller] += cost
total = sum(own.values())

def entry(*patterns):
    return sum(c for f, c in inclusive.items() if any(re.search(p, f or "") for p in patterns))

# Each part's entry functions, in this build and in builds before 2026-11-26
# (a pattern that matches nothing adds nothing).
parts = [
    ("request body read and parsed",
     entry(r"<onyx::http::body::(JsonObject|JsonBytes) as axum_core::extract::FromRequest<S>>::from_request::\{\{closure\}\}$",
           r"^onyx::http::chat::read_chat$", r"^onyx::http::body::typed$")),
    ("request written for the upstream (model rewritten)",
     entry(r"^serde_json::ser::to_vec$", r"^onyx::providers::request_body::WithModel::to_json$")),
    # Before 2026-11-27 the hand-written HTTP/1.1 client (http1); since, reqwest.
    ("upstream HTTP client (connection, request, answer read)",
     entry(r"^onyx::providers::http1::exchange::\{\{closure\}\}$",
           r"^onyx::providers::http1::Pool::(request_bytes|take_idle|finish)$",
           r"^onyx::providers::transport::Plain::pool$",
           r"^onyx::providers::transport::Transport::post_json::\{\{closure\}\}$")),
    ("answer checked, its usage read",
     entry(r"^onyx::providers::completion::Completion::forwarded$",
           r"^onyx::providers::completion::CompletionReply::verbatim$")),
    ("metering: price, usage record", entry(r"Meter as onyx::providers::meter::UsageMeter>::settle$")),
    ("usage sums written to SurrealDB (batched)", entry(r"^onyx::usage::record::write_loop::\{\{closure\}\}$")),
    ("metrics (Prometheus series)", entry(r"^onyx::observability::metrics::Metrics::record_")),
    ("API key check", entry(r"^onyx::auth::keys::Authenticator::identify_now$")),
    ("routing to a provider", entry(r"^onyx::providers::router::Router::resolve$")),
]
known = sum(c for _, c in parts)
print(f"\n{requests:,} requests, {total // requests:,} instructions per request\n")
print("| part of the path | instructions per request |")
print("| --- | ---: |")
for label, cost in parts:
    print(f"| {label} | {cost // requests:,} |")
print(f"| everything else: hyper server, axum routing and layers, tokio, allocator | {(total - known) // requests:,} |")
mine = lambda pattern: sum(c for f, c in own.items() if re.search(pattern, f or ""))
print(f"\nof all: allocator (mimalloc) {mine(r'^_?mi_') // requests:,}, memcpy {mine(r'memcpy|memmove') // requests:,}")
# A backtrace is taken (a stack walk) in Backtrace::create; capture() only asks
# whether to. RUST_BACKTRACE=1 without RUST_LIB_BACKTRACE turns it on for library errors.
captures = sum(n for f, n in call_counts.items() if re.search(r"std::backtrace::Backtrace::create$", f or ""))
print(f"backtraces taken: {captures / requests:.3f} per request ({captures:,} in all)")
print(f"\nlargest own counts per request:")
for f, cost in own.most_common(top):
    print(f"{cost // requests:8,}  {(f or '?')[:150]}")
PY
