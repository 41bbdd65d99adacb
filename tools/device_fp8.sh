#!/usr/bin/env bash
# One device call for the quantized weight kinds (FP8, integers): builds (tools/device_test_cuda.sh's environment),
# runs the parity tests and the quantized-checkpoint goldens on CUDA, checks the dense goldens did not move, then times
# Qwen3-8B (dummy weights) in bf16, FP8 and int4 in the same binary on the same card: decode at several batch sizes and
# a 4,096-token prefill. Logs in $OUT/fp8.tar.gz (the device tool returns few files); a summary last.
#
#   device run, carry [".devdeps"]:  tools/device_fp8.sh
#   env: TESTS (gtest filter of cuda_backend_test; default every test), SKIP_TESTS=1, SKIP_BENCH=1, BATCHES (1,8,32),
#        LAB=1 (run bench/cuda/fp8_scale_layouts.cu first), NO_PREFILL=1, BATCHES=none (no one-batch),
#        VARIANTS ("bf16 fp8-channel fp8-block"; also int4-mlx (4-bit g64, LM head too), int4-awq (g128),
#        gguf-q4km / gguf-q8 (a Qwen3-8B GGUF of random blocks from tools/make_gguf_dummy.py, loaded as a file)),
#        THROUGHPUT=N (also bench throughput, N prompts of 1000 + 1000, N running), SKIP_BUILD=1 (a warm machine),
#        KV ("auto"; "auto fp8" also runs each variant with --kv-cache-dtype fp8), INPUT_LEN (one-batch; 512)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
out=${OUT:-/tmp/rs-fp8}
logs=$out/logs
mkdir -p "$logs"
build=/tmp/rs-cuda-build
status=0
if [[ -z "${SKIP_BUILD:-}" ]]; then
  OUT="$logs" ONLY_BUILD=1 tools/device_test_cuda.sh radixserve cuda_backend_test model_quantized_test model_golden_test \
    fp8_scale_layouts || status=1
fi
export LD_LIBRARY_PATH="/tmp/rs-devdeps/usr/lib/x86_64-linux-gnu:/tmp/rs-devdeps/usr/lib/x86_64-linux-gnu/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$logs/gpu.txt"
if [[ -n "${LAB:-}" ]]; then
  echo "== bench/cuda/fp8_scale_layouts.cu"
  timeout 120 "$build/bin/fp8_scale_layouts" 2>&1 | tee "$logs/lab.log" || status=1
fi
if [[ -z "${SKIP_TESTS:-}" ]]; then
  echo "== parity (${TESTS:-every CUDA op})"
  RS_REQUIRE_CUDA=1 timeout 300 "$build/tests/cuda_backend_test" --gtest_filter="${TESTS:-*}" > "$logs/parity.log" 2>&1 ||
    status=1
  grep -E "fp8|FAILED|PASSED|FP8" "$logs/parity.log" | grep -vE "^\[ +(RUN|OK) " | head -60
  echo "== quantized checkpoints on CUDA vs their dequantized twins"
  RS_TEST_BACKEND=cuda "$build/tests/model_quantized_test" > "$logs/quantized.log" 2>&1 || status=1
  grep -E "^\[(qwen|  FAILED|  PASSED)|Failure|FP8" "$logs/quantized.log" | head -40
  echo "== dense goldens on CUDA"
  RS_TEST_BACKEND=cuda "$build/tests/model_golden_test" --gtest_filter='Architectures/*' > "$logs/golden.log" 2>&1 ||
    status=1
  grep -E "PASSED|FAILED" "$logs/golden.log" | head
fi
if [[ -z "${SKIP_BENCH:-}" ]]; then
  app="$build/bin/radixserve"
  export RADIXSERVE_CACHE_DIR=/tmp/rs-gguf-cache
  for mix in q4km:q4_k_m q8:q8_0; do
    IFS=: read -r tag recipe <<< "$mix"
    [[ " ${VARIANTS:-} " == *" gguf-$tag "* ]] || continue
    echo "== making /tmp/Qwen3-8B-$tag.gguf ($recipe, random blocks)"
    python3 tools/make_gguf_dummy.py configs/Qwen3-8B/config.json "/tmp/Qwen3-8B-$tag.gguf" --mix "$recipe" || status=1
  done
  # tag:model folder:extra flags. The same dummy bf16 values, as bf16, quantized per channel on load, and in the
  # 128 x 128 blocks of Qwen's FP8 releases (configs/Qwen3-8B-FP8: dummy weights of an FP8 config quantize so).
  for variant in "fp8-block:configs/Qwen3-8B-FP8:" "bf16:configs/Qwen3-8B:" \
                 "fp8-channel:configs/Qwen3-8B:--quantization fp8" "int4-mlx:configs/Qwen3-8B-MLX4:" \
                 "int4-awq:configs/Qwen3-8B-AWQ:" "gguf-q4km:/tmp/Qwen3-8B-q4km.gguf:" "gguf-q8:/tmp/Qwen3-8B-q8.gguf:"; do
    IFS=: read -r base model base_flags <<< "$variant"
    [[ " ${VARIANTS:-bf16 fp8-channel fp8-block} " == *" $base "* ]] || continue
    [[ "$base" == gguf-* ]] || base_flags="--load-format dummy $base_flags"  # a GGUF file is loaded as it is
    for kv in ${KV:-auto}; do  # KV="auto fp8": each variant with its default cache and with an fp8 one
    tag=$base flags=$base_flags
    [[ "$kv" == auto ]] || { tag="$base+kv-$kv"; flags="$flags --kv-cache-dtype $kv"; }
    if [[ "${BATCHES:-}" != none ]]; then
    echo "== $tag: bench one-batch ${BATCHES:-1,8,32}"
    timeout 240 "$app" bench one-batch --model "$model" --backend cuda $flags \
      --batch-size "${BATCHES:-1,8,32}" --input-len "${INPUT_LEN:-512}" --output-len 64 --json "$logs/one_batch_$tag.json" \
      > "$logs/one_batch_$tag.log" 2>&1 || { status=1; tail -5 "$logs/one_batch_$tag.log"; }
    grep -E "FP8 GEMM|^ +[0-9]+ |batch  prefill" "$logs/one_batch_$tag.log" | sort -u | tail -14
    fi
    [[ -n "${NO_PREFILL:-}" ]] || {
      echo "== $tag: prefill 4096"
      timeout 180 "$app" bench --model "$model" --backend cuda $flags --prompt-tokens 4096 \
        --decode-tokens 4 --repeats 2 > "$logs/prefill_$tag.log" 2>&1 || { status=1; tail -5 "$logs/prefill_$tag.log"; }
      grep -E "prefill_tokens_per_s|decode_tokens_per_s" "$logs/prefill_$tag.log" | tail -2
    }
    if [[ -n "${THROUGHPUT:-}" ]]; then
      echo "== $tag: bench throughput ${THROUGHPUT} x (1000 + 1000)"
      timeout 300 "$app" bench throughput --model "$model" --backend cuda $flags \
        --num-prompts "$THROUGHPUT" --input-len 1000 --output-len 1000 --max-running-requests "$THROUGHPUT" \
        --json "$logs/throughput_$tag.json" > "$logs/throughput_$tag.log" 2>&1 || status=1
      grep -iE "tok/s|req/s" "$logs/throughput_$tag.log" | tail -3
    fi
    done
  done
fi
tar -C "$out" -czf "$out/fp8.tar.gz" logs --exclude='*.o' 2>/dev/null
rm -rf "$logs"
echo "== done (status $status)"
exit $status
