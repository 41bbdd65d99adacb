"""goldens_fixtures.py — the per-architecture fixture builders of tools/make_goldens.py.

llama / llama_bf16, qwen3, qwen3_moe, gpt_oss, gpt_oss_mxfp4 (fx_*), with the independent RoPE checks against
MODELS.md §1.1 / §1.4 and the MXFP4 dequantization they use. Seeds add goldens_common.SEED_BUMP, read at call time
(the module name is spelled out, not aliased `common`: fx_gpt_oss_mxfp4 has a local variable of that name).
"""

import copy
import json
import math
import os
import shutil
import traceback

import goldens_common  # first: sets the offline environment variables before torch/transformers are imported
import torch
from goldens_common import (TIED_RULES, build_cases, finish, forward_logits, fresh_dir, load_ref, log, make_config,
                            rand_prompt, randomize, save_hf, sig6, tensor_list)
from safetensors import safe_open
from safetensors.torch import save_file


# ----------------------------------------------------------------------------------------------------------
# independent RoPE checks against MODELS.md §1.1 / §1.4
# ----------------------------------------------------------------------------------------------------------

def llama3_inv_freq(hd, base, factor, lf, hf, L0):
    inv = 1.0 / (base ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
    out = []
    for w in inv.tolist():
        lam = 2 * math.pi / w
        if lam < L0 / hf:
            out.append(w)
        elif lam > L0 / lf:
            out.append(w / factor)
        else:
            s = (L0 / lam - lf) / (hf - lf)
            out.append((1 - s) * w / factor + s * w)
    return torch.tensor(out, dtype=torch.float32)


def yarn_inv_freq(d, base, factor, beta_fast, beta_slow, L0, truncate):
    pf = base ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d)
    w_ext = 1.0 / pf
    w_int = 1.0 / (factor * pf)

    def corr(r):
        return (d * math.log(L0 / (r * 2 * math.pi))) / (2 * math.log(base))

    low, high = corr(beta_fast), corr(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, d - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(d // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    inv = w_int * ramp + w_ext * (1 - ramp)
    return inv, 0.1 * math.log(factor) + 1.0, (low, high)


def rope_check(model, expected_inv, expected_scale):
    try:
        return _rope_check(model, expected_inv, expected_scale)
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}


def _rope_check(model, expected_inv, expected_scale):
    rot = model.model.rotary_emb
    got = rot.inv_freq.float().cpu()
    d = float((got - expected_inv).abs().max()) if got.shape == expected_inv.shape else float("nan")
    sc = float(getattr(rot, "attention_scaling", 1.0))
    return {"inv_freq_maxdiff_vs_MODELS_md": d, "attention_scaling": sc,
            "attention_scaling_expected": expected_scale, "inv_freq": [float(x) for x in got.tolist()]}


# ----------------------------------------------------------------------------------------------------------
# fixtures
# ----------------------------------------------------------------------------------------------------------

LLAMA_ROPE = {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
              "high_freq_factor": 4.0, "original_max_position_embeddings": 64}


def llama_config(tied):
    from transformers import LlamaConfig
    return make_config(
        LlamaConfig, LLAMA_ROPE, vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048, rms_norm_eps=1e-5,
        tie_word_embeddings=tied, bos_token_id=1, eos_token_id=2, pad_token_id=0)


def fx_llama(root, bf16=False):
    from transformers import LlamaForCausalLM
    name = "llama_bf16" if bf16 else "llama"
    seed = (1001 if not bf16 else 1002) + goldens_common.SEED_BUMP
    torch.manual_seed(seed)
    cfg = llama_config(tied=bf16)
    model = LlamaForCausalLM(cfg).eval()
    randomize(model, seed, cfg.hidden_size, special=TIED_RULES if cfg.tie_word_embeddings else None)
    d = fresh_dir(root, name)
    save_hf(model, d, torch.bfloat16 if bf16 else None)
    ref = load_ref(LlamaForCausalLM, d)
    g = torch.Generator().manual_seed(seed + 7)
    prompts = [rand_prompt(g, 20, cfg.vocab_size), rand_prompt(g, 100, cfg.vocab_size)]
    cases = build_cases(ref, prompts)
    exp = llama3_inv_freq(16, 10000.0, 8.0, 1.0, 4.0, 64)
    extra = {"rope_check": rope_check(ref, exp, 1.0)}
    finish(name, d, ref, cases, "bfloat16" if bf16 else "float32", extra)


def fx_qwen3(root):
    from transformers import Qwen3Config, Qwen3ForCausalLM
    name, seed = "qwen3", 2001 + goldens_common.SEED_BUMP
    torch.manual_seed(seed)
    cfg = make_config(
        Qwen3Config, {"rope_type": "default", "rope_theta": 1000000.0}, vocab_size=512, hidden_size=64,
        intermediate_size=128, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
        max_position_embeddings=4096, rms_norm_eps=1e-6, tie_word_embeddings=True, use_sliding_window=False,
        bos_token_id=1, eos_token_id=2, pad_token_id=0)
    model = Qwen3ForCausalLM(cfg).eval()
    randomize(model, seed, cfg.hidden_size, special={
        "q_norm": lambda n, s, g: 1.0 + 0.3 * torch.randn(s, generator=g),
        "k_norm": lambda n, s, g: 1.0 + 0.3 * torch.randn(s, generator=g),
        **TIED_RULES,
    })
    d = fresh_dir(root, name)
    save_hf(model, d)
    ref = load_ref(Qwen3ForCausalLM, d)
    qn = ref.model.layers[0].self_attn.q_norm.weight
    assert qn.shape == (32,) and float((qn - 1).abs().max()) > 0.1, "q_norm not randomised"
    g = torch.Generator().manual_seed(seed + 7)
    prompts = [rand_prompt(g, 24, cfg.vocab_size), rand_prompt(g, 90, cfg.vocab_size)]
    cases = build_cases(ref, prompts)
    finish(name, d, ref, cases, "float32")


def unfuse_qwen3_moe(path, E, Im):
    """If save_pretrained wrote fused v5 experts, rewrite as the per-expert layout of released checkpoints."""
    from safetensors.torch import load_file
    sd = load_file(path)
    if not any(k.endswith("mlp.experts.gate_up_proj") for k in sd):
        return False
    new = {}
    for k, v in sd.items():
        if k.endswith("mlp.experts.gate_up_proj"):
            pre = k[: -len("gate_up_proj")]
            assert tuple(v.shape)[:2] == (E, 2 * Im), v.shape
            for e in range(E):
                new[f"{pre}{e}.gate_proj.weight"] = v[e, :Im].contiguous()
                new[f"{pre}{e}.up_proj.weight"] = v[e, Im:].contiguous()
        elif k.endswith("mlp.experts.down_proj"):
            pre = k[: -len("down_proj")]
            for e in range(E):
                new[f"{pre}{e}.down_proj.weight"] = v[e].contiguous()
        else:
            new[k] = v
    save_file(new, path, metadata={"format": "pt"})
    return True


def fx_qwen3_moe(root):
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM
    name, seed = "qwen3_moe", 3001 + goldens_common.SEED_BUMP
    torch.manual_seed(seed)
    E, K, Im, H = 8, 2, 32, 64
    cfg = make_config(
        Qwen3MoeConfig, {"rope_type": "default", "rope_theta": 1000000.0}, vocab_size=512, hidden_size=H,
        intermediate_size=128, moe_intermediate_size=Im, num_experts=E, num_experts_per_tok=K, norm_topk_prob=True,
        decoder_sparse_step=1, mlp_only_layers=[0], num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, head_dim=32, max_position_embeddings=4096, rms_norm_eps=1e-6,
        tie_word_embeddings=False, use_sliding_window=False, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    model = Qwen3MoeForCausalLM(cfg).eval()
    kinds = [type(layer.mlp).__name__ for layer in model.model.layers]
    is_moe = [hasattr(layer.mlp, "experts") for layer in model.model.layers]
    log(f"[{name}] per-layer mlp classes: {kinds}")
    assert is_moe == [False, True, True], (kinds, is_moe)

    def experts_rule(n, s, g):
        if n.endswith("gate_up_proj"):  # v5 fused: [E, 2Im, H] (fan_in H) — checked by shape
            fan_in = H if s[-1] == H else s[-2]
        elif n.endswith("down_proj") and len(s) == 3:
            fan_in = Im if s[-1] == Im else s[-2]
        else:  # per-expert nn.Linear (v4): [out, in]
            fan_in = s[-1]
        return torch.randn(s, generator=g) / math.sqrt(fan_in)

    randomize(model, seed, H, special={
        "mlp.experts": experts_rule,
        "mlp.gate.weight": lambda n, s, g: 2.0 * torch.randn(s, generator=g) / math.sqrt(H),
        "q_norm": lambda n, s, g: 1.0 + 0.3 * torch.randn(s, generator=g),
        "k_norm": lambda n, s, g: 1.0 + 0.3 * torch.randn(s, generator=g),
    })
    d = fresh_dir(root, name)
    save_hf(model, d)
    meta, rows = tensor_list(os.path.join(d, "model.safetensors"))
    layout = "per-expert (mlp.experts.{e}.{gate,up,down}_proj.weight)" if any(
        ".experts.0.gate_proj.weight" in r for r in rows) else "fused (mlp.experts.gate_up_proj / down_proj)"
    log(f"[{name}] save_pretrained wrote experts as: {layout}")
    ref = load_ref(Qwen3MoeForCausalLM, d)
    g = torch.Generator().manual_seed(seed + 7)
    prompts = [rand_prompt(g, 24, cfg.vocab_size), rand_prompt(g, 90, cfg.vocab_size)]
    rewritten = unfuse_qwen3_moe(os.path.join(d, "model.safetensors"), E, Im)
    if rewritten:
        log(f"[{name}] rewrote fused experts into the released per-expert layout; verifying reload")
        ref2 = load_ref(Qwen3MoeForCausalLM, d)
        for p in prompts:
            diff = float((forward_logits(ref, p) - forward_logits(ref2, p)).abs().max())
            log(f"[{name}]   per-expert reload maxdiff {diff}")
            assert diff == 0.0
        ref = ref2
    cases = build_cases(ref, prompts)
    finish(name, d, ref, cases, "float32", {
        "saved_expert_layout_by_save_pretrained": layout,
        "expert_layout_in_file": "per-expert" if (rewritten or layout.startswith("per-expert")) else "fused",
        "moe_layers": [i for i, m in enumerate(is_moe) if m],
    })


GPT_OSS_ROPE = {"rope_type": "yarn", "rope_theta": 150000.0, "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                "original_max_position_embeddings": 4096, "truncate": False}
GO = dict(E=4, K=2, H=64, I=96, nh=4, nkv=2, hd=32, L=4, V=512, W=32)


def gpt_oss_config():
    from transformers import GptOssConfig
    return make_config(
        GptOssConfig, GPT_OSS_ROPE, vocab_size=GO["V"], hidden_size=GO["H"], intermediate_size=GO["I"],
        num_hidden_layers=GO["L"], num_attention_heads=GO["nh"], num_key_value_heads=GO["nkv"], head_dim=GO["hd"],
        num_local_experts=GO["E"], num_experts_per_tok=GO["K"], sliding_window=GO["W"],
        layer_types=["sliding_attention", "full_attention"] * (GO["L"] // 2), max_position_embeddings=131072,
        rms_norm_eps=1e-5, swiglu_limit=7.0, attention_bias=True, tie_word_embeddings=False,
        bos_token_id=1, eos_token_id=2, pad_token_id=0)


def gpt_oss_rules(H, I):
    def experts_rule(n, s, g):
        if n.endswith("gate_up_proj_bias") or n.endswith("down_proj_bias"):
            return 0.1 * torch.randn(s, generator=g)
        if n.endswith("gate_up_proj"):  # [E, H, 2I] in v5 (x @ W); fan_in = H either way
            return 2.5 * torch.randn(s, generator=g) / math.sqrt(H)
        if n.endswith("down_proj"):  # [E, I, H]; fan_in = I
            return torch.randn(s, generator=g) / math.sqrt(I)
        raise RuntimeError(n)

    return {
        "mlp.experts": experts_rule,
        "mlp.router.weight": lambda n, s, g: 2.0 * torch.randn(s, generator=g) / math.sqrt(H),
        "mlp.router.bias": lambda n, s, g: 0.5 * torch.randn(s, generator=g),
        "sinks": lambda n, s, g: 1.0 * torch.randn(s, generator=g),
    }


def gpt_oss_feature_diffs(cls, d, ref, prompts, load_kw=None):
    """Logit changes when sinks are disabled and when the sliding window covers the whole prompt."""
    load_kw = load_kw or {}
    base = [forward_logits(ref, p)[-1] for p in prompts]
    nos = copy.deepcopy(ref)
    with torch.no_grad():
        for layer in nos.model.layers:
            layer.self_attn.sinks.fill_(-1.0e4)
    d_sinks = max(float((forward_logits(nos, p)[-1] - b).abs().max()) for p, b in zip(prompts, base))
    now = load_ref(cls, d, sliding_window=100000, **load_kw)
    assert now.config.sliding_window == 100000
    d_win = max(float((forward_logits(now, p)[-1] - b).abs().max()) for p, b in zip(prompts, base))
    return d_sinks, d_win


def gpt_oss_common_checks(ref):
    exp, scale, lowhigh = yarn_inv_freq(GO["hd"], 150000.0, 32.0, 32.0, 1.0, 4096, False)
    rc = rope_check(ref, exp, scale)
    rc["yarn_low_high"] = list(lowhigh)
    ex = ref.model.layers[0].mlp.experts
    shapes = {"gate_up_proj": list(ex.gate_up_proj.shape), "down_proj": list(ex.down_proj.shape)}
    lt = list(getattr(ref.config, "layer_types", []))
    return rc, shapes, lt


def fx_gpt_oss(root):
    from transformers import GptOssForCausalLM
    name, seed = "gpt_oss", 4001 + goldens_common.SEED_BUMP
    torch.manual_seed(seed)
    cfg = gpt_oss_config()
    model = GptOssForCausalLM(cfg).eval()
    randomize(model, seed, GO["H"], special=gpt_oss_rules(GO["H"], GO["I"]))
    d = fresh_dir(root, name)
    save_hf(model, d)
    ref = load_ref(GptOssForCausalLM, d)
    sk = ref.model.layers[1].self_attn.sinks
    assert float(sk.abs().min()) > 0 and float(sk.abs().max()) > 0.5, "sinks not randomised"
    g = torch.Generator().manual_seed(seed + 7)
    prompts = [rand_prompt(g, 300, GO["V"]), rand_prompt(g, 197, GO["V"])]
    cases = build_cases(ref, prompts)
    d_s, d_w = gpt_oss_feature_diffs(GptOssForCausalLM, d, ref, prompts)
    rc, shapes, lt = gpt_oss_common_checks(ref)
    finish(name, d, ref, cases, "float32", {
        "logits_without_sinks_maxdiff": sig6(d_s),
        "logits_without_window_maxdiff": sig6(d_w),
        "layer_types": lt,
        "hf_expert_param_shapes": shapes,
        "rope_check": rc,
    })


# --- MXFP4 -------------------------------------------------------------------------------------------------

FP4_LUT = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0],
                       dtype=torch.float32)


def mxfp4_dequant_rows(blocks, scales):
    """MODELS.md §3: blocks [..., rows, G, 16] U8, scales [..., rows, G] U8 -> [..., rows, G*32] fp32.
    Element 2k = low nibble of byte k, 2k+1 = high nibble; value = LUT[nibble] * 2^(scale-127)."""
    lo = FP4_LUT[(blocks & 0x0F).long()]
    hi = FP4_LUT[(blocks >> 4).long()]
    vals = torch.stack([lo, hi], dim=-1).reshape(*blocks.shape[:-1], 32)  # [..., G, 32]
    vals = torch.ldexp(vals, (scales.to(torch.int32) - 127)[..., None])
    return vals.reshape(*blocks.shape[:-2], blocks.shape[-2] * 32)


def fx_gpt_oss_mxfp4(root, tmp):
    from transformers import GptOssForCausalLM
    name, seed = "gpt_oss_mxfp4", 5001 + goldens_common.SEED_BUMP
    E, H, I = GO["E"], GO["H"], GO["I"]
    assert H % 32 == 0 and I % 32 == 0
    torch.manual_seed(seed)
    cfg = gpt_oss_config()
    model = GptOssForCausalLM(cfg).eval()
    randomize(model, seed, H, special=gpt_oss_rules(H, I))
    # every non-block tensor is stored as bf16: round the fp32 model to bf16 values first
    with torch.no_grad():
        for _, p in model.named_parameters():
            p.copy_(p.to(torch.bfloat16).float())
    g = torch.Generator().manual_seed(seed + 1)
    L = GO["L"]
    q = {}
    for i in range(L):
        q[i] = {
            "gate_up_proj_blocks": torch.randint(0, 256, (E, 2 * I, H // 32, 16), generator=g).to(torch.uint8),
            "gate_up_proj_scales": torch.randint(119, 126, (E, 2 * I, H // 32), generator=g).to(torch.uint8),
            "down_proj_blocks": torch.randint(0, 256, (E, H, I // 32, 16), generator=g).to(torch.uint8),
            "down_proj_scales": torch.randint(117, 124, (E, H, I // 32), generator=g).to(torch.uint8),
        }
    orient = None
    with torch.no_grad():
        for i in range(L):
            ex = model.model.layers[i].mlp.experts
            gu_rows = mxfp4_dequant_rows(q[i]["gate_up_proj_blocks"], q[i]["gate_up_proj_scales"])  # [E, 2I, H]
            dn_rows = mxfp4_dequant_rows(q[i]["down_proj_blocks"], q[i]["down_proj_scales"])  # [E, H, I]
            if tuple(ex.gate_up_proj.shape) == (E, H, 2 * I):
                orient = "transposed: gate_up_proj [E,H,2I], down_proj [E,I,H] (x @ W)"
                ex.gate_up_proj.copy_(gu_rows.transpose(1, 2))
                ex.down_proj.copy_(dn_rows.transpose(1, 2))
            elif tuple(ex.gate_up_proj.shape) == (E, 2 * I, H):
                orient = "rows = outputs: gate_up_proj [E,2I,H], down_proj [E,H,I] (F.linear)"
                ex.gate_up_proj.copy_(gu_rows)
                ex.down_proj.copy_(dn_rows)
            else:
                raise RuntimeError(f"unexpected expert shape {tuple(ex.gate_up_proj.shape)}")
    log(f"[{name}] HF expert param orientation: {orient}")
    # cross-check my dequantization against transformers' own convert_moe_packed_tensors
    hf_deq_check = "not run"
    try:
        from transformers.integrations.mxfp4 import convert_moe_packed_tensors
        b, s = q[0]["gate_up_proj_blocks"], q[0]["gate_up_proj_scales"]
        theirs = convert_moe_packed_tensors(b.clone(), s.clone(), dtype=torch.float32).float().cpu()
        mine = model.model.layers[0].mlp.experts.gate_up_proj.detach()
        hf_deq_check = (f"convert_moe_packed_tensors shape {list(theirs.shape)}, maxdiff vs mine "
                        f"{float((theirs - mine).abs().max()) if theirs.shape == mine.shape else 'shape mismatch'}")
    except Exception as e:
        hf_deq_check = f"{type(e).__name__}: {e}"
    log(f"[{name}] {hf_deq_check}")

    # reference: the fp32 dequantized model, saved + reloaded through the normal path
    dq_dir = os.path.join(tmp, "gpt_oss_mxfp4_dequantized_fp32")
    if os.path.exists(dq_dir):
        shutil.rmtree(dq_dir)
    os.makedirs(dq_dir)
    save_hf(model, dq_dir)
    ref = load_ref(GptOssForCausalLM, dq_dir)

    # the released-checkpoint style file, written by hand
    d = fresh_dir(root, name)
    tensors = {}
    with safe_open(os.path.join(dq_dir, "model.safetensors"), framework="pt") as f:
        for k in f.keys():
            if k.endswith("mlp.experts.gate_up_proj") or k.endswith("mlp.experts.down_proj"):
                continue
            tensors[k] = f.get_tensor(k).to(torch.bfloat16).contiguous()
    for i in range(L):
        for k, v in q[i].items():
            tensors[f"model.layers.{i}.mlp.experts.{k}"] = v.contiguous()
    for i in range(L):
        assert f"model.layers.{i}.mlp.experts.gate_up_proj_bias" in tensors
        assert f"model.layers.{i}.self_attn.sinks" in tensors
    save_file(tensors, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(dq_dir, "config.json")) as f:
        cj = json.load(f)
    for key in ("dtype", "torch_dtype"):
        if key in cj:
            cj[key] = "bfloat16"
    if "dtype" not in cj and "torch_dtype" not in cj:
        cj["dtype"] = "bfloat16"
    cj["quantization_config"] = {
        "quant_method": "mxfp4",
        "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens",
                                   "lm_head"],
    }
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cj, f, indent=2, sort_keys=True)
    if os.path.exists(os.path.join(dq_dir, "generation_config.json")):
        shutil.copy(os.path.join(dq_dir, "generation_config.json"), d)

    g2 = torch.Generator().manual_seed(seed + 7)
    prompts = [rand_prompt(g2, 300, GO["V"]), rand_prompt(g2, 197, GO["V"])]
    cases = build_cases(ref, prompts)
    d_s, d_w = gpt_oss_feature_diffs(GptOssForCausalLM, dq_dir, ref, prompts)
    rc, shapes, lt = gpt_oss_common_checks(ref)

    # does transformers itself load the MXFP4 file (dequantized, CPU) to the same logits?
    hf_load = {}
    try:
        from transformers import Mxfp4Config
        m2 = GptOssForCausalLM.from_pretrained(d, quantization_config=Mxfp4Config(dequantize=True),
                                               dtype=torch.float32, attn_implementation="eager",
                                               device_map="cpu")
        m2 = m2.float().eval().to("cpu")
        try:
            if getattr(m2.config, "_experts_implementation", "eager") != "eager":
                m2.config._experts_implementation = "eager"
        except Exception:
            pass
        ex2 = m2.model.layers[0].mlp.experts
        hf_load["expert_class"] = type(ex2).__name__
        hf_load["gate_up_proj_shape"] = list(ex2.gate_up_proj.shape) if hasattr(ex2, "gate_up_proj") else None
        sd2, sdr = m2.state_dict(), ref.state_dict()
        common = [k for k in sdr if k in sd2 and sd2[k].shape == sdr[k].shape]
        hf_load["params_compared"] = f"{len(common)} of {len(sdr)}"
        hf_load["weights_maxdiff"] = max(float((sd2[k].float() - sdr[k].float()).abs().max()) for k in common)
        hf_load["logits_maxdiff"] = max(
            float((forward_logits(m2, p) - forward_logits(ref, p)).abs().max()) for p in prompts)
        hf_load["status"] = "ok"
    except Exception as e:
        hf_load["status"] = f"failed: {type(e).__name__}: {e}"
        traceback.print_exc()
    log(f"[{name}] transformers Mxfp4Config(dequantize=True) CPU load check: {hf_load}")

    finish(name, d, ref, cases, "mxfp4 experts (U8 blocks/scales) + bfloat16 for every other tensor", {
        "reference_weights": ("expert weights dequantized from the MXFP4 blocks/scales in this file (exact), "
                              "all other weights = the bf16 tensors of this file upcast to fp32"),
        "logits_without_sinks_maxdiff": sig6(d_s),
        "logits_without_window_maxdiff": sig6(d_w),
        "layer_types": lt,
        "hf_expert_param_orientation": orient,
        "hf_expert_param_shapes": shapes,
        "hf_dequantize_function_check": hf_deq_check,
        "hf_mxfp4_load_check": hf_load,
        "rope_check": rc,
    })
