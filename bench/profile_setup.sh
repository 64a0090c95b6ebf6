# Sourced by the scripts that profile one Onyx process in front of the fake
# upstreams (instructions.sh): a scratch directory removed on
# exit with every process started, the fake upstream running, and helpers.
# Expects $bin (the release directory).
tmp=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

"$bin/onyx-fake-upstream" > "$tmp/fakes.json" 2>/dev/null &
pids+=($!)
until [ -s "$tmp/fakes.json" ]; do sleep 0.05; done
# A fake's address or key by name: openai, anthropic, ollama, key.
fake() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$tmp/fakes.json" "$1"; }

# Waits for the Onyx started as PID (under a profiler) to print its address in
# OUT, showing LOG if it exits first; then sets $onyx.
wait_listening() { # pid out log
  until grep -q '^listening on' "$2" 2>/dev/null; do
    kill -0 "$1" 2>/dev/null || { cat "$3" >&2; exit 1; }
    sleep 0.2
  done
  onyx=$(sed -n 's/^listening on //p' "$2")
}
