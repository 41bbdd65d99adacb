#!/usr/bin/env bash
# Before/after timings from one call on the GPU machine. "After" is this working tree; "before" is a copy of it with
# PATCH reverse-applied (the device copy's .git is stale: never check anything out there). Builds both, runs the
# CUDA parity tests (TESTS, a gtest filter of cuda_backend_test) on "after", then every line of BENCH_FILE on
# before and after in turn, ROUNDS times. Logs and JSON go to $OUT/ab (and all of them, builds' logs aside, to
# $OUT/ab.tar.gz: the device tool returns only a few files); $OUT/ab/summary.txt has one line per run.
#
#   on the dev machine:  git diff BASE_REV HEAD -- src > .baseline/change.patch   (carry .baseline and .devdeps)
#   on the GPU machine:  tools/device_ab.sh .baseline/change.patch .baseline/bench.txt
#
# More than two trees: PATCH may be a comma-separated list NAME=FILE,... (e.g. `before=.baseline/all.patch,
# mid=.baseline/last.patch`): each NAME is this tree with its FILE reverse-applied, timed beside "after" in the
# list's order. One call then compares a stack of changes (builds cost ~1-2 min each).
#
# BENCH_FILE: one radixserve command line per line, without the binary (e.g. `bench --model configs/Qwen3-8B
# --load-format dummy --backend cuda --prompt-tokens 512 --decode-tokens 2 --repeats 3`), or a served load
# `serve SERVE_ARGS | bench serve BENCH_ARGS` (the server on port 8123, --base-url added to the bench). Lines starting
# with # are skipped.
# env: ROUNDS (1), TESTS (gtest filter; empty skips the parity run), SKIP_BEFORE=1 (build and run only "after"),
#      SKIP_BUILD=1 (a warm machine: reuse /tmp/ab-build-<name>).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
bench_file=$(realpath "$2")
out=${OUT:-/tmp}/ab
mkdir -p "$out"
log() { echo "== $(date +%T) $*" | tee -a "$out/summary.txt"; }

# The trees other than "after": NAME -> the patch whose reverse gives it.
declare -A patch_of=()
others=()
if [[ "$1" == *=* ]]; then
  IFS=, read -ra pairs <<< "$1"
  for pair in "${pairs[@]}"; do
    others+=("${pair%%=*}")
    patch_of[${pair%%=*}]=$(realpath "${pair#*=}")
  done
else
  others=(before)
  patch_of[before]=$(realpath "$1")
fi
[[ "${SKIP_BEFORE:-}" == 1 ]] && others=()
declare -A source_of=([after]=$(pwd))
for tree in "${others[@]}"; do
  source_of[$tree]=/tmp/ab-$tree
  [[ "${SKIP_BUILD:-}" == 1 ]] && continue
  rm -rf "/tmp/ab-$tree" && mkdir -p "/tmp/ab-$tree"
  tar --exclude=./.git --exclude=./build -cf - . | tar -C "/tmp/ab-$tree" -xf -
  (cd "/tmp/ab-$tree" && patch -R -p1 --quiet < "${patch_of[$tree]}") ||
    { log "PATCH FOR $tree DID NOT REVERSE-APPLY"; exit 2; }
done
trees=("${others[@]}" after)
for tree in "${trees[@]}"; do
  [[ "${SKIP_BUILD:-}" == 1 ]] && break
  log "build $tree"
  targets=(radixserve)
  [[ "$tree" == after ]] && targets+=(cuda_backend_test)  # the parity tests run on "after" only
  SOURCE_DIR=${source_of[$tree]} BUILD_DIR=/tmp/ab-build-$tree ONLY_BUILD=1 OUT="$out/build-$tree" \
    tools/device_test_cuda.sh "${targets[@]}" > "$out/build-$tree.txt" 2>&1 || { log "BUILD $tree FAILED"; tail -20 "$out/build-$tree.txt"; exit 1; }
done
libdir="${DEPS_PREFIX:-/tmp/rs-devdeps}/usr/lib/x86_64-linux-gnu"
export LD_LIBRARY_PATH="$libdir:$libdir/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee -a "$out/summary.txt"

if [[ -n "${TESTS:-}" ]]; then
  log "parity ($TESTS) on after"
  RS_REQUIRE_CUDA=1 /tmp/ab-build-after/tests/cuda_backend_test --gtest_filter="$TESTS" > "$out/parity.txt" 2>&1
  log "parity exit $? ($(grep -cE '^\[  FAILED' "$out/parity.txt") failed lines)"
fi

run_line() {  # tree, run index, command line
  local app=/tmp/ab-build-$1/bin/radixserve name=$2 line=$3
  if [[ "$line" == serve\ *\|* ]]; then
    local serve_args=${line%%|*} bench_args=${line#*|}
    # shellcheck disable=SC2086
    $app ${serve_args} --port 8123 > "$out/$name.server.log" 2>&1 &
    local pid=$!
    for _ in $(seq 1 180); do
      python3 -c 'import urllib.request; urllib.request.urlopen("http://127.0.0.1:8123/health")' 2>/dev/null && break
      sleep 1
    done
    # shellcheck disable=SC2086
    $app ${bench_args} --base-url http://127.0.0.1:8123 --json "$out/$name.json" > "$out/$name.txt" 2>&1
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  else
    # shellcheck disable=SC2086
    $app ${line} > "$out/$name.txt" 2>&1
  fi
  # bench: its JSON's tokens_per_s fields; bench one-batch and bench serve: their table's data rows.
  log "$name: $(grep -E '_tokens_per_s|^ +[0-9]+ +[0-9.]+ +[0-9.]+ ' "$out/$name.txt" | tail -3 | tr -s ' ' | tr '\n' ' ')"
}

index=0
while IFS= read -r line; do
  [[ -z "$line" || "$line" == \#* ]] && continue
  index=$((index + 1))
  log "line $index: $line"
  for round in $(seq 1 "${ROUNDS:-1}"); do
    # Alternate the order by round, so no tree always runs on a cold (or a warm) card.
    order=("${trees[@]}")
    if ((round % 2 == 0)); then
      order=()
      for ((i = ${#trees[@]} - 1; i >= 0; --i)); do order+=("${trees[i]}"); done
    fi
    for tree in "${order[@]}"; do run_line "$tree" "l${index}-r${round}-${tree}" "$line"; done
  done
done < "$bench_file"
log "done"
# The device returns only a few files from $OUT: everything travels in one archive beside the summary.
tar -C "$out" -czf "${OUT:-/tmp}/ab.tar.gz" --exclude='build-*' . && log "logs in ab.tar.gz"
