#!/usr/bin/env bash
# Serving benchmark on the CPU backend: a dummy-weight Qwen3-0.6B (configs/Qwen3-0.6B) behind `radixserve serve`,
# driven at concurrency 1, 8 and 32 by load_gen.py. Prints the load generator's JSON on stdout.
#   bench/serving/run_cpu_bench.sh [BINARY] [extra load_gen flags...]
set -euo pipefail
cd "$(dirname "$0")/../.."
binary=${1:-build/bin/radixserve}
shift || true
port=${RS_BENCH_PORT:-18123}
"$binary" --log-level warn serve --model configs/Qwen3-0.6B --load-format dummy --port "$port" \
  --max-running-requests 32 --kv-cache-gb 4 --context-length 4096 &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
until python3 -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1])" "http://127.0.0.1:$port/health" 2>/dev/null; do
  kill -0 $server 2>/dev/null || { echo "server exited" >&2; exit 1; }
  sleep 0.5
done
python3 bench/serving/load_gen.py --base-url "http://127.0.0.1:$port" --vocab 151000 "$@"
