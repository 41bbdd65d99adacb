#!/usr/bin/env python3
"""CTest for `radixserve bench serve`: starts `radixserve serve` on the demo model (CPU), runs the load generator
against it and checks its --json report: every request completed with zero errors, the server's usage counts exactly
what was asked (prompt = prefix + unique tokens, completion = max_tokens), a shared-prefix run's cache hit rate is the
ideal one at concurrency 1 ((N - K) * P / prompt tokens: each prefix misses once) and 0 with --disable-radix-cache,
goodput follows the SLOs, the first token is not held back by Nagle's algorithm, and text prompts and
Poisson arrivals work too; tools/plot_bench.py draws the cached and uncached runs side by side.

Usage: bench_serve_test.py RADIXSERVE MODEL_DIR"""
import json
import pathlib
import subprocess
import sys
import tempfile

from radixserve_server import Server
from test_checks import check, fail


def bench(radixserve: str, url: str, args: list) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        json_path = pathlib.Path(tmp) / "serve.json"
        cmd = [radixserve, "bench", "serve", "--base-url", url, *args, "--json", str(json_path)]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        print(run.stdout)
        check(run.returncode == 0, f"{' '.join(cmd)} exited {run.returncode}:\n{run.stdout}\n{run.stderr}")
        check("cache hit" in run.stdout and "TTFT" in run.stdout, "no summary table on stdout")
        report = json.loads(json_path.read_text())
    check("bench serve" in report["command_line"] and report["git_revision"], "no command line or git revision")
    return report


def check_counts(level: dict, num: int, prompt_len: int, output_len: int) -> None:
    name = f"level {level['level']}"
    check(level["completed"] == num, f"{name}: {level['completed']} of {num} completed: {level['error_examples']}")
    check(sum(level["errors"].values()) == 0, f"{name}: errors {level['errors']}")
    check(level["prompt_tokens"] == num * prompt_len, f"{name}: {level['prompt_tokens']} prompt tokens")
    check(level["completion_tokens"] == num * output_len == level["expected_completion_tokens"],
          f"{name}: {level['completion_tokens']} completion tokens, asked {num * output_len}")
    for key in ["request_throughput", "output_throughput", "duration_s", "client_cpu_ms_per_request"]:
        check(level[key] > 0, f"{name}: {key} = {level[key]}")
    check(0 < level["ttft"]["p50_ms"] <= level["ttft"]["p99_ms"], f"{name}: TTFT {level['ttft']}")
    check(0 < level["itl"]["count"] <= num * (output_len - 1), f"{name}: ITL {level['itl']}")
    check(level["e2e_latency"]["mean_ms"] >= level["ttft"]["mean_ms"], f"{name}: E2E below TTFT")


def main() -> None:
    check(len(sys.argv) == 3, __doc__)
    radixserve, model_dir = sys.argv[1], sys.argv[2]
    num, unique, output, prefix, prefixes = 12, 24, 8, 64, 3
    shared = ["--num-prompts", str(num), "--input-len", str(unique), "--output-len", str(output),
              "--shared-prefix-len", str(prefix), "--num-prefixes", str(prefixes)]
    ideal = (num - prefixes) * prefix / (num * (prefix + unique))

    server = Server(radixserve, model_dir, [])
    report = bench(radixserve, server.url, ["--concurrency", "1,4", *shared, "--slo-ttft-ms", "100000"])
    check([level["level"] for level in report["levels"]] == ["1", "4"], "levels not in order")
    for level in report["levels"]:
        check_counts(level, num, prefix + unique, output)
        check(level["good_requests"] == num, f"level {level['level']}: a loose SLO left {level['good_requests']} good")
    one, four = report["levels"]
    check(abs(one["cache_hit_rate"] - ideal) < 0.01, f"hit rate {one['cache_hit_rate']:.3f}, ideal {ideal:.3f}")
    check(0.5 * ideal <= four["cache_hit_rate"] <= ideal + 0.01, f"hit rate at 4: {four['cache_hit_rate']:.3f}")
    check(four["max_in_flight"] == 4 and one["max_in_flight"] == 1, "concurrency not kept")
    # Without TCP_NODELAY on the server, Nagle held each streamed write until the previous one was acknowledged, and
    # the client's delayed ACK (40 ms) then glued whole answers into a few segments: the median TTFT was 47.6 ms on the
    # demo model (2-12 ms with it) and the median inter-token gap 0. Only both together are Nagle's sign: a loaded
    # machine (CI runs tests in parallel on 2 cores) lets tokens queue and leave in one write (gaps of 0 by design), and
    # a sanitizer build is slow (TTFT in the hundreds of ms, gaps too).
    glued = one["itl"]["p50_ms"] <= 0.05 and one["ttft"]["p50_ms"] >= 30
    check(not glued, f"answers glued and delayed as by Nagle at concurrency 1: TTFT {one['ttft']}, ITL {one['itl']}")

    strict = bench(radixserve, server.url, ["--concurrency", "2", "--num-prompts", "4", "--input-len", "16",
                                            "--output-len", "4", "--slo-ttft-ms", "0.001", "--slo-itl-ms", "0.001"])
    check(strict["levels"][0]["completed"] == 4 and strict["levels"][0]["good_requests"] == 0, "strict SLO goodput")
    text = bench(radixserve, server.url, ["--request-rate", "20", "--num-prompts", "5", "--input-len", "12",
                                          "--output-len", "6", "--prompt-format", "text", "--seed", "3"])
    level = text["levels"][0]
    check(level["completed"] == 5 and level["completion_tokens"] == 30 and level["prompt_tokens"] >= 5 * 12,
          f"text prompts at a request rate: {level}")
    server.stop()

    server = Server(radixserve, model_dir, ["--disable-radix-cache"])
    uncached = bench(radixserve, server.url, ["--concurrency", "1,4", *shared])
    for level in uncached["levels"]:
        check_counts(level, num, prefix + unique, output)
        check(level["cached_tokens"] == 0, "--disable-radix-cache still reused prefixes")
    server.stop()
    check_plot({"radix cache": report, "no radix cache": uncached})
    print("ok")


def check_plot(reports: dict) -> None:
    """tools/plot_bench.py draws the reports side by side: a PNG of a plausible size."""
    plot_tool = pathlib.Path(__file__).resolve().parent.parent / "tools" / "plot_bench.py"
    python = "/usr/bin/python3" if pathlib.Path("/usr/bin/python3").exists() else sys.executable  # Debian's matplotlib
    with tempfile.TemporaryDirectory() as tmp:
        paths, labels = [], []
        for label, report in reports.items():
            paths.append(pathlib.Path(tmp) / f"{len(paths)}.json")
            paths[-1].write_text(json.dumps(report))
            labels.extend(["--label", label])
        png = pathlib.Path(tmp) / "plot.png"
        run = subprocess.run([python, str(plot_tool), *map(str, paths), *labels, "--out", str(png)],
                             capture_output=True, text=True, timeout=120)
        check(run.returncode == 0, f"plot_bench.py exited {run.returncode}:\n{run.stdout}\n{run.stderr}")
        data = png.read_bytes()
        check(data.startswith(b"\x89PNG") and len(data) > 20000, f"plot_bench.py wrote {len(data)} bytes")


if __name__ == "__main__":
    main()
