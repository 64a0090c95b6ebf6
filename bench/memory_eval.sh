#!/usr/bin/env bash
# Retrieval quality of memory search on the shipped dataset (or your own):
# recall@1/5/10 and MRR for text, vector and hybrid search.
#   bench/memory_eval.sh                       # against the fake Ollama (topic-aware embeddings)
#   bench/memory_eval.sh --url http://127.0.0.1:11434 --model nomic-embed-text   # a real Ollama
#   bench/memory_eval.sh --corpus docs.jsonl --queries queries.jsonl [--qrels qrels.jsonl] ...
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
cargo build --release -q -p onyx-bench --bin memory-eval
if [[ " $* " == *" --url "* || " $* " == *" --embedder none "* ]]; then
  exec "$CARGO_TARGET_DIR/release/memory-eval" "$@"
fi
cargo build -q -p onyx-test-fakes --bin onyx-fake-upstream
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$CARGO_TARGET_DIR/debug/onyx-fake-upstream" --ollama-port "$port" >/dev/null &
pid=$!
trap 'kill $pid 2>/dev/null' EXIT
until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do sleep 0.05; done
"$CARGO_TARGET_DIR/release/memory-eval" --url "http://127.0.0.1:$port" --model all-minilm --dimensions 384 "$@"
