#!/usr/bin/env python3
"""make_goldens.py — reference fixtures ("goldens") for radixserve, produced by Hugging Face transformers.

What it does
  Builds tiny random-weight checkpoints with transformers' own config/model classes, saves them the way
  real checkpoints are saved, and writes the reference output of transformers for two prompts each:

    <out>/<name>/config.json              (as written by save_pretrained; gpt_oss_mxfp4 adds quantization_config)
    <out>/<name>/generation_config.json   (if save_pretrained writes one)
    <out>/<name>/model.safetensors
    <out>/<name>/golden.json              {"transformers_version", "torch_version", "dtype_of_weights",
                                           "reference", "cases": [{"prompt_ids", "last_logits", "greedy_ids",
                                           "greedy_margins"}], ...}

  Fixtures: llama (fp32, untied, GQA, llama3 rope scaling), llama_bf16 (bf16 weights, tied), qwen3
  (head_dim != hidden/nh, random q/k norms, tied), qwen3_moe (E=8, K=2, layer 0 dense), gpt_oss (fp32,
  sliding window 32 < prompt, sinks, yarn, biases), gpt_oss_mxfp4 (released-checkpoint layout: bf16
  non-expert tensors + MXFP4 expert blocks/scales).

  Reference = transformers on CPU, fp32 (model.float()), attn_implementation="eager",
  experts_implementation="eager" (when supported), deterministic algorithms, fixed seeds.
  last_logits = full-vocab fp32 logits at the last prompt position (6 significant digits).
  greedy_ids = 32 greedy tokens, each step a full forward pass over prompt+generated tokens WITHOUT a KV cache,
  argmax = lowest index on ties; greedy_margins = top1 - top2 logit at each step. A generate(do_sample=False)
  run with the KV cache is also done as a cross-check and reported under "generate_check".

How to run (needs torch + transformers 5.x + safetensors; no network; CPU only is enough):
  PYTHONUNBUFFERED=1 python3 tools/make_goldens.py --out tests/data/models [--notes notes.txt]
  In this project it is run on the device machine, e.g.
  PYTHONUNBUFFERED=1 python3 tools/make_goldens.py --out /tmp/goldens --notes $OUT/hf_notes.txt
  then tar the output folder back and extract it under tests/data/models/.
  --notes writes the installed transformers source of the relevant functions (for auditing MODELS.md §7)
  and the tensor lists of every fixture.

Files
  make_goldens.py      this entry point: arguments, the seed-bump retry loop, the notes file
  goldens_common.py    offline environment, SEED_BUMP / NOTES, shared helpers (load_ref, greedy, randomize, finish, ...)
  goldens_fixtures.py  the fixture builders fx_* and their RoPE / MXFP4 checks
"""

import argparse
import inspect
import os
import shutil
import sys
import tempfile
import traceback

import goldens_common  # first: sets the offline environment variables before torch/transformers are imported
import torch
import transformers
from goldens_common import Degenerate, log
from goldens_fixtures import fx_gpt_oss, fx_gpt_oss_mxfp4, fx_llama, fx_qwen3, fx_qwen3_moe

# ----------------------------------------------------------------------------------------------------------
# notes: installed source of the numerically relevant functions
# ----------------------------------------------------------------------------------------------------------

def dump_sources():
    import importlib
    targets = [
        ("transformers.models.gpt_oss.modeling_gpt_oss", ["GptOssExperts", "GptOssTopKRouter", "GptOssMLP",
                                                         "eager_attention_forward", "GptOssRMSNorm",
                                                         "GptOssRotaryEmbedding", "_apply_rotary_emb"]),
        ("transformers.models.qwen3_moe.modeling_qwen3_moe", ["Qwen3MoeTopKRouter", "Qwen3MoeSparseMoeBlock",
                                                             "Qwen3MoeExperts", "Qwen3MoeDecoderLayer"]),
        ("transformers.models.qwen3.modeling_qwen3", ["Qwen3RMSNorm", "Qwen3Attention"]),
        ("transformers.models.llama.modeling_llama", ["eager_attention_forward", "LlamaRMSNorm"]),
        ("transformers.modeling_rope_utils", ["_compute_yarn_parameters", "_compute_llama3_parameters"]),
        ("transformers.masking_utils", ["sliding_window_overlay", "sliding_window_causal_mask_function"]),
        ("transformers.integrations.mxfp4", ["convert_moe_packed_tensors", "dequantize_convertops"]),
        ("transformers.integrations.moe", ["use_experts_implementation"]),
        ("transformers.conversion_mapping", ["_build_checkpoint_conversion_mapping"]),
    ]
    out = []
    for mod_name, names in targets:
        try:
            mod = importlib.import_module(mod_name)
        except Exception as e:
            out.append(f"##### {mod_name}: import failed {e}")
            continue
        out.append(f"##### {mod_name} ({getattr(mod, '__file__', '?')})")
        for n in names:
            obj = getattr(mod, n, None)
            if obj is None:
                out.append(f"# {n}: not present")
                continue
            try:
                out.append(inspect.getsource(obj))
            except Exception as e:
                out.append(f"# {n}: no source ({e})")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="output folder (one sub-folder per fixture)")
    ap.add_argument("--notes", default=None, help="write installed HF source excerpts + tensor lists here")
    ap.add_argument("--only", default=None, help="comma-separated fixture names")
    args = ap.parse_args()

    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.set_num_threads(1)
    torch.set_grad_enabled(False)
    log(f"transformers {transformers.__version__}  torch {torch.__version__}  python {sys.version.split()[0]}")
    os.makedirs(args.out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="goldens_tmp_")
    fixtures = {
        "llama": lambda: fx_llama(args.out, bf16=False),
        "llama_bf16": lambda: fx_llama(args.out, bf16=True),
        "qwen3": lambda: fx_qwen3(args.out),
        "qwen3_moe": lambda: fx_qwen3_moe(args.out),
        "gpt_oss": lambda: fx_gpt_oss(args.out),
        "gpt_oss_mxfp4": lambda: fx_gpt_oss_mxfp4(args.out, tmp),
    }
    only = args.only.split(",") if args.only else list(fixtures)
    failed = []
    for name in only:
        for attempt in range(6):
            goldens_common.SEED_BUMP = 100 * attempt
            log(f"--- {name} (seed bump {goldens_common.SEED_BUMP})")
            try:
                fixtures[name]()
                break
            except Degenerate as e:
                log(f"[{name}] degenerate with this seed ({e}); trying the next one")
            except Exception:
                traceback.print_exc()
                failed.append(name)
                break
        else:
            log(f"[{name}] every seed was degenerate")
            failed.append(name)
    if args.notes:
        try:
            src = dump_sources()
        except Exception as e:
            src = f"dump_sources failed: {e}"
        with open(args.notes, "w") as f:
            f.write(f"transformers {transformers.__version__} torch {torch.__version__}\n")
            f.write("\n".join(goldens_common.NOTES))
            f.write("\n\n" + src)
    shutil.rmtree(tmp, ignore_errors=True)
    log(f"done; failed fixtures: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
