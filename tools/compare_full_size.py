#!/usr/bin/env python3
"""compare_full_size.py — greedy tokens of radixserve (CUDA, bf16 fast path) against transformers (bf16, sdpa) on a
full-size random-weight checkpoint of a real architecture, with long prompts (chunked prefill, many KV pages, the
tensor-core attention kernel).

    python3 tools/compare_full_size.py --config configs/Qwen3-8B --app build/bin/radixserve \
        --prompt-lens 2048,8192 --new-tokens 16 --work /tmp/full --json $OUT/full_size.json

Builds the checkpoint with transformers' own model class (its initialiser, seeded) in bf16 on the GPU and saves it
with save_pretrained; transformers then generates greedily (with its KV cache) from random prompts, recording each
step's top-1 minus top-2 logit margin; radixserve generates from the same ids in a separate process. Reported per
prompt: how many leading tokens agree, and where they first differ, the reference's margin there (a small margin is
a near-tie that bf16 rounding may flip). Exits 1 if a prompt's first difference comes at a margin of more than
--tie-ulps bf16 ulps of the top logit (transformers' own bf16 logits cannot resolve less).
Needs torch, transformers and safetensors (the GPU machine has them); no network.
"""

import argparse
import json
import math
import os
import subprocess
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402


def build_checkpoint(config_dir, work, seed):
    cfg = transformers.AutoConfig.from_pretrained(config_dir)
    torch.manual_seed(seed)
    with torch.device("cuda"):
        try:
            model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
        except TypeError:
            model = transformers.AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16)
    model.eval()
    model.config._attn_implementation = "sdpa"
    model.save_pretrained(work, safe_serialization=True)
    return model


def reference(model, prompt, new_tokens):
    ids = torch.tensor([prompt], device="cuda")
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=new_tokens, do_sample=False, output_scores=True,
                             return_dict_in_generate=True, pad_token_id=0, eos_token_id=None)
    tokens = out.sequences[0, len(prompt):].tolist()
    margins, tops = [], []
    for step in out.scores:
        top = torch.topk(step[0].float(), 2).values
        margins.append(float(top[0] - top[1]))
        tops.append(float(top[0]))
    return tokens, margins, tops


def bf16_ulp(x):
    # Spacing of bf16 numbers (8 significant bits) at |x|: the reference's own logits are bf16.
    return 2.0 ** (math.floor(math.log2(max(abs(x), 1e-30))) - 7)


def radixserve(app, model_dir, prompt, new_tokens, extra):
    cmd = [app, "generate", "--model", model_dir, "--backend", "cuda", "--prompt-ids", ",".join(map(str, prompt)),
           "--max-new-tokens", str(new_tokens), "--ignore-eos"] + extra
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if run.returncode != 0:
        raise RuntimeError(f"radixserve failed ({run.returncode}): {run.stderr[-2000:]}")
    return json.loads(run.stdout)["output_ids"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True, help="folder with the architecture's config.json")
    ap.add_argument("--app", required=True, help="radixserve binary")
    ap.add_argument("--prompt-lens", default="2048,8192")
    ap.add_argument("--new-tokens", type=int, default=16)
    ap.add_argument("--work", default="/tmp/full_size_checkpoint")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tie-ulps", type=float, default=2.0,
                    help="a margin of at most this many bf16 ulps of the top logit is a near-tie")
    ap.add_argument("--json", default=None)
    ap.add_argument("--extra", default="", help="more radixserve generate arguments, space-separated")
    args = ap.parse_args()

    model = build_checkpoint(args.config, args.work, args.seed)
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(args.seed + 1)
    cases = []
    for length in map(int, args.prompt_lens.split(",")):
        prompt = torch.randint(0, vocab, (length,), generator=gen).tolist()
        tokens, margins, tops = reference(model, prompt, args.new_tokens)
        cases.append({"prompt_len": length, "prompt": prompt, "reference": tokens, "margins": margins, "tops": tops})
    del model
    torch.cuda.empty_cache()

    failed = False
    report = {"config": args.config, "transformers": transformers.__version__, "torch": torch.__version__,
              "reference": "transformers bf16 sdpa generate (greedy, KV cache)", "cases": []}
    for case in cases:
        ours = radixserve(args.app, args.work, case["prompt"], args.new_tokens, args.extra.split())
        agree = next((i for i, (a, b) in enumerate(zip(ours, case["reference"])) if a != b), len(ours))
        margin_at = case["margins"][agree] if agree < len(case["margins"]) else None
        ulps_at = margin_at / bf16_ulp(case["tops"][agree]) if margin_at is not None else None
        near_tie = margin_at is None or ulps_at <= args.tie_ulps
        if agree < len(ours) and not near_tie:
            failed = True
        entry = {"prompt_len": case["prompt_len"], "agree": agree, "of": len(ours), "reference": case["reference"],
                 "radixserve": ours, "margin_at_first_difference": margin_at,
                 "bf16_ulps_at_first_difference": ulps_at,
                 "min_margin": min(case["margins"]), "median_margin": sorted(case["margins"])[len(case["margins"]) // 2]}
        report["cases"].append(entry)
        print(f"prompt {case['prompt_len']}: {agree}/{len(ours)} greedy tokens agree"
              + (f"; first difference at a reference margin of {margin_at:.4f} ({ulps_at:.0f} bf16 ulp)"
                 if margin_at is not None else "")
              + f" (min margin {entry['min_margin']:.4f}, median {entry['median_margin']:.4f})", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
