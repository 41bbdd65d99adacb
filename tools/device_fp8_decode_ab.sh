#!/usr/bin/env bash
# One device call for the fp8 decode attention kernel's variants (kernels/flash_decode_fp8.cu): builds, runs the
# attention parity tests with each variant, then times `bench one-batch` (Qwen3-8B, dummy bf16 weights, fp8 KV) and,
# with THROUGHPUT=N, `bench throughput` N x (1000 + 1000) for each, in the same binary on the same card.
#
#   device run, carry [".devdeps"]:  tools/device_fp8_decode_ab.sh
#   env: MODES ("default registers widen": RS_FP8_DECODE values; "default" leaves it unset), BATCHES (64,256),
#        INPUT_LEN (1024), THROUGHPUT (unset: none), SKIP_BUILD=1 (a warm machine), OUT (logs; /tmp/rs-fp8-decode)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
out=${OUT:-/tmp/rs-fp8-decode}
mkdir -p "$out"
build=/tmp/rs-cuda-build
status=0
if [[ -z "${SKIP_BUILD:-}" ]]; then
  OUT="$out/build" ONLY_BUILD=1 tools/device_test_cuda.sh radixserve cuda_backend_test || status=1
fi
export LD_LIBRARY_PATH="/tmp/rs-devdeps/usr/lib/x86_64-linux-gnu:/tmp/rs-devdeps/usr/lib/x86_64-linux-gnu/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name --format=csv,noheader
for mode in ${MODES:-default registers widen}; do
  env_mode=()
  [[ "$mode" == default ]] || env_mode=(RS_FP8_DECODE="$mode")
  echo "== $mode: attention parity"
  env "${env_mode[@]}" RS_REQUIRE_CUDA=1 timeout 200 "$build/tests/cuda_backend_test" \
    --gtest_filter='*StoreKvAndAttention*:*QkvAttentionDecode*' > "$out/parity_$mode.log" 2>&1 || status=1
  grep -E "^\[  (PASSED|FAILED)" "$out/parity_$mode.log"
  echo "== $mode: bench one-batch ${BATCHES:-64,256} in ${INPUT_LEN:-1024}"
  env "${env_mode[@]}" timeout 150 "$build/bin/radixserve" bench one-batch --model configs/Qwen3-8B --load-format dummy \
    --backend cuda --kv-cache-dtype fp8 --batch-size "${BATCHES:-64,256}" --input-len "${INPUT_LEN:-1024}" \
    --output-len 32 > "$out/one_batch_$mode.log" 2>&1 || status=1
  grep -E "^ +[0-9]+ |batch  prefill" "$out/one_batch_$mode.log" | tail -4
  if [[ -n "${THROUGHPUT:-}" ]]; then
    echo "== $mode: bench throughput $THROUGHPUT x (1000 + 1000)"
    env "${env_mode[@]}" timeout 200 "$build/bin/radixserve" bench throughput --model configs/Qwen3-8B \
      --load-format dummy --backend cuda --kv-cache-dtype fp8 --num-prompts "$THROUGHPUT" --input-len 1000 \
      --output-len 1000 --max-running-requests "$THROUGHPUT" > "$out/throughput_$mode.log" 2>&1 || status=1
    grep -iE "output token throughput|preemptions" "$out/throughput_$mode.log"
  fi
done
echo "== done (status $status)"
exit $status
