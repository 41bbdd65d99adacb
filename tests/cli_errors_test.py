#!/usr/bin/env python3
"""CTest: every bad argument to `radixserve tokenize` and `generate` is refused with a clear message and a non-zero
exit, before any model loads: token ids outside int32 or the vocabulary (4294967297 once wrapped to 1), NaN sampling
parameters (they passed CLI11's range checks), an empty --prompt (once "give exactly one of ..."), and bounds shown
readably (CLI11's PositiveNumber printed DBL_MAX's 309 digits), `serve` of a folder without a tokenizer (unless
--skip-tokenizer-init), and weights larger than the free memory (refused in seconds, before loading).

Usage: cli_errors_test.py RADIXSERVE DEMO_MODEL_DIR"""
import pathlib
import subprocess
import sys
import time

from test_checks import check


def run(binary: str, args: list, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([binary] + args, input=stdin, capture_output=True, text=True, timeout=120)


def expect_error(binary: str, args: list, message: str, stdin: str = "") -> None:
    result = run(binary, args, stdin)
    shown = f"radixserve {' '.join(args)}: exit {result.returncode}, stderr:\n{result.stderr[-2000:]}"
    check(result.returncode != 0, shown)
    check(message in result.stderr, f"expected '{message}' in\n{shown}")
    check(len(result.stderr) < 1000, f"an unreadably long message:\n{shown}")


def main() -> None:
    binary, model = sys.argv[1], sys.argv[2]
    decode = ["tokenize", "--model", model, "--decode"]
    ok = run(binary, decode, '{"ids": [1, 2]}')
    check(ok.returncode == 0 and '"text"' in ok.stdout, f"decoding valid ids failed: {ok.stderr}")
    for bad in ["4294967297", "-1", "9999999", "18446744073709551615"]:
        expect_error(binary, decode, f"has id {bad}, outside the vocabulary [0, ", '{"ids": [1, ' + bad + "]}")

    generate = ["generate", "--model", model, "--prompt-ids", "1,2"]
    for option in ["--temperature", "--top-p", "--min-p", "--repetition-penalty", "--presence-penalty",
                   "--frequency-penalty"]:
        expect_error(binary, generate + [option, "nan"], f"{option}: nan is not a number")
    expect_error(binary, generate + ["--top-p", "1.5"], "--top-p: 1.5 is not a number in [0, 1]")
    expect_error(binary, generate + ["--max-new-tokens", "0"], "--max-new-tokens: 0 is not a number > 0")
    expect_error(binary, generate + ["--temperature", "-1"], "--temperature: -1 is not a number >= 0")
    expect_error(binary, ["generate", "--model", model, "--prompt", ""], "--prompt is empty")
    expect_error(binary, ["generate", "--model", model], "give exactly one of --prompt-ids and --prompt")
    # serve refuses a model folder without a tokenizer unless told to serve token ids only (before it listens).
    fixture = str(pathlib.Path(model).resolve().parent.parent / "tests/data/models/qwen3")
    expect_error(binary, ["serve", "--model", fixture, "--port", "0"], "pass --skip-tokenizer-init")
    # Weights that cannot fit are refused before loading, in seconds, with the numbers (gpt-oss-120b's dummy weights
    # need ~61 GiB: more than this machine's free memory; on a larger one the check is skipped).
    repo = pathlib.Path(model).resolve().parent.parent
    free_gib = next((int(line.split()[1]) / 2**20 for line in open("/proc/meminfo") if line.startswith("MemAvailable:")),
                    0)
    if 0 < free_gib < 55:
        started = time.monotonic()
        expect_error(binary, ["generate", "--model", str(repo / "configs/gpt-oss-120b"), "--load-format", "dummy",
                              "--prompt-ids", "1,2"], "its weights need at least 60.")
        check(time.monotonic() - started < 20, f"the refusal took {time.monotonic() - started:.1f} s")
    print("ok")


if __name__ == "__main__":
    main()
