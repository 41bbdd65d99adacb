#!/usr/bin/env python3
"""CTest for `radixserve bench one-batch`: runs it on a tiny fixture on the CPU and checks the --json report (one entry
per batch size, in order, with positive rates, a fraction of the bandwidth bound in (0, 1.5], KV bytes per decode step
recomputed here from config.json, the device and the build's git revision) and the table on stdout. With
--plain-bench it also checks that plain `radixserve bench` still prints its JSON and still requires --model.

Usage: bench_one_batch_test.py RADIXSERVE MODEL_DIR [--plain-bench] -- ONE_BATCH_ARGS...  (needs --batch-size,
--input-len and --output-len among them)"""
import json
import math
import pathlib
import re
import subprocess
import sys
import tempfile

from test_checks import check


def arg_value(args: list, name: str) -> str:
    check(name in args, f"the test needs {name} among the one-batch arguments")
    return args[args.index(name) + 1]


def expected_kv_bytes_per_step(config: dict, dtype: str, batch: int, input_len: int, output_len: int) -> float:
    """Mean over the decode steps of what every sequence reads: its context (a window at most) in every layer."""
    layers = config["num_hidden_layers"]
    types = config.get("layer_types") or ["full_attention"] * layers
    windows = [config["sliding_window"] if t == "sliding_attention" else 0 for t in types if t != "linear_attention"]
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    token_bytes = 2 * config["num_key_value_heads"] * head_dim * {"f32": 4, "bf16": 2, "f16": 2}[dtype.lower()]
    total = 0
    for step in range(output_len):
        context = input_len + step + 1
        total += sum(min(context, w) if w else context for w in windows) * token_bytes
    return batch * total / output_len


def expected_state_bytes_per_step(config: dict, batch: int) -> float:
    """Hybrid models: every sequence reads and writes its f32 recurrent state (conv + delta rule) of each
    gated-delta-net layer once per decode step."""
    linear = sum(t == "linear_attention" for t in config.get("layer_types") or [])
    if not linear:
        return 0.0
    nk, nv = config["linear_num_key_heads"], config["linear_num_value_heads"]
    dk, dv = config["linear_key_head_dim"], config["linear_value_head_dim"]
    conv = (2 * nk * dk + nv * dv) * (config["linear_conv_kernel_dim"] - 1)
    return 2.0 * batch * linear * (conv + nv * dk * dv) * 4


def git_revision_expected(source_dir: pathlib.Path) -> bool:
    """True when the sources are a git checkout that git can read, so the build must know its revision."""
    try:
        return subprocess.run(["git", "-C", str(source_dir), "rev-parse", "HEAD"], capture_output=True).returncode == 0
    except OSError:
        return False


def check_one_batch(radixserve: str, model_dir: pathlib.Path, args: list) -> None:
    batch_sizes = [int(b) for b in arg_value(args, "--batch-size").split(",")]
    input_len, output_len = int(arg_value(args, "--input-len")), int(arg_value(args, "--output-len"))
    config = json.loads((model_dir / "config.json").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        json_path = pathlib.Path(tmp) / "one_batch.json"
        cmd = [radixserve, "bench", "one-batch", "--model", str(model_dir), *args, "--json", str(json_path)]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        check(run.returncode == 0, f"{' '.join(cmd)} exited {run.returncode}:\n{run.stdout}\n{run.stderr}")
        check(json_path.exists(), "no JSON report written")
        report = json.loads(json_path.read_text())
    print(run.stdout)

    check("prompt_tokens" not in run.stdout, "plain `bench` ran as well as `bench one-batch`")
    main_table = run.stdout.split("speculative verify pass")[0]  # the verify table, if any, follows
    table_batches = [int(line.split()[0]) for line in main_table.splitlines() if re.match(r"^\s*\d+\s", line)]
    check(table_batches == batch_sizes, f"table rows {table_batches}, expected {batch_sizes}")

    check(isinstance(report.get("git_revision"), str) and report["git_revision"], "no git revision")
    if git_revision_expected(pathlib.Path(__file__).resolve().parent.parent):
        check(re.fullmatch(r"[0-9a-f]{40}(-dirty)?", report["git_revision"]) is not None,
              f"git revision {report['git_revision']!r} is not a commit of this checkout")
    check(report.get("device", "").startswith("cpu"), f"device {report.get('device')!r} is not the CPU backend")
    check("one-batch" in report.get("command_line", "") and str(json_path) in report["command_line"],
          f"command line {report.get('command_line')!r} is not this run's")
    model = report["model"]
    check(model["architecture"] == config["architectures"][0], f"architecture {model['architecture']}")
    for key, field in [("num_layers", "num_hidden_layers"), ("hidden_size", "hidden_size"),
                       ("num_kv_heads", "num_key_value_heads"), ("vocab_size", "vocab_size")]:
        check(model[key] == config[field], f"model {key} {model[key]} != config.json {field} {config[field]}")
    check(report["input_len"] == input_len and report["output_len"] == output_len, "lengths not reported")
    bandwidth = report["bandwidth_gb_per_s"]
    check(bandwidth > 0, f"bandwidth {bandwidth}")
    check(report["dense_weight_bytes"] > 0, "no weight bytes")
    # MoE: the routed experts' bytes are reported apart and read in the share a batch selects (uniform routing).
    experts = config.get("num_local_experts") or config.get("num_experts") or 0
    top_k = config.get("num_experts_per_tok") or config.get("experts_per_token") or 0
    check((report["expert_weight_bytes"] > 0) == (experts > 0), f"expert bytes {report['expert_weight_bytes']}")
    if experts:
        check(report["num_experts"] == experts and report["experts_per_token"] == top_k, "expert counts")

    results = report["results"]
    check([r["batch_size"] for r in results] == batch_sizes, f"results for {[r['batch_size'] for r in results]}")
    for r in results:
        b = r["batch_size"]
        for key in ["prefill_tokens_per_s", "decode_tokens_per_s", "decode_tokens_per_s_per_seq",
                    "decode_step_ms_median", "bound_tokens_per_s"]:
            check(r[key] > 0 and math.isfinite(r[key]), f"batch {b}: {key} = {r[key]}")
        check(0 < r["fraction_of_bound"] <= 1.5, f"batch {b}: fraction of bound {r['fraction_of_bound']}")
        expected_kv = expected_kv_bytes_per_step(config, report["kv_cache_dtype"], b, input_len, output_len)
        check(math.isclose(r["kv_bytes_per_step"], expected_kv, rel_tol=1e-9),
              f"batch {b}: KV bytes per step {r['kv_bytes_per_step']}, expected {expected_kv}")
        share = 1 - (1 - min(1, top_k / experts)) ** b if experts else 1
        weights = report["dense_weight_bytes"] + report["expert_weight_bytes"] * share
        check(math.isclose(r["weight_bytes_per_step"], weights, rel_tol=1e-9),
              f"batch {b}: weight bytes per step {r['weight_bytes_per_step']}, expected {weights}")
        expected_state = expected_state_bytes_per_step(config, b)
        check(math.isclose(r["state_bytes_per_step"], expected_state, rel_tol=1e-9, abs_tol=0),
              f"batch {b}: recurrent-state bytes per step {r['state_bytes_per_step']}, expected {expected_state}")
        check(math.isclose(r["bytes_per_step"],
                           r["kv_bytes_per_step"] + r["weight_bytes_per_step"] + r["state_bytes_per_step"]),
              f"batch {b}: bytes per step")
        bound = b * bandwidth * 1e9 / r["bytes_per_step"]
        check(math.isclose(r["bound_tokens_per_s"], bound, rel_tol=1e-6),
              f"batch {b}: bound {r['bound_tokens_per_s']}, expected {bound}")
        check(math.isclose(r["decode_tokens_per_s"], b * output_len / r["decode_seconds"], rel_tol=1e-6),
              f"batch {b}: decode rate")
        min_steps = math.ceil(b * input_len / report["max_step_tokens"])
        check(r["prefill_steps"] >= min_steps, f"batch {b}: {r['prefill_steps']} prefill steps, budget needs {min_steps}")
        if "--verify-drafts" in args:  # speculative verify passes: one entry per K, ratios consistent with the times
            drafts = [int(k) for k in arg_value(args, "--verify-drafts").split(",")]
            verify = r.get("verify", [])
            check([v["draft_tokens"] for v in verify] == drafts, f"batch {b}: verify entries {verify}")
            for v in verify:
                ratio = v["step_ms_median"] / r["decode_step_ms_median"]
                check(v["step_ms_median"] > 0 and math.isclose(v["relative_to_decode_step"], ratio, rel_tol=1e-9),
                      f"batch {b}: verify {v}")
                gains = v["projected_speedup"]
                check(math.isclose(gains["1.0"], (v["draft_tokens"] + 1) / ratio, rel_tol=1e-9)
                      and gains["1.0"] >= gains["0.7"] >= gains["0.4"] > 0, f"batch {b}: projected {gains}")
            check("speculative verify pass" in run.stdout, "no verify table printed")


def check_plain_bench(radixserve: str, model_dir: pathlib.Path) -> None:
    cmd = [radixserve, "bench", "--model", str(model_dir), "--prompt-tokens", "8", "--decode-tokens", "2", "--repeats",
           "1"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    check(run.returncode == 0, f"{' '.join(cmd)} exited {run.returncode}:\n{run.stderr}")
    result = json.loads(run.stdout)
    check(result["prompt_tokens"] == 8 and result["decode_tokens_per_s"] > 0, f"plain bench printed {result}")
    run = subprocess.run([radixserve, "bench"], capture_output=True, text=True, timeout=60)
    check(run.returncode != 0 and "--model" in run.stdout + run.stderr, "plain `bench` without --model did not fail")


def main() -> None:
    check(len(sys.argv) >= 4 and "--" in sys.argv, __doc__)
    split = sys.argv.index("--")
    radixserve, model_dir, flags, args = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3:split], sys.argv[split + 1:]
    check_one_batch(radixserve, model_dir, args)
    if "--plain-bench" in flags:
        check_plain_bench(radixserve, model_dir)
    print("ok")


if __name__ == "__main__":
    main()
