#!/usr/bin/env bash
# The GPU soak (issue 42 item 5), on the GPU machine: builds radixserve with CUDA (tools/device_test_cuda.sh), then for
# each model serves dummy weights and runs tools/soak_test.py for SECONDS with CLIENTS concurrent streams, a third of
# them leaving mid-stream; each model's figures (JSON), time series (CSV), plot (PNG, when matplotlib is there) and
# server log go to $OUT.
#
#   OUT=... tools/device_soak.sh [configs/Qwen3-8B configs/gpt-oss-20b]
#
# env: SECONDS_EACH (300), CLIENTS (256), PROMPT (64-1024), MAX_TOKENS (32-512), SKIP_BUILD=1 (reuse the build),
#      SERVE_FLAGS (extra serve flags), BUILD_DIR, DEPS_PREFIX (as device_test_cuda.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/rs-soak}
build_dir=${BUILD_DIR:-/tmp/rs-cuda-build}
mkdir -p "$out"
if [[ "${SKIP_BUILD:-}" != 1 ]]; then
  OUT="$out/build" ONLY_BUILD=1 BUILD_DIR="$build_dir" tools/device_test_cuda.sh radixserve || {
    tail -30 "$out/build/build.log"
    exit 1
  }
fi
libdir="${DEPS_PREFIX:-/tmp/rs-devdeps}/usr/lib/x86_64-linux-gnu"
export LD_LIBRARY_PATH="$libdir:$libdir/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
models=("$@")
((${#models[@]})) || models=(configs/Qwen3-8B configs/gpt-oss-20b)
status=0
for model in "${models[@]}"; do
  name=$(basename "$model")
  echo "== soak $name: ${SECONDS_EACH:-300} s, ${CLIENTS:-256} clients"
  # shellcheck disable=SC2086
  python3 tools/soak_test.py "$build_dir/bin/radixserve" "$model" --duration "${SECONDS_EACH:-300}" \
    --clients "${CLIENTS:-256}" --warmup "${CLIENTS:-256}" --mix disconnects --prompt-tokens "${PROMPT:-64-1024}" \
    --max-tokens "${MAX_TOKENS:-32-512}" --request-timeout 600 --health-ms 2000 \
    --json "$out/soak-$name.json" --series "$out/soak-$name.csv" --plot "$out/soak-$name.png" \
    --server-log "$out/server-$name.log" -- --load-format dummy --backend cuda --skip-tokenizer-init \
    --max-running-requests "${CLIENTS:-256}" ${SERVE_FLAGS:-} || status=1
done
exit $status
