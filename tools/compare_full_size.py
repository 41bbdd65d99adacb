#!/usr/bin/env python3
"""compare_full_size.py — greedy tokens of radixserve (CUDA, bf16 fast path) against transformers on a full-size
random-weight checkpoint of a real architecture, with long prompts (chunked prefill, many KV pages, the tensor-core
attention kernel).

    python3 tools/compare_full_size.py --config configs/Qwen3-8B --app build/bin/radixserve \
        --prompt-lens 2048,8192 --new-tokens 16 --work /tmp/full --json $OUT/full_size.json
    python3 tools/compare_full_size.py --config configs/gpt-oss-20b --mxfp4 --app build/bin/radixserve \
        --prompt-lens 2048,8192 --new-tokens 16 --work /tmp/full --json $OUT/full_size.json

Default (bf16) mode: builds the checkpoint with transformers' own model class (its initialiser, seeded) in bf16 on the
GPU and saves it with save_pretrained; the reference is that model (bf16, sdpa) generating greedily with its KV cache.

--mxfp4 mode (gpt-oss): the checkpoint is in the released layout: every non-expert tensor in bf16, each layer's
experts as MXFP4 `*_blocks`/`*_scales` (U8) drawn at random (seeded) plus bf16 expert biases, config.json with
quantization_config {"quant_method": "mxfp4"}, written in shards with model.safetensors.index.json. The reference is
transformers' GptOss model in fp32 (eager attention, eager experts, no TF32) holding exactly the weights radixserve
reads: the initialiser's non-expert tensors rounded to bf16, and the exact dequantisation of the MXFP4 experts (not
Mxfp4Config(dequantize=True), which keeps the experts in bf16). Its prompt is prefilled in chunks of --prefill-chunk
tokens (eager attention over 8k tokens at once would need ~50 GB of scores next to the 84 GB model), then it decodes
greedily with its KV cache.

Either way transformers records each step's top-1 minus top-2 logit margin and radixserve generates from the same ids
in a separate process. Reported per prompt: how many leading tokens agree, and where they first differ, the
reference's margin there (a small margin is a near-tie that bf16 rounding may flip). Exits 1 if a prompt's first
difference comes at a margin of more than --tie-ulps bf16 ulps of the top logit. With the bf16 reference that is its
own resolution (its logits are bf16); with the fp32 reference, whose logits resolve far finer, it is radixserve's own
rounding budget (its default bf16 fast path rounds activations and logits to bf16). `--extra "--exact-f32"` runs
radixserve's exact f32 path instead.
Needs torch, transformers and safetensors (the GPU machine has them); no network.
"""

import argparse
import gc
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402


def log(*parts):
    print(*parts, flush=True)


def model_from_config(cfg, dtype, **kw):
    with torch.device("cuda"):
        try:
            return transformers.AutoModelForCausalLM.from_config(cfg, dtype=dtype, **kw)
        except TypeError:
            return transformers.AutoModelForCausalLM.from_config(cfg, torch_dtype=dtype, **kw)


def build_checkpoint(config_dir, work, seed):
    cfg = transformers.AutoConfig.from_pretrained(config_dir)
    torch.manual_seed(seed)
    model = model_from_config(cfg, torch.bfloat16)
    model.eval()
    model.config._attn_implementation = "sdpa"
    model.save_pretrained(work, safe_serialization=True)
    return model


# --- --mxfp4: gpt-oss with MXFP4 experts ---------------------------------------------------------------------------

FP4_LUT = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0],
                       dtype=torch.float32)

# E8M0 scales are drawn from [118, 121), i.e. 2^-9..2^-7. A uniform random FP4 code has E[v^2] = 68.5/8 = 8.56, so the
# dequantised weights have std sqrt(8.56 * mean(4^(s-127))) = 0.015, close to the 0.02 that transformers' initialiser
# gives every dense tensor: with fan-in 2880 the expert pre-activations stay ~1, well inside swiglu_limit 7, and the
# residual stream grows as in the bf16 mode. make_goldens' ranges (119..125 for gate_up, 117..123 for down: std 0.32
# and 0.08) suit its hidden size of 64 but here would put every gate at the clamp and blow up the residual stream.
MXFP4_SCALES = (118, 121)
DENSE_EXPERTS = ("mlp.experts.gate_up_proj", "mlp.experts.down_proj")  # transformers' params the blocks replace
DEFAULT_QUANT = {"quant_method": "mxfp4",  # as make_goldens writes it, when --config has no quantization_config
                 "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                            "model.embed_tokens", "lm_head"]}


def mxfp4_dequant_rows(blocks, scales):
    """As tools/make_goldens.py (MODELS.md §3), on the blocks' device: blocks [..., rows, G, 16] U8, scales
    [..., rows, G] U8 -> [..., rows, G*32] fp32. Element 2k = low nibble of byte k, 2k+1 = high nibble;
    value = LUT[nibble] * 2^(scale-127) (exact in fp32)."""
    lut = FP4_LUT.to(blocks.device)
    lo = lut[(blocks & 0x0F).long()]
    hi = lut[(blocks >> 4).long()]
    vals = torch.stack([lo, hi], dim=-1).reshape(*blocks.shape[:-1], 32)  # [..., G, 32]
    vals = torch.ldexp(vals, (scales.to(torch.int32) - 127)[..., None])
    return vals.reshape(*blocks.shape[:-2], blocks.shape[-2] * 32)


def random_mxfp4(gen, rows, cols):
    """Seeded random MXFP4 weights of rows x cols: blocks [*rows, cols/32, 16] and scales [*rows, cols/32], U8."""
    groups = cols // 32
    blocks = torch.randint(0, 256, (*rows, groups, 16), generator=gen, device=gen.device, dtype=torch.int32)
    scales = torch.randint(*MXFP4_SCALES, (*rows, groups), generator=gen, device=gen.device, dtype=torch.int32)
    return blocks.to(torch.uint8), scales.to(torch.uint8)


def experts_transposed(experts, cfg):
    """True when transformers keeps gate_up_proj [E, H, 2I] and down_proj [E, I, H] (x @ W, transformers 5), False
    for [E, 2I, H] / [E, H, I] (rows = outputs). Decided on gate_up_proj as make_goldens does: down_proj's shape is
    ambiguous when H == I, as in gpt-oss."""
    E, H, I = cfg.num_local_experts, cfg.hidden_size, cfg.intermediate_size
    shape = tuple(experts.gate_up_proj.shape)
    if shape == (E, H, 2 * I):
        return True
    if shape == (E, 2 * I, H):
        return False
    raise RuntimeError(f"unexpected expert shape {shape}")


@torch.no_grad()
def quantize_experts(experts, cfg, gen):
    """Draws one layer's MXFP4 experts (released names and layout, on the GPU) and sets transformers' dense expert
    params to their exact dequantisation. The file's gate_up rows interleave gate and up (row 2j = gate j, 2j+1 =
    up j) and transformers splits gate_up[..., ::2] / [..., 1::2], so the rows go over in order."""
    E, H, I = cfg.num_local_experts, cfg.hidden_size, cfg.intermediate_size
    q = {}
    q["gate_up_proj_blocks"], q["gate_up_proj_scales"] = random_mxfp4(gen, (E, 2 * I), H)
    q["down_proj_blocks"], q["down_proj_scales"] = random_mxfp4(gen, (E, H), I)
    transposed = experts_transposed(experts, cfg)
    for e in range(E):  # one expert at a time: a whole layer's fp32 temporaries would be ~10 GB
        gate_up = mxfp4_dequant_rows(q["gate_up_proj_blocks"][e], q["gate_up_proj_scales"][e])  # [2I, H]
        down = mxfp4_dequant_rows(q["down_proj_blocks"][e], q["down_proj_scales"][e])  # [H, I]
        experts.gate_up_proj[e].copy_(gate_up.t() if transposed else gate_up)
        experts.down_proj[e].copy_(down.t() if transposed else down)
    return q


def hf_dequant_check(q, experts):
    """transformers' own MXFP4 dequantisation (convert_moe_packed_tensors, which returns [E, H, 2I] / [E, I, H]) of
    the first two experts against the params set here; 0.0 confirms the orientation of both, down_proj included."""
    try:
        from transformers.integrations.mxfp4 import convert_moe_packed_tensors
    except ImportError as e:
        return f"not run: {e}"
    out = {}
    for name in ("gate_up_proj", "down_proj"):
        try:
            theirs = convert_moe_packed_tensors(q[name + "_blocks"][:2].clone(), q[name + "_scales"][:2].clone(),
                                                dtype=torch.float32)
            mine = getattr(experts, name)[:2].detach()
            out[name] = (float((theirs.to(mine.device).float() - mine).abs().max()) if theirs.shape == mine.shape
                         else f"shape {list(theirs.shape)} vs {list(mine.shape)}")
        except Exception as e:  # report, don't stop: the file check below is the one that matters
            out[name] = f"{type(e).__name__}: {e}"
    return out


def gpt_oss_config(config_dir):
    """The AutoConfig to build the fp32 model from, without quantization_config (from_config must not quantize), and
    that quantization_config for the checkpoint's config.json."""
    with open(os.path.join(config_dir, "config.json")) as f:
        raw = json.load(f)
    quant = raw.pop("quantization_config", None) or dict(DEFAULT_QUANT)
    if raw.get("model_type") != "gpt_oss" or quant.get("quant_method") != "mxfp4":
        raise SystemExit(f"--mxfp4 needs a gpt_oss config (mxfp4 or no quantization): {config_dir}")
    with tempfile.TemporaryDirectory() as tmp:  # AutoConfig reads a folder; this keeps its parsing (rope etc.)
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump(raw, f)
        cfg = transformers.AutoConfig.from_pretrained(tmp)
    if cfg.hidden_size % 32 or cfg.intermediate_size % 32:
        raise SystemExit("MXFP4 experts need hidden and intermediate sizes divisible by 32")
    return cfg, quant


def use_eager(model):
    """Eager attention (gpt-oss's sinks have no sdpa path in transformers) and eager experts (a loop of plain fp32
    matmuls; grouped/batched backends may not compute in full fp32)."""
    try:
        if getattr(model.config, "_attn_implementation", None) != "eager":
            if hasattr(model, "set_attn_implementation"):
                model.set_attn_implementation("eager")
            else:
                model.config._attn_implementation = "eager"
        if getattr(model.config, "_experts_implementation", "eager") != "eager":
            if hasattr(model, "set_experts_implementation"):
                model.set_experts_implementation("eager")
            else:
                model.config._experts_implementation = "eager"
    except Exception as e:  # the report records what is in use
        log(f"could not force eager implementations: {type(e).__name__}: {e}")
    return {"attn_implementation": getattr(model.config, "_attn_implementation", None),
            "experts_implementation": getattr(model.config, "_experts_implementation", "n/a")}


@torch.no_grad()
def round_to_bf16(model):
    """Every tensor the file holds in bf16 (all but the dense experts) takes its bf16 value, held in fp32."""
    for name, p in model.named_parameters():
        if not name.endswith(DENSE_EXPERTS):
            p.copy_(p.to(torch.bfloat16))


def layer_of(name):
    """Layer index of a state-dict name; None for the embeddings, final norm and LM head."""
    return int(name.split(".")[2]) if name.startswith("model.layers.") else None


def fresh_checkpoint_dir(work):
    # An earlier run's shards or index in --work would mix into this checkpoint (and the disk is small).
    os.makedirs(work, exist_ok=True)
    for name in os.listdir(work):
        if name.endswith(".safetensors") or name == "model.safetensors.index.json":
            os.remove(os.path.join(work, name))


def check_names(state, L):
    # transformers' names must be the released ones radixserve reads (make_goldens asserts the same); fail before
    # spending minutes on writing.
    for i in range(L):
        for name in DENSE_EXPERTS + ("mlp.experts.gate_up_proj_bias", "mlp.experts.down_proj_bias", "self_attn.sinks",
                                     "mlp.router.weight", "mlp.router.bias", "self_attn.q_proj.weight"):
            assert f"model.layers.{i}.{name}" in state, f"model.layers.{i}.{name} not in transformers' state dict"


def write_shards(model, work, gen, layers_per_shard):
    """Quantizes the experts and writes the checkpoint a few layers per shard (the last shard: embeddings, final norm,
    LM head), so only one shard is ever on the host. Returns the weight map, the bytes written and transformers'
    dequantisation check of layer 0."""
    from safetensors.torch import save_file
    cfg, state = model.config, model.state_dict()
    L = cfg.num_hidden_layers
    check_names(state, L)
    groups = [list(range(s, min(s + layers_per_shard, L))) for s in range(0, L, layers_per_shard)] + [[None]]
    weight_map, total, hf_check = {}, 0, None
    for k, layers in enumerate(groups):
        tensors = {}
        for i in layers:
            if i is None:
                continue
            experts = model.model.layers[i].mlp.experts
            q = quantize_experts(experts, cfg, gen)
            if i == 0:
                hf_check = hf_dequant_check(q, experts)
            tensors.update({f"model.layers.{i}.mlp.experts.{n}": t.cpu().contiguous() for n, t in q.items()})
        for name, t in state.items():
            if layer_of(name) in layers and not name.endswith(DENSE_EXPERTS):
                tensors[name] = t.to(torch.bfloat16).cpu().contiguous()  # exact: already rounded to bf16
        shard = f"model-{k + 1:05d}-of-{len(groups):05d}.safetensors"
        save_file(tensors, os.path.join(work, shard), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(tensors, shard))
        total += sum(t.numel() * t.element_size() for t in tensors.values())
        log(f"wrote {shard}: layers {layers}, {len(tensors)} tensors")
        del tensors
    with open(os.path.join(work, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=1, sort_keys=True)
    return weight_map, total, hf_check


def write_config(model, config_dir, work, quant):
    """config.json as save_pretrained would write it, with dtype bf16 and the MXFP4 quantization_config (as
    make_goldens' gpt_oss_mxfp4 fixture); the generation config of --config alongside."""
    cj = json.loads(model.config.to_json_string())
    for key in ("dtype", "torch_dtype"):
        if key in cj:
            cj[key] = "bfloat16"
    if "dtype" not in cj and "torch_dtype" not in cj:
        cj["dtype"] = "bfloat16"
    cj["quantization_config"] = quant
    with open(os.path.join(work, "config.json"), "w") as f:
        json.dump(cj, f, indent=2, sort_keys=True)
    gen_cfg = os.path.join(config_dir, "generation_config.json")
    if os.path.exists(gen_cfg):
        shutil.copy(gen_cfg, work)


@torch.no_grad()
def file_check(model, work, weight_map, layer=0):
    """Reads one layer back from the written files: its bf16 q_proj and expert 0's dequantised blocks must equal the
    reference's params exactly (max abs differences, expected 0.0)."""
    from safetensors import safe_open
    p = f"model.layers.{layer}."

    def read(name):  # expert 0 only for the expert tensors
        with safe_open(os.path.join(work, weight_map[p + name]), framework="pt", device="cpu") as f:
            sl = f.get_slice(p + name)
            return sl[0:1][0] if name.startswith("mlp.experts.") else sl[:]

    def diff(a, b):
        return float((a.float() - b.detach().float().cpu()).abs().max())

    ex = model.model.layers[layer].mlp.experts
    t = experts_transposed(ex, model.config)
    gate_up = mxfp4_dequant_rows(read("mlp.experts.gate_up_proj_blocks"), read("mlp.experts.gate_up_proj_scales"))
    down = mxfp4_dequant_rows(read("mlp.experts.down_proj_blocks"), read("mlp.experts.down_proj_scales"))
    return {"q_proj": diff(read("self_attn.q_proj.weight"), model.model.layers[layer].self_attn.q_proj.weight),
            "gate_up_proj[0]": diff(gate_up.t() if t else gate_up, ex.gate_up_proj[0]),
            "down_proj[0]": diff(down.t() if t else down, ex.down_proj[0])}


def build_mxfp4_checkpoint(config_dir, work, seed, layers_per_shard=4):
    """The fp32 reference model on the GPU (~84 GB for gpt-oss-20b) and the MXFP4 checkpoint (~13 GB) in work."""
    cfg, quant = gpt_oss_config(config_dir)
    torch.set_float32_matmul_precision("highest")  # no TF32: the reference is fp32
    torch.manual_seed(seed)
    model = model_from_config(cfg, torch.float32, attn_implementation="eager")
    model.eval()
    impl = use_eager(model)
    round_to_bf16(model)
    fresh_checkpoint_dir(work)
    gen = torch.Generator(device="cuda").manual_seed(seed + 2)
    weight_map, total, hf_check = write_shards(model, work, gen, layers_per_shard)
    write_config(model, config_dir, work, quant)
    ex = model.model.layers[0].mlp.experts
    info = {"implementations": impl, "mxfp4_scale_range": list(MXFP4_SCALES),
            "expert_orientation": ("gate_up_proj [E,H,2I], down_proj [E,I,H] (x @ W)"
                                   if experts_transposed(ex, cfg) else "gate_up_proj [E,2I,H], down_proj [E,H,I]"),
            "layer0_weight_std": {"gate_up_proj": float(ex.gate_up_proj.detach().std()),
                                  "down_proj": float(ex.down_proj.detach().std()),
                                  "q_proj": float(model.model.layers[0].self_attn.q_proj.weight.detach().std())},
            "hf_dequantize_check_maxdiff": hf_check, "file_check_maxdiff": file_check(model, work, weight_map),
            "checkpoint_bytes": total, "gpu_gib_allocated": torch.cuda.memory_allocated() / 2**30}
    log(f"checkpoint: {json.dumps(info)}")
    return model, info


@torch.no_grad()
def prefill(model, prompt, chunk):
    """The prompt into a full-length DynamicCache, `chunk` tokens per forward (sliding-window masks then follow from
    positions alone); returns the cache and the last position's logits."""
    cache = transformers.DynamicCache()
    ids = torch.tensor([prompt], device="cuda")
    for start in range(0, len(prompt), chunk):
        out = model(input_ids=ids[:, start:start + chunk], past_key_values=cache, use_cache=True, logits_to_keep=1)
    return cache, out.logits[0, -1].float()


@torch.no_grad()
def reference_chunked(model, prompt, new_tokens, chunk):
    """Greedy tokens, margins and top logits of the fp32 reference: chunked prefill, then one token per step."""
    cache, logits = prefill(model, prompt, chunk)
    tokens, margins, tops = [], [], []
    for step in range(new_tokens):
        top = torch.topk(logits, 2).values
        tokens.append(int(torch.argmax(logits)))  # lowest index on ties, as generate
        margins.append(float(top[0] - top[1]))
        tops.append(float(top[0]))
        if step + 1 < new_tokens:
            out = model(input_ids=torch.tensor([[tokens[-1]]], device="cuda"), past_key_values=cache,
                        use_cache=True, logits_to_keep=1)
            logits = out.logits[0, -1].float()
    return tokens, margins, tops


def chunking_check(model, prompt, chunk):
    """The chunked prefill against one forward over the whole prompt (only for prompts short enough that eager
    attention's scores fit): the last logits should differ by fp32 rounding only."""
    if len(prompt) <= chunk or len(prompt) > 4096:
        return "not run (prompt of one chunk, or too long for a single eager forward)"
    chunked, whole = prefill(model, prompt, chunk)[1], prefill(model, prompt, len(prompt))[1]
    return {"prompt_len": len(prompt), "logits_maxdiff": float((chunked - whole).abs().max()),
            "same_argmax": int(chunked.argmax()) == int(whole.argmax())}


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
    # Spacing of bf16 numbers (8 significant bits) at |x|: the bf16 reference's own logits are bf16; for the fp32
    # reference it is the rounding radixserve's bf16 logits carry.
    return 2.0 ** (math.floor(math.log2(max(abs(x), 1e-30))) - 7)


def radixserve(app, model_dir, prompt, new_tokens, extra):
    cmd = [app, "generate", "--model", model_dir, "--backend", "cuda", "--prompt-ids", ",".join(map(str, prompt)),
           "--max-new-tokens", str(new_tokens), "--ignore-eos"] + extra
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if run.returncode != 0:
        raise RuntimeError(f"radixserve failed ({run.returncode}): {run.stderr[-2000:]}")
    return json.loads(run.stdout)["output_ids"]


def joined_extra(argv):
    # argparse takes the value of `--extra --exact-f32` for an option and stops; `--extra=--exact-f32` it accepts.
    out, i = [], 0
    while i < len(argv):
        if argv[i] == "--extra" and i + 1 < len(argv):
            out.append("--extra=" + argv[i + 1])
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True, help="folder with the architecture's config.json")
    ap.add_argument("--app", required=True, help="radixserve binary")
    ap.add_argument("--mxfp4", action="store_true",
                    help="gpt-oss: MXFP4 experts in the checkpoint, fp32 reference with the same weights")
    ap.add_argument("--prompt-lens", default="2048,8192")
    ap.add_argument("--new-tokens", type=int, default=16)
    ap.add_argument("--work", default="/tmp/full_size_checkpoint")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prefill-chunk", type=int, default=1024,
                    help="--mxfp4: the reference prefills this many prompt tokens per forward")
    ap.add_argument("--tie-ulps", type=float, default=2.0,
                    help="a margin of at most this many bf16 ulps of the top logit is a near-tie")
    ap.add_argument("--json", default=None)
    ap.add_argument("--extra", default="", help="more radixserve generate arguments, space-separated")
    args = ap.parse_args(joined_extra(sys.argv[1:]))

    if args.mxfp4:
        model, checkpoint = build_mxfp4_checkpoint(args.config, args.work, args.seed)
        description = (f"transformers fp32 eager (experts eager, no TF32), prompt prefilled in chunks of "
                       f"{args.prefill_chunk} tokens, then greedy with its KV cache; weights: non-expert tensors "
                       f"rounded to bf16, experts the exact dequantisation of the checkpoint's MXFP4 blocks")
    else:
        model, checkpoint = build_checkpoint(args.config, args.work, args.seed), None
        description = "transformers bf16 sdpa generate (greedy, KV cache)"
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(args.seed + 1)
    cases = []
    for length in map(int, args.prompt_lens.split(",")):
        prompt = torch.randint(0, vocab, (length,), generator=gen).tolist()
        if args.mxfp4:
            tokens, margins, tops = reference_chunked(model, prompt, args.new_tokens, args.prefill_chunk)
        else:
            tokens, margins, tops = reference(model, prompt, args.new_tokens)
        cases.append({"prompt_len": length, "prompt": prompt, "reference": tokens, "margins": margins, "tops": tops})
    if args.mxfp4:
        shortest = min(cases, key=lambda c: c["prompt_len"])["prompt"]
        checkpoint["chunked_prefill_check"] = chunking_check(model, shortest, args.prefill_chunk)
        log(f"chunked prefill check: {checkpoint['chunked_prefill_check']}")
    del model
    gc.collect()  # the fp32 reference holds ~84 GB that radixserve needs back
    torch.cuda.empty_cache()
    if args.mxfp4:
        log(f"GPU memory still allocated by this process: {torch.cuda.memory_allocated() / 2**30:.1f} GiB")

    failed = False
    report = {"config": args.config, "transformers": transformers.__version__, "torch": torch.__version__,
              "reference": description, "cases": []}
    if args.mxfp4:
        report.update({"mode": "mxfp4", "checkpoint": checkpoint, "radixserve_extra": args.extra})
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
        if args.mxfp4:
            entry["max_top_logit"] = max(case["tops"])
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
