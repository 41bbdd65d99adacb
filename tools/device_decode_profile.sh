#!/usr/bin/env bash
# Where a large decode step's time goes on the GPU: `bench one-batch` of Qwen3-8B (dummy bf16 weights) at a serving
# batch, with a bf16 and an fp8 KV cache, then ncu's kernel-time breakdown of one decode step (tools/ncu_step_breakdown.py)
# and a full ncu report of one decode attention launch (memory throughput, stall reasons).
#
#   device run, carry [".devdeps"]:  tools/device_decode_profile.sh   (after a build; SKIP_BUILD=1 on a warm machine)
#   env: BATCH (256), INPUT_LEN (1024), KV ("auto fp8"), MODEL (configs/Qwen3-8B), OUT (logs; /tmp/rs-profile),
#        NCU=0 skips the ncu runs, FLAGS (extra bench flags, e.g. "--quantization fp8"), KERNEL (regex of the kernel
#        the full report profiles; default the decode attention), SKIP (launches of it skipped first; 100)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
out=${OUT:-/tmp/rs-profile}
mkdir -p "$out"
build=/tmp/rs-cuda-build
app=$build/bin/radixserve
status=0
if [[ -z "${SKIP_BUILD:-}" ]]; then
  OUT="$out" ONLY_BUILD=1 tools/device_test_cuda.sh radixserve || status=1
fi
export LD_LIBRARY_PATH="/tmp/rs-devdeps/usr/lib/x86_64-linux-gnu:/tmp/rs-devdeps/usr/lib/x86_64-linux-gnu/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
model=${MODEL:-configs/Qwen3-8B}
batch=${BATCH:-256}
len=${INPUT_LEN:-1024}
for kv in ${KV:-auto fp8}; do
  flags="--load-format dummy --backend cuda ${FLAGS:-}"
  [[ "$kv" == auto ]] || flags="$flags --kv-cache-dtype $kv"
  echo "== bench one-batch b$batch in $len, kv $kv"
  timeout 240 "$app" bench one-batch --model "$model" $flags --batch-size "$batch" --input-len "$len" --output-len 32 \
    > "$out/one_batch_$kv.log" 2>&1 || { status=1; tail -5 "$out/one_batch_$kv.log"; }
  grep -E "^ +[0-9]+ |batch  prefill" "$out/one_batch_$kv.log" | tail -3
  [[ "${NCU:-1}" == 0 ]] && continue
  echo "== ncu step breakdown (decode step, kv $kv)"
  timeout 240 ncu --clock-control none --metrics gpu__time_duration.sum --csv --log-file "$out/ncu_$kv.csv" \
    "$app" bench one-batch --model "$model" $flags --batch-size "$batch" --input-len "$len" --output-len 3 \
    --disable-cuda-graph > "$out/ncu_run_$kv.log" 2>&1 || { status=1; tail -5 "$out/ncu_run_$kv.log"; }
  python3 tools/ncu_step_breakdown.py "$out/ncu_$kv.csv" | head -24
  kernel=${KERNEL:-flash_attention_kernel<128, 4, true}
  echo "== ncu full report of one launch of $kernel (kv $kv)"
  timeout 240 ncu --set full --kernel-name-base demangled --kernel-name "regex:$kernel" \
    --launch-skip "${SKIP:-100}" --launch-count 1 \
    "$app" bench one-batch --model "$model" $flags --batch-size "$batch" --input-len "$len" --output-len 6 \
    --disable-cuda-graph > "$out/ncu_full_$kv.txt" 2>&1 || status=1
  grep -E "flash_attention|gemv|Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Registers Per|Shared Memory Config|Block Limit|Warp Cycles Per Issued|Compute \(SM\) Throughput|Eligible Warps|Stall|L1/TEX Hit|Grid Size" "$out/ncu_full_$kv.txt" | head -40
done
echo "== done (status $status)"
exit $status
