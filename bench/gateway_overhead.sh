#!/usr/bin/env bash
# Gateway overhead, side by side in one run: wrk against a fake OpenAI upstream
# directly, then through Onyx to that same upstream. Release build; Onyx is
# pinned to core 0 and wrk to core 1.
#
# Two layouts, because on 2 cores where a process sits decides how many
# cross-core wake-ups a request pays:
#   latency:    upstream "near" shares core 0 with Onyx, so the direct path
#               (wrk -> upstream) and the Onyx path (wrk -> Onyx -> upstream)
#               cross cores equally and the difference is Onyx's own work;
#   throughput: upstream "far" sits on core 1 with wrk, so Onyx has core 0 alone.
#
# Every call is metered (usage records, cost). LIMITS=on adds a gateway-wide
# budget and rate limit that no request reaches, so every call also makes and
# settles an atomic reservation in SurrealDB.
#
#   bench/gateway_overhead.sh            (needs: wrk, curl, taskset, python3)
#   RATE=3000 requests a second in the paced rows (onyx-paced, bench/paced)
#   LIMITS=on bench/gateway_overhead.sh
#   NGINX=off leaves out the nginx reference rows (they run where nginx is installed)
#   LOG=info runs Onyx at its default log level (each request then has a tracing span);
#   the default here, warn, leaves that out as nginx's access_log off does
#
# Memory is judged as private dirty memory (Private_Dirty in
# /proc/PID/smaps_rollup), for Onyx and for nginx's master and worker, idle and
# after the load; the run ends with the budget's lines (issue 40).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
DURATION=${DURATION:-10s}
KEY=onyx_sk_bench_key_0000000000
# BUILD=0 measures the binaries already built (while other work changes the source).
# onyx alone, as the README and the Dockerfile build it (built with other
# packages, its dependencies would get other features).
if [ "${BUILD:-1}" != 0 ]; then
  cargo build --release -q -p onyx
  cargo build --release -q -p onyx-test-fakes -p onyx-paced
fi
bin=$CARGO_TARGET_DIR/release
tmp=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

start_fake() { # core name: runs in this shell so its pid reaches cleanup
  taskset -c "$1" "$bin/onyx-fake-upstream" > "$tmp/$2.json" 2>/dev/null &
  pids+=($!)
  until [ -s "$tmp/$2.json" ]; do sleep 0.05; done
}
url_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["openai"])' "$tmp/$1.json"; }
start_fake 0 near
start_fake 1 far
near=$(url_of near)
far=$(url_of far)
upstream_key=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["key"])' "$tmp/near.json")
limits=""
if [ "${LIMITS:-off}" = on ]; then
  limits='usage: { limits: { dailyUsd: 1000000, rpm: 100000000, tpm: 100000000000 } },'
fi
cat > "$tmp/onyx.json5" <<JSON
{ gateway: { auth: { apiKeys: ["$KEY"] } },
  $limits
  providers: {
    near: { type: "openai", baseUrl: "$near", apiKey: "$upstream_key", maxRetries: 0 },
    far: { type: "openai", baseUrl: "$far", apiKey: "$upstream_key", maxRetries: 0 },
  } }
JSON
# BENCH_ONYX_BIN=path measures another build of onyx (an A/B against the same fakes and load);
# ONYX_ENV="NAME=value …" runs it with those variables (MIMALLOC_ARENA_EAGER_COMMIT=0…).
# Builds from before 2026-11-27 start themselves again unless
# MIMALLOC_ARENA_EAGER_COMMIT and RUST_LIB_BACKTRACE are both set: for those,
# ONYX_ENV="MIMALLOC_ARENA_EAGER_COMMIT=0 RUST_LIB_BACKTRACE=0" is what they ran with.
# shellcheck disable=SC2086
env ${ONYX_ENV:-} ONYX_LOG=${LOG:-warn} HOME=$tmp taskset -c 0 "${BENCH_ONYX_BIN:-$bin/onyx}" serve --config "$tmp/onyx.json5" --listen 127.0.0.1:0 > "$tmp/onyx.out" 2>/dev/null &
onyx_pid=$!
pids+=($onyx_pid)
until grep -q '^listening on' "$tmp/onyx.out" 2>/dev/null; do sleep 0.05; done
onyx=$(sed -n 's/^listening on //p' "$tmp/onyx.out")
until curl -sf "$onyx/health" >/dev/null; do sleep 0.05; done
# A reference proxy where nginx is installed (apt `nginx-light`): the same
# pinning, keep-alive to the upstream, no logging. Its rows show what any
# proxy's extra hop costs on this machine, which Onyx's added latency includes.
nginx_near="" nginx_far=""
if command -v nginx >/dev/null && [ "${NGINX:-on}" = on ]; then
  free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
  host_port() { local hp=${1#http://}; echo "${hp%/v1}"; }
  port_near=$(free_port) port_far=$(free_port)
  mkdir -p "$tmp/nginx"
  cat > "$tmp/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $tmp/nginx/pid;
events { worker_connections 4096; }
http {
  access_log off;
  # Clients keep their connections as long as they like (the default closes one after 1,000 requests).
  keepalive_requests 10000000; keepalive_timeout 300s;
  client_body_temp_path $tmp/nginx; proxy_temp_path $tmp/nginx;
  fastcgi_temp_path $tmp/nginx; uwsgi_temp_path $tmp/nginx; scgi_temp_path $tmp/nginx;
  upstream near { server $(host_port "$near"); keepalive 64; keepalive_requests 10000000; }
  upstream far { server $(host_port "$far"); keepalive 64; keepalive_requests 10000000; }
  server { listen 127.0.0.1:$port_near;
    location / { proxy_pass http://near; proxy_http_version 1.1; proxy_set_header Connection ""; } }
  server { listen 127.0.0.1:$port_far;
    location / { proxy_pass http://far; proxy_http_version 1.1; proxy_set_header Connection ""; } }
}
CONF
  taskset -c 0 nginx -p "$tmp/nginx" -c "$tmp/nginx.conf" -e "$tmp/nginx/error.log" &
  nginx_pid=$!
  pids+=($nginx_pid)
  nginx_near=http://127.0.0.1:$port_near nginx_far=http://127.0.0.1:$port_far
  until curl -s -o /dev/null "$nginx_near/"; do sleep 0.05; done
fi
# Private dirty memory: every page the process wrote (the heap, stacks, written
# data), which the kernel cannot drop; the budget is judged on it. The binary's
# code pages mapped from the page cache are clean and reclaimable, so total RSS
# says little. AnonHugePages: of it, in transparent huge pages.
private_dirty_kb() { # pid...
  local total=0 huge=0 p d h
  for p in "$@"; do
    read -r d h < <(awk '/^Private_Dirty:/ {d=$2} /^AnonHugePages:/ {h=$2} END {print d+0, h+0}' "/proc/$p/smaps_rollup")
    total=$((total + d)) huge=$((huge + h))
  done
  echo "$total $huge"
}
memory() { # label pid...
  local label=$1; shift
  read -r d h < <(private_dirty_kb "$@")
  awk -v l="$label" -v d="$d" -v h="$h" 'BEGIN {printf "%s Private_Dirty %.1f MB (AnonHugePages %.1f MB)", l, d/1024, h/1024}'
}
rss() {
  awk '/^VmRSS/ {t=$2} END {printf "%.1f MB", t/1024}' "/proc/$onyx_pid/status"
}
nginx_pids() { echo "$nginx_pid" $(pgrep -P "$nginx_pid"); }
memory_line() { # when
  local line
  line="$1: $(memory onyx "$onyx_pid"), RSS $(rss)"
  [ -z "$nginx_near" ] || line="$line; $(memory nginx $(nginx_pids))"
  echo "$line"
}

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "limits: ${LIMITS:-off}; log level: ${LOG:-warn}"
memory_line idle

# ONLY=text runs only the rows whose load description contains it (paced, throughput…).
wanted() { [ -z "${ONLY:-}" ] || [[ "$1" == *"$ONLY"* ]]; }

# wrk's latencies ("121.00us", "2.32ms", "1.01s") in microseconds.
to_us() { awk -v t="$1" 'BEGIN { n = t + 0; if (t ~ /ms$/) n *= 1000; else if (t ~ /[0-9]s$/) n *= 1000000; printf "%.0f", n }'; }

# CPU time (user + system, in clock ticks) of a proxy's processes so far:
# onyx, or nginx's master and worker.
cpu_ticks() { # label
  local procs=()
  case $1 in
    onyx) procs=("$onyx_pid") ;;
    nginx) procs=("$nginx_pid" $(pgrep -P "$nginx_pid")) ;;
  esac
  local user=0 system=0 p
  for p in "${procs[@]}"; do
    # Fields 14 and 15 of /proc/PID/stat, counted after the ")" that ends the name.
    read -r u s < <(sed 's/.*) //' "/proc/$p/stat" | awk '{print $12, $13}')
    user=$((user + u)) system=$((system + s))
  done
  echo "$user $system"
}

run() { # label base-url model key conns delay-ms description [api]
  wanted "$7" || return 0
  local cpu_before
  cpu_before=$(cpu_ticks "$1")
  BENCH_MODEL=$3 BENCH_KEY=$4 BENCH_DELAY_MS=$6 BENCH_API=${8:-chat} \
    taskset -c 1 wrk -t1 -c"$5" -d"$DURATION" --latency -s bench/chat.lua "$2" > "$tmp/wrk.txt"
  if [ "$1" != direct ]; then
    # The proxy's own CPU per request: what one core it had alone could carry,
    # whichever core limited the run.
    awk -v before="$cpu_before" -v after="$(cpu_ticks "$1")" -v hz="$(getconf CLK_TCK)" \
      -v requests="$(awk '/requests in/ {print $1}' "$tmp/wrk.txt")" -v row="$1|$7" \
      'BEGIN {
        split(before, b, " "); split(after, a, " "); per = 1e6 / hz / requests
        if (requests > 0 && a[1] + a[2] > b[1] + b[2])
          printf "%s|%.1f|%.1f\n", row, (a[1] - b[1]) * per, (a[2] - b[2]) * per
      }' >> "$tmp/cpu"
  fi
  local p50 p99 rps errors
  p50=$(awk '$1=="50%" {print $2}' "$tmp/wrk.txt")
  p99=$(awk '$1=="99%" {print $2}' "$tmp/wrk.txt")
  rps=$(awk '/Requests\/sec/ {print $2}' "$tmp/wrk.txt")
  errors=$(grep -E 'Non-2xx|Socket errors' "$tmp/wrk.txt" | xargs || true)
  printf '| %-6s | %-28s | %9s | %9s | %10s | %s\n' "$1" "$7" "$p50" "$p99" "$rps" "$errors"
  echo "$1|$7|$(to_us "$p50")|$(to_us "$p99")|$rps" >> "$tmp/rows"
}

# Paced rows: onyx-paced sends requests at evenly spaced times (wrk's pacing
# leaves in bursts on its millisecond timer ticks) and measures from when each
# was due. RATE requests a second over 8 connections.
paced() { # label base-url model key description
  wanted "$5" || return 0
  local body out
  body='{"model":"'"$3"'","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hello to the benchmark"}]}'
  local trace=()
  # TRACE=dir keeps each request's latency by time (dir/direct.txt, dir/onyx.txt).
  [ -z "${TRACE:-}" ] || trace=(--trace "$TRACE/$1.txt")
  out=$(taskset -c 1 "$bin/onyx-paced" --url "$2/v1/chat/completions" --rate "${RATE:-3000}" \
    --seconds "${DURATION%s}" --connections 8 --header "Authorization: Bearer $4" --body "$body" "${trace[@]}")
  local p50 p99 rate
  p50=$(sed -n 's/.*p50_us=\([0-9]*\).*/\1/p' <<< "$out")
  p99=$(sed -n 's/.*p99_us=\([0-9]*\).*/\1/p' <<< "$out")
  rate=$(sed -n 's/.*rate=\([0-9]*\).*/\1/p' <<< "$out")
  printf '| %-6s | %-28s | %6sus | %6sus | %10s | %s\n' "$1" "$5" "$p50" "$p99" "$rate" "$(grep -o 'errors=[0-9]*' <<< "$out")"
  echo "$1|$5|$p50|$p99|$rate" >> "$tmp/rows"
}

echo
echo "| path   | load                         |       p50 |       p99 |      req/s | errors"
echo "| ------ | ---------------------------- | --------- | --------- | ---------- | ------"
run direct "${near%/v1}" fake-echo "$upstream_key" 1 0 "latency: 1 connection"
run onyx "$onyx" near/fake-echo "$KEY" 1 0 "latency: 1 connection"
[ -z "$nginx_near" ] || run nginx "$nginx_near" fake-echo "$upstream_key" 1 0 "latency: 1 connection"
paced direct "${near%/v1}" fake-echo "$upstream_key" "latency: ${RATE:-3000} req/s paced"
paced onyx "$onyx" near/fake-echo "$KEY" "latency: ${RATE:-3000} req/s paced"
[ -z "$nginx_near" ] || paced nginx "$nginx_near" fake-echo "$upstream_key" "latency: ${RATE:-3000} req/s paced"
run direct "${far%/v1}" fake-echo "$upstream_key" 64 0 "throughput: 64 connections"
run onyx "$onyx" far/fake-echo "$KEY" 64 0 "throughput: 64 connections"
[ -z "$nginx_far" ] || run nginx "$nginx_far" fake-echo "$upstream_key" 64 0 "throughput: 64 connections"
run onyx "$onyx" near/fake-echo "$KEY" 1 0 "responses → chat: 1 conn" responses
run onyx "$onyx" near/fake-echo "$KEY" 1 0 "messages → chat: 1 conn" messages
echo
memory_line "after the load"
read -r dirty_after _ < <(private_dirty_kb "$onyx_pid")
if command -v readelf > /dev/null; then
  echo "of which the onyx binary's pages, by section:"
  onyx_bin=${BENCH_ONYX_BIN:-$bin/onyx}
  python3 bench/rss_sections.py "$onyx_pid" "$onyx_bin" || true
fi

# Onyx against the bare upstream and against nginx in this same run: on a
# noisy VM the absolute numbers drift between runs, these ratios much less.
if [ -s "$tmp/rows" ]; then
  echo
  awk -F'|' '
    { p50[$1 FS $2] = $3; p99[$1 FS $2] = $4; rps[$1 FS $2] = $5; loads[$2] = 1 }
    END {
      for (load in loads) {
        d = "direct" FS load; o = "onyx" FS load; n = "nginx" FS load
        if (!(d in p50) || !(o in p50)) continue
        line = sprintf("%s: onyx adds p50 %+d us, p99 %+d us", load, p50[o] - p50[d], p99[o] - p99[d])
        if (n in p50) line = line sprintf(" (nginx %+d us, %+d us)", p50[n] - p50[d], p99[n] - p99[d])
        if (load ~ /throughput/) {
          line = line sprintf("; onyx %d req/s = %.0f%% of the bare upstream", rps[o], 100 * rps[o] / rps[d])
          if (n in rps) line = line sprintf(", %.0f%% of nginx", 100 * rps[o] / rps[n])
        }
        print line
      }
    }' "$tmp/rows" | sort
fi

# The budget (issue 40): in this same run, Onyx keeps at least 45% of nginx's
# throughput, adds at most 0.15 ms p50 and 0.3 ms p99 at one connection, and
# holds at most 40 MB of private dirty memory after the load.
if [ -s "$tmp/rows" ]; then
  echo
  awk -F'|' -v dirty="$dirty_after" '
    { p50[$1 FS $2] = $3; p99[$1 FS $2] = $4; rps[$1 FS $2] = $5 }
    function mark(ok) { return ok ? "ok" : "MISSED" }
    END {
      l = "latency: 1 connection"; t = "throughput: 64 connections"
      if (("onyx" FS t) in rps && ("nginx" FS t) in rps) {
        share = 100 * rps["onyx" FS t] / rps["nginx" FS t]
        printf "budget: throughput %.0f%% of nginx (>= 45%%): %s\n", share, mark(share >= 45)
      }
      if (("onyx" FS l) in p50 && ("direct" FS l) in p50) {
        a50 = p50["onyx" FS l] - p50["direct" FS l]; a99 = p99["onyx" FS l] - p99["direct" FS l]
        printf "budget: added p50 %d us (<= 150): %s; added p99 %d us (<= 300): %s\n", a50, mark(a50 <= 150), a99, mark(a99 <= 300)
      }
      printf "budget: Private_Dirty after the load %.1f MB (<= 40): %s\n", dirty / 1024, mark(dirty / 1024 <= 40)
    }' "$tmp/rows"
fi

if [ -s "$tmp/cpu" ]; then
  echo
  echo "CPU per request on the proxy's own core, and the rate that core could carry:"
  awk -F'|' '{ printf "  %-6s %-28s %6.1f us (user %5.1f + system %5.1f)  -> %6.0f req/s per core\n",
    $1, $2, $3 + $4, $3, $4, 1e6 / ($3 + $4) }' "$tmp/cpu"
fi

[ -z "${ONLY:-}" ] || exit 0
ttfb() { # base-url model key
  for _ in $(seq 200); do
    curl -s -o /dev/null -w '%{time_starttransfer}\n' "$1/v1/chat/completions" -H "Authorization: Bearer $3" \
      -H 'content-type: application/json' \
      -d "{\"model\":\"$2\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"
  done | sort -n | awk '{a[NR]=$1} END {printf "%.3f ms", a[int(NR/2)]*1000}'
}
echo "streaming time to first byte, median of 200 (near layout): direct $(ttfb "${near%/v1}" fake-echo "$upstream_key"), through onyx $(ttfb "$onyx" near/fake-echo "$KEY")"
