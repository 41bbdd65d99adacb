#!/usr/bin/env bash
# Issue 43's speed question on the GPU machine: one DFlash proposal (the context rows of one accepted block, then a
# block of 16) against a target decode step, and the verify pass of its 15 drafts, for Qwen3-8B with a 5-layer
# drafter of its shape (configs/Qwen3-8B-DFlash), dummy weights; bench one-batch prints the projected speed-up at
# accept lengths 3, 5 and 7.
#
#   device run, carry [".devdeps"]: tools/device_dflash_bench.sh  (after a build; SKIP_BUILD=1 on a warm machine)
#   env: BATCHES (1,8), INPUT_LEN (512), ROWS (context rows per proposal; 4), OUT (logs; /tmp/rs-dflash)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
out=${OUT:-/tmp/rs-dflash}
mkdir -p "$out"
status=0
if [[ -z "${SKIP_BUILD:-}" ]]; then
  OUT="$out" ONLY_BUILD=1 tools/device_test_cuda.sh radixserve || status=1
fi
export LD_LIBRARY_PATH="/tmp/rs-devdeps/usr/lib/x86_64-linux-gnu:/tmp/rs-devdeps/usr/lib/x86_64-linux-gnu/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
timeout 300 /tmp/rs-cuda-build/bin/radixserve bench one-batch --model configs/Qwen3-8B --load-format dummy \
  --backend cuda --dflash-draft-model configs/Qwen3-8B-DFlash --draft-context-rows "${ROWS:-4}" \
  --batch-size "${BATCHES:-1,8}" --input-len "${INPUT_LEN:-512}" --output-len 64 --verify-drafts 15 \
  --json "$out/dflash_bench.json" > "$out/dflash_bench.log" 2>&1 || status=1
grep -vE "^\[|loading" "$out/dflash_bench.log" | tail -20
exit $status
