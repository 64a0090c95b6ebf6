#!/usr/bin/env bash
# What a cold release build of Onyx costs: wall time, CPU time, peak memory
# and binary size, for the default build and the gateway alone
# (`--no-default-features`: no Bedrock SDK, no built-in embedder, no chat bots).
# Each build starts from an empty target dir (crates already downloaded), so
# run it on a quiet machine: anything else running inflates the times.
#
#   bench/build_cost.sh                 # both builds, one after the other
#   BUILDS=gateway bench/build_cost.sh  # one of them (default | gateway)
#   OUT=/path bench/build_cost.sh       # where the target dirs go (deleted after)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
cargo fetch --locked -q
printf '| build | wall | CPU (user + sys) | peak RSS of one compiler | binary | stripped |\n'
printf '| --- | ---: | ---: | ---: | ---: | ---: |\n'
for build in ${BUILDS:-default gateway}; do
  case $build in
    default) flags=() ;;
    gateway) flags=(--no-default-features) ;;
    *) echo "unknown build $build (default | gateway)" >&2; exit 2 ;;
  esac
  dir=$out/$build
  rm -rf "$dir"
  # CARGO_BUILD_BUILD_DIR would share a developer's warm build dir: cold means empty.
  env -u CARGO_BUILD_BUILD_DIR CARGO_TARGET_DIR="$dir" /usr/bin/time -f '%e %U %S %M' -o "$out/$build.time" \
    cargo build --release --locked -q -p onyx --bin onyx "${flags[@]}" >"$out/$build.log" 2>&1 \
    || { cat "$out/$build.log" >&2; exit 1; }
  read -r wall user sys peak_kb <"$out/$build.time"
  bin=$dir/release/onyx
  size=$(stat -c %s "$bin")
  strip -o "$out/$build.stripped" "$bin"
  stripped=$(stat -c %s "$out/$build.stripped")
  awk -v b="$build" -v w="$wall" -v u="$user" -v s="$sys" -v p="$peak_kb" -v z="$size" -v t="$stripped" 'BEGIN {
    printf "| %s | %d min %02d s | %d min | %.1f GB | %.1f MB | %.1f MB |\n",
      b, w / 60, w % 60, (u + s) / 60, p / 1048576, z / 1048576, t / 1048576 }'
  rm -rf "$dir" "$out/$build.stripped"
done
