#!/usr/bin/env python3
"""CTest for `radixserve bench throughput`: runs it on the CPU on tiny models and checks the --json report: every
prompt completed with exactly its output tokens, the prompt tokens the scheduler counted are what was sent (random
lengths within [L * (1 - R), L]; a JSONL dataset tokenized as `radixserve tokenize` does), the rates are consistent
with the totals and the duration, and the context (command line, git revision, device, model config) is there.

Usage: bench_throughput_test.py RADIXSERVE RANDOM_MODEL_DIR DATASET_MODEL_DIR (the second needs tokenizer.json)"""
import json
import math
import pathlib
import subprocess
import sys
import tempfile

from test_checks import check


def throughput(radixserve: str, model_dir: str, args: list) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        json_path = pathlib.Path(tmp) / "throughput.json"
        cmd = [radixserve, "bench", "throughput", "--model", model_dir, "--threads", "1", *args, "--json",
               str(json_path)]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        print(run.stdout)
        check(run.returncode == 0, f"{' '.join(cmd)} exited {run.returncode}:\n{run.stdout}\n{run.stderr}")
        check("Output token throughput" in run.stdout, "no summary on stdout")
        report = json.loads(json_path.read_text())
    check("bench throughput" in report["command_line"] and report["git_revision"], "no command line or revision")
    check(report["device"].startswith("cpu"), f"device {report['device']}")
    config = json.loads((pathlib.Path(model_dir) / "config.json").read_text())
    check(report["model"]["architecture"] == config["architectures"][0], "model config not reported")
    check(report["failed"] == 0 and report["short_outputs"] == 0, f"failed or short requests: {report}")
    check(report["output_tokens"] == report["expected_output_tokens"], "output tokens differ from what was asked")
    duration = report["duration_s"]
    for key, total in [("request_throughput", report["completed"]), ("output_throughput", report["output_tokens"]),
                       ("input_throughput", report["input_tokens"]),
                       ("total_token_throughput", report["input_tokens"] + report["output_tokens"])]:
        check(math.isclose(report[key], total / duration, rel_tol=1e-9), f"{key} {report[key]} != {total}/{duration}")
    check(0 < report["ttft"]["mean_ms"] <= report["latency"]["mean_ms"], "TTFT / latency")
    return report


def main() -> None:
    check(len(sys.argv) == 4, __doc__)
    radixserve, random_model, dataset_model = sys.argv[1:]

    num, input_len, output_len = 6, 40, 5
    report = throughput(radixserve, random_model, ["--num-prompts", str(num), "--input-len", str(input_len),
                                                   "--output-len", str(output_len), "--random-range-ratio", "0.5",
                                                   "--max-running-requests", "4", "--chunked-prefill-size", "32"])
    check(report["completed"] == num and report["max_running_requests"] == 4, "not every prompt completed")
    check(num * output_len // 2 <= report["expected_output_tokens"] <= num * output_len, "output lengths")
    check(num * input_len // 2 <= report["input_tokens"] <= num * input_len, f"input tokens {report['input_tokens']}")

    prompts = ["The history of the Debian project", "apt-get install", "Packages are built from source"]
    with tempfile.TemporaryDirectory() as tmp:
        dataset = pathlib.Path(tmp) / "prompts.jsonl"
        rows = [{"prompt": prompts[0], "output_len": 3}, {"prompt": prompts[1]}, {"prompt": prompts[2], "output_len": 7}]
        dataset.write_text("\n".join(json.dumps(row) for row in rows) + "\n\n")
        report = throughput(radixserve, dataset_model, ["--dataset", str(dataset), "--output-len", "4"])
    tokenized = subprocess.run([radixserve, "tokenize", "--model", dataset_model, "--jsonl"], capture_output=True,
                               text=True, timeout=60, input="\n".join(json.dumps(p) for p in prompts) + "\n")
    check(tokenized.returncode == 0, f"tokenize failed: {tokenized.stderr}")
    sent = sum(len(json.loads(line)["ids"]) for line in tokenized.stdout.splitlines())
    check(report["completed"] == 3 and report["expected_output_tokens"] == 14, f"dataset run: {report}")
    check(report["input_tokens"] == sent, f"{report['input_tokens']} prompt tokens, the tokenizer gives {sent}")
    print("ok")


if __name__ == "__main__":
    main()
