#!/usr/bin/env bash
# Decode and batching benchmarks on the GPU machine (dummy bf16 weights of the real shapes): the single-sequence
# `radixserve bench` and `radixserve bench one-batch`, optionally beside a baseline binary built from an older tree,
# so before and after come from one run on one card. Results (JSON, logs) go to $OUT/bench (tar it to fetch).
#
#   tools/device_bench_decode.sh APP [BASELINE_APP]      # after tools/device_test_cuda.sh built APP
#
# env: MODELS (default: Qwen3-8B Llama-3.1-8B-Instruct), BATCHES (1,8,32,128), LONG=1 adds batch-1 decode at 16k
#      context, DEPS_PREFIX (/tmp/rs-devdeps: the libraries device_test_cuda.sh unpacked).
set -uo pipefail
cd "$(dirname "$0")/.."
app=$1
base=${2:-}
results=${OUT:-/tmp}/bench
mkdir -p "$results"
libdir="${DEPS_PREFIX:-/tmp/rs-devdeps}/usr/lib/x86_64-linux-gnu"
export LD_LIBRARY_PATH="$libdir:$libdir/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
log() { echo "== $(date +%T) $*"; }
summary() { python3 - "$@" <<'PY'
import json, sys
for path in sys.argv[1:]:
    try:
        d = json.load(open(path))
    except Exception as e:
        print(f"  {path}: unreadable ({e})"); continue
    if "results" in d:
        for r in d["results"]:
            keys = [k for k in r if "tok" in k or "ms" in k or "fraction" in k or k == "batch_size"]
            print("  " + path.split("/")[-1] + ": " + ", ".join(f"{k}={r[k]:.4g}" if isinstance(r[k], float) else f"{k}={r[k]}" for k in keys))
    else:
        print(f"  {path.split('/')[-1]}: prefill {d.get('prefill_tokens_per_s', 0):.0f} tok/s, decode {d.get('decode_tokens_per_s', 0):.1f} tok/s")
PY
}

for model in ${MODELS:-Qwen3-8B Llama-3.1-8B-Instruct}; do
  dir=configs/$model
  common=(--model "$dir" --load-format dummy --backend cuda)
  if [[ -n "$base" ]]; then
    log "baseline bench $model (512-token prompt, 128 decoded)"
    timeout 300 "$base" bench "${common[@]}" --prompt-tokens 512 --decode-tokens 128 --repeats 2 \
      >"$results/base_bench_$model.json" 2>>"$results/bench.log"
    summary "$results/base_bench_$model.json"
  fi
  log "bench $model (512-token prompt, 128 decoded)"
  timeout 300 "$app" bench "${common[@]}" --prompt-tokens 512 --decode-tokens 128 --repeats 2 \
    >"$results/bench_$model.json" 2>>"$results/bench.log"
  summary "$results/bench_$model.json"
  log "bench one-batch $model (512 + 128, batch ${BATCHES:-1,8,32,128})"
  timeout 400 "$app" bench one-batch "${common[@]}" --batch-size "${BATCHES:-1,8,32,128}" --input-len 512 \
    --output-len 128 --json "$results/one_batch_$model.json" >>"$results/bench.log" 2>&1
  summary "$results/one_batch_$model.json"
done
if [[ "${LONG:-}" == 1 ]]; then
  log "bench one-batch Qwen3-8B at 16k context (batch 1)"
  timeout 300 "$app" bench one-batch --model configs/Qwen3-8B --load-format dummy --backend cuda --batch-size 1 \
    --input-len 16384 --output-len 64 --json "$results/one_batch_16k.json" >>"$results/bench.log" 2>&1
  summary "$results/one_batch_16k.json"
fi
log "done"
