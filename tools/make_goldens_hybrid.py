#!/usr/bin/env python3
"""make_goldens_hybrid.py — transformers reference fixtures for the hybrid gated-delta-net Qwen models (issue 12).

What it does
  Builds tiny random-weight checkpoints of the three hybrid architectures with transformers' own classes, saves them
  as real checkpoints are saved, and writes transformers' fp32 eager reference for two prompts of >= 300 tokens each
  (several 64-token chunks of the gated delta rule), in the format of tools/make_goldens.py (whose helpers, in
  goldens_common.py, it imports):

    <out>/<name>/config.json, generation_config.json (if written), model.safetensors, golden.json

  Fixtures:
    qwen3_next     Qwen3NextForCausalLM: layers [linear, full, linear, full], layer 0 a dense MLP (mlp_only_layers),
                   the others MoE (E=8, K=2) with a gated shared expert; fused in_proj_qkvz / in_proj_ba; experts
                   written per expert (the released layout).
    qwen3_5        Qwen3_5ForCausalLM (dense MLP): split in_proj_qkv / _z / _b / _a; layer pattern from
                   full_attention_interval.
    qwen3_5_moe    Qwen3_5MoeForConditionalGeneration: config under text_config, text weights under
                   model.language_model., a tiny vision tower the engine ignores, fused experts, shared expert.
  All: gated attention (doubled q_proj), QK-norm, partial RoPE (0.25 of head_dim 32), zero-centred (1 + w) RMSNorms
  (randomised around 0), gated RMSNorm, random A_log / dt_bias / conv weights.

  Reference = transformers on CPU, fp32, attn_implementation="eager", experts_implementation="eager", and the torch
  implementations of the gated delta net (torch_causal_conv1d_update / torch_chunk_gated_delta_rule /
  torch_recurrent_gated_delta_rule): the script refuses to run when the flash-linear-attention or causal-conv1d
  fast paths are importable, since they round differently. last_logits / greedy_ids / greedy_margins as
  make_goldens.py (greedy = a full forward over prompt + generated tokens at every step, no cache; the cached
  generate() path, which runs the recurrent form, is reported under generate_check).

How to run (torch + transformers 5.17 + safetensors; no network; CPU is enough), on the device machine:
  PYTHONUNBUFFERED=1 python3 tools/make_goldens_hybrid.py --out $OUT/goldens_hybrid --notes $OUT/hf_notes_hybrid.txt
  then copy $OUT/goldens_hybrid/{qwen3_next,qwen3_5,qwen3_5_moe} under tests/data/models/.
"""

import argparse
import math
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import goldens_common as mg  # noqa: E402  (first: sets the offline environment variables before transformers)
import goldens_fixtures  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

PROMPT_LENS = (300, 333)  # > 4 chunks of 64 each, not multiples of 64
COMMON = dict(vocab_size=512, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
              linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16,
              linear_conv_kernel_dim=4, max_position_embeddings=4096, rms_norm_eps=1e-6, tie_word_embeddings=False,
              bos_token_id=1, eos_token_id=2, pad_token_id=0)
ROPE = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25}


def require_torch_paths():
    """The goldens pin the torch reference of the gated delta net; the FLA / causal-conv1d kernels round otherwise."""
    from transformers.utils import import_utils
    fast = {name: bool(getattr(import_utils, name, lambda: False)())
            for name in ("is_flash_linear_attention_available", "is_causal_conv1d_available")}
    if any(fast.values()):
        raise SystemExit(f"fast gated-delta-net kernels are importable ({fast}): run in an environment without "
                         "flash-linear-attention and causal-conv1d so transformers uses its torch implementation")
    return fast


def hybrid_rules(H):
    """randomize() rules for the tensors make_goldens.py has none for, and zero-centred norms around 0."""
    def experts_rule(n, s, g):  # fused [E, 2Im, H] / [E, H, Im] or per-expert [out, in]: fan-in is the last dim
        return torch.randn(s, generator=g) / math.sqrt(s[-1])

    zero_centred = lambda n, s, g: 0.2 * torch.randn(s, generator=g)  # noqa: E731  (1 + w) ~ 1 +- 0.2
    return {
        "visual": lambda n, s, g: 0.02 * torch.randn(s, generator=g),  # the engine never reads the vision tower
        "input_layernorm": zero_centred,
        "post_attention_layernorm": zero_centred,
        "q_norm": zero_centred,
        "k_norm": zero_centred,
        "model.norm.weight": zero_centred,  # also matches model.language_model.norm.weight
        "A_log": lambda n, s, g: torch.empty(s).uniform_(0.05, 1.0, generator=g).log(),
        "conv1d": lambda n, s, g: torch.randn(s, generator=g) / math.sqrt(s[-1]),
        "mlp.experts": experts_rule,
        "mlp.gate.weight": lambda n, s, g: 2.0 * torch.randn(s, generator=g) / math.sqrt(H),
        "shared_expert_gate": lambda n, s, g: torch.randn(s, generator=g) / math.sqrt(H),
    }


def layer_kinds(model):
    inner = model.model.language_model if hasattr(model.model, "language_model") else model.model
    return [getattr(layer, "layer_type", getattr(layer, "block_type", "?")) for layer in inner.layers]


def prompts_for(seed, vocab):
    g = torch.Generator().manual_seed(seed + 7)
    return [mg.rand_prompt(g, n, vocab) for n in PROMPT_LENS]


def record(name, d, ref, seed, extra):
    cases = mg.build_cases(ref, prompts_for(seed, ref.config.get_text_config().vocab_size))
    meta, rows = mg.tensor_list(os.path.join(d, "model.safetensors"))
    extra = dict(extra, layer_types=layer_kinds(ref), tensors_in_file=len(rows),
                 gated_delta_net_implementation="transformers torch fallback (no fla / causal_conv1d)")
    mg.finish(name, d, ref, cases, "float32", extra)


def fx_qwen3_next(root, bump):
    from transformers import Qwen3NextConfig, Qwen3NextForCausalLM
    name, seed = "qwen3_next", 5001 + bump
    torch.manual_seed(seed)
    E, K, Im, H = 8, 2, 32, COMMON["hidden_size"]
    cfg = mg.make_config(Qwen3NextConfig, ROPE, **COMMON, intermediate_size=128, num_hidden_layers=4,
                         layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
                         num_experts=E, num_experts_per_tok=K, moe_intermediate_size=Im,
                         shared_expert_intermediate_size=48, norm_topk_prob=True, decoder_sparse_step=1,
                         mlp_only_layers=[0])
    model = Qwen3NextForCausalLM(cfg).eval()
    mg.randomize(model, seed, H, special=hybrid_rules(H))
    d = mg.fresh_dir(root, name)
    mg.save_hf(model, d)
    ref = mg.load_ref(Qwen3NextForCausalLM, d)
    rewritten = goldens_fixtures.unfuse_qwen3_moe(os.path.join(d, "model.safetensors"), E, Im)
    if rewritten:  # released Qwen3-Next checkpoints store experts one by one
        ref2 = mg.load_ref(Qwen3NextForCausalLM, d)
        p = prompts_for(seed, cfg.vocab_size)[0]
        assert float((mg.forward_logits(ref, p) - mg.forward_logits(ref2, p)).abs().max()) == 0.0
        ref = ref2
    record(name, d, ref, seed, {"expert_layout_in_file": "per-expert", "in_proj_layout": "fused qkvz / ba"})


def fx_qwen3_5(root, bump):
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig
    name, seed = "qwen3_5", 6001 + bump
    torch.manual_seed(seed)
    H = COMMON["hidden_size"]
    cfg = mg.make_config(Qwen3_5TextConfig, ROPE, **COMMON, intermediate_size=128, num_hidden_layers=4,
                         full_attention_interval=2)
    model = Qwen3_5ForCausalLM(cfg).eval()
    mg.randomize(model, seed, H, special=hybrid_rules(H))
    d = mg.fresh_dir(root, name)
    mg.save_hf(model, d)
    ref = mg.load_ref(Qwen3_5ForCausalLM, d)
    record(name, d, ref, seed, {"in_proj_layout": "split qkv / z / b / a"})


def fx_qwen3_5_moe(root, bump):
    from transformers import Qwen3_5MoeConfig, Qwen3_5MoeForConditionalGeneration
    name, seed = "qwen3_5_moe", 7001 + bump
    torch.manual_seed(seed)
    E, K, Im, H = 8, 2, 32, COMMON["hidden_size"]
    text = dict(COMMON, model_type="qwen3_5_moe_text", num_hidden_layers=4,
                layer_types=["linear_attention", "linear_attention", "full_attention", "linear_attention"],
                num_experts=E, num_experts_per_tok=K, moe_intermediate_size=Im, shared_expert_intermediate_size=48,
                rope_parameters=dict(ROPE, mrope_section=[2, 1, 1], mrope_interleaved=True))
    vision = dict(depth=1, hidden_size=32, num_heads=2, intermediate_size=64, out_hidden_size=H, patch_size=4,
                  temporal_patch_size=2, spatial_merge_size=2, num_position_embeddings=64)
    cfg = Qwen3_5MoeConfig(text_config=text, vision_config=vision, tie_word_embeddings=False)
    model = Qwen3_5MoeForConditionalGeneration(cfg).eval()
    mg.randomize(model, seed, H, special=hybrid_rules(H))
    d = mg.fresh_dir(root, name)
    mg.save_hf(model, d)
    ref = mg.load_ref(Qwen3_5MoeForConditionalGeneration, d)
    meta, rows = mg.tensor_list(os.path.join(d, "model.safetensors"))
    assert any(r.startswith("model.language_model.layers.0.linear_attn.in_proj_qkv.weight") for r in rows), rows[:8]
    fused = any(".mlp.experts.gate_up_proj " in r for r in rows)
    record(name, d, ref, seed, {"expert_layout_in_file": "fused" if fused else "per-expert",
                                "in_proj_layout": "split qkv / z / b / a", "text_prefix": "model.language_model."})


FIXTURES = {"qwen3_next": fx_qwen3_next, "qwen3_5": fx_qwen3_5, "qwen3_5_moe": fx_qwen3_5_moe}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="output folder (one sub-folder per fixture)")
    ap.add_argument("--notes", default=None, help="write the fixtures' configs and tensor lists here")
    ap.add_argument("--only", default=None, help="comma-separated fixture names: " + ",".join(FIXTURES))
    args = ap.parse_args()
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.set_num_threads(1)
    torch.set_grad_enabled(False)
    fast = require_torch_paths()
    mg.log(f"transformers {transformers.__version__}  torch {torch.__version__}  fast paths {fast}")
    os.makedirs(args.out, exist_ok=True)
    failed = []
    for name in (args.only.split(",") if args.only else list(FIXTURES)):
        for attempt in range(6):
            mg.SEED_BUMP = 100 * attempt  # recorded in golden.json by finish()
            mg.log(f"--- {name} (seed bump {mg.SEED_BUMP})")
            try:
                FIXTURES[name](args.out, mg.SEED_BUMP)
                break
            except mg.Degenerate as e:
                mg.log(f"[{name}] degenerate with this seed ({e}); trying the next one")
            except Exception:
                traceback.print_exc()
                failed.append(name)
                break
        else:
            mg.log(f"[{name}] every seed was degenerate")
            failed.append(name)
    if args.notes:
        with open(args.notes, "w") as f:
            f.write(f"transformers {transformers.__version__} torch {torch.__version__}\n")
            f.write("\n".join(mg.NOTES))
    mg.log(f"done; failed fixtures: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
