#!/usr/bin/env bash
# Share of an agent's prompt that is an identical prefix of the previous turn's
# (what a provider's prompt cache can reuse), over a chat of TURNS turns through
# the real gateway against the recording fake Anthropic and OpenAI upstreams.
#   bench/prompt_cache.sh [TURNS]      (default 20)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
cargo build -q -p onyx-bench --bin prompt-cache-bench
"$CARGO_TARGET_DIR/debug/prompt-cache-bench" "${1:-20}"
