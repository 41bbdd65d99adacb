#!/usr/bin/env bash
# One device call for the FP8 weight kind: builds (tools/device_test_cuda.sh's environment), runs the FP8 parity
# tests and the quantized-checkpoint goldens on CUDA, checks the dense goldens did not move, then times Qwen3-8B
# (dummy weights) in bf16 and with --quantization fp8 in the same binary on the same card: batch-1/8/32 decode and a
# 4,096-token prefill. Logs under $OUT; a summary table last.
#
#   device run, carry [".devdeps"]:  tools/device_fp8.sh            (env: SKIP_BENCH=1, SKIP_TESTS=1)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
out=${OUT:-/tmp/rs-fp8}
mkdir -p "$out"
build=/tmp/rs-cuda-build
status=0
OUT="$out" ONLY_BUILD=1 tools/device_test_cuda.sh radixserve cuda_backend_test model_quantized_test model_golden_test \
  cpu_kernels_test model_test || status=1
export LD_LIBRARY_PATH="/tmp/rs-devdeps/usr/lib/x86_64-linux-gnu:/tmp/rs-devdeps/usr/lib/x86_64-linux-gnu/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
if [[ -z "${SKIP_TESTS:-}" ]]; then
  echo "== parity: every CUDA op (FP8 linears included)"
  RS_REQUIRE_CUDA=1 timeout 300 "$build/tests/cuda_backend_test" --gtest_filter="${TESTS:-*}" > "$out/parity.log" 2>&1 ||
    status=1
  grep -E "^\[  (PASSED|FAILED)|^\[       OK|FAILED|err " "$out/parity.log" | grep -v "^\[       OK" | head -40
  echo "== quantized checkpoints on CUDA vs their dequantized twins"
  RS_TEST_BACKEND=cuda "$build/tests/model_quantized_test" > "$out/quantized.log" 2>&1 || status=1
  grep -E "^\[|FAILED|PASSED|SKIPPED" "$out/quantized.log" | grep -v "^\[ RUN\|^\[       OK" | head -40
  echo "== dense goldens on CUDA (unchanged path)"
  RS_TEST_BACKEND=cuda "$build/tests/model_golden_test" --gtest_filter='Architectures/*' > "$out/golden.log" 2>&1 ||
    status=1
  grep -E "PASSED|FAILED" "$out/golden.log" | head
fi
if [[ -z "${SKIP_BENCH:-}" ]]; then
  app="$build/bin/radixserve"
  for quant in "" "--quantization fp8"; do
    tag=${quant:+fp8}; tag=${tag:-bf16}
    echo "== Qwen3-8B $tag: bench one-batch b1/8/32"
    timeout 240 "$app" bench one-batch --model configs/Qwen3-8B --load-format dummy --backend cuda $quant \
      --batch-size 1,8,32 --input-len 512 --output-len 64 --json "$out/one_batch_$tag.json" \
      > "$out/one_batch_$tag.log" 2>&1 || { status=1; tail -5 "$out/one_batch_$tag.log"; }
    grep -E "^\s*[0-9]+ |batch|bound" "$out/one_batch_$tag.log" | tail -8
    echo "== Qwen3-8B $tag: prefill 4096"
    timeout 180 "$app" bench --model configs/Qwen3-8B --load-format dummy --backend cuda $quant --prompt-tokens 4096 \
      --decode-tokens 4 --repeats 2 > "$out/prefill_$tag.log" 2>&1 || { status=1; tail -5 "$out/prefill_$tag.log"; }
    grep -iE "prefill|decode" "$out/prefill_$tag.log" | tail -4
  done
fi
echo "== done (status $status)"
exit $status
