#!/usr/bin/env bash
# Peak memory of the gateway under a burst of UI logins: N wrong passwords at
# once, each argon2id check allocating 19 MiB. Prints the process's peak RSS
# (VmHWM) before and after the burst, and how many logins were checked.
#
#   bench/login_memory.sh [BENCH_ONYX_BIN] [N]
#
# With PROXY=1 (the default) the gateway trusts 127.0.0.1's X-Forwarded-For
# and each login names its own address, so none is throttled and all N are
# checked; PROXY=0 sends them all from 127.0.0.1 (a gateway that counts
# attempts before checking them checks five). Run it against an older binary
# with PROXY=0 to see the burst without the throttle's reservation or the
# limit on checks at once.
set -euo pipefail
bin=${1:-${BENCH_ONYX_BIN:-target/release/onyx}}
n=${2:-32}
proxy=${PROXY:-1}
dir=$(mktemp -d)
trap 'kill "${pid:-}" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$dir"' EXIT

hash=$("$bin" hash-password <<<"right horse" 2>/dev/null | tail -1)
trusted=""
[ "$proxy" = 1 ] && trusted='trustedProxy: { header: "X-Forwarded-For", from: ["127.0.0.1"] },'
cat >"$dir/onyx.json5" <<EOF
{ gateway: { $trusted auth: { apiKeys: ["onyx_sk_bench_key_0123456789"], passwordHash: "$hash" } } }
EOF
HOME=$dir ONYX_DATA_DIR=$dir/data ONYX_LOG=warn "$bin" serve --listen 127.0.0.1:0 --config "$dir/onyx.json5" >"$dir/out" 2>"$dir/err" &
pid=$!
for _ in $(seq 100); do grep -q '^listening on ' "$dir/out" && break; sleep 0.2; done
url=$(sed -n 's/^listening on //p' "$dir/out")
login() { curl -s -o /dev/null -w '%{http_code}\n' -H 'content-type: application/json' -H "x-forwarded-for: $1" -d "{\"password\": \"$2\"}" "$url/auth/login"; }
login 198.51.100.1 "right horse" >/dev/null
peak() { awk '/VmHWM/ {print int($2 / 1024)}' "/proc/$pid/status"; }
before=$(peak)
statuses=$(for i in $(seq "$n"); do login "203.0.113.$i" "wrong horse" & done; wait)
after=$(peak)
echo "logins: $n at once (proxy=$proxy); answers: $(sort <<<"$statuses" | uniq -c | xargs)"
echo "peak RSS: $before MiB before, $after MiB after (+$((after - before)) MiB)"
