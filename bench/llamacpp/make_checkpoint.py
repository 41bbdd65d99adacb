#!/usr/bin/env python3
"""Write a random-weight bf16 Hugging Face checkpoint folder for a dense Llama/Qwen3 config.

Both engines of the side-by-side benchmark must run the *same* weights: radixserve loads this folder as is, and
to_gguf.py converts it for llama.cpp. Pure Python (no numpy on the CI/dev machines); deterministic for a seed.

  make_checkpoint.py --config configs/Qwen3-0.6B --tokenizer-dir DIR_WITH_tokenizer.json --out OUT [--seed 0]
"""
import argparse
import json
import os
import random
import shutil
import struct

# Matrix entries: sign random, magnitude uniform-ish in [2^-7, 2^-5) (std ≈ 0.018, like initializer_range 0.02).
# bf16 little-endian: the high byte holds sign + the top 7 exponent bits (0x3C for exponents 120/121); the low
# byte holds the exponent's last bit and the 7 mantissa bits, taken fully random.
_HIGH_BYTE = bytes(0xBC if b & 1 else 0x3C for b in range(256))
_ONE_BF16 = struct.pack("<H", 0x3F80)


def random_bf16(rng, count):
    out = bytearray(2 * count)
    out[0::2] = rng.randbytes(count)
    out[1::2] = rng.randbytes(count).translate(_HIGH_BYTE)
    return bytes(out)


def tensor_plan(cfg):
    """(name, shape, kind) in checkpoint order; kind is 'matrix' or 'norm'."""
    h = cfg["hidden_size"]
    inter = cfg["intermediate_size"]
    heads = cfg["num_attention_heads"]
    kv_heads = cfg.get("num_key_value_heads", heads)
    head_dim = cfg.get("head_dim") or h // heads
    vocab = cfg["vocab_size"]
    qwen3 = cfg["model_type"] == "qwen3"
    plan = [("model.embed_tokens.weight", [vocab, h], "matrix")]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        plan += [
            (p + "input_layernorm.weight", [h], "norm"),
            (p + "self_attn.q_proj.weight", [heads * head_dim, h], "matrix"),
            (p + "self_attn.k_proj.weight", [kv_heads * head_dim, h], "matrix"),
            (p + "self_attn.v_proj.weight", [kv_heads * head_dim, h], "matrix"),
            (p + "self_attn.o_proj.weight", [h, heads * head_dim], "matrix"),
        ]
        if qwen3:
            plan += [(p + "self_attn.q_norm.weight", [head_dim], "norm"),
                     (p + "self_attn.k_norm.weight", [head_dim], "norm")]
        plan += [
            (p + "post_attention_layernorm.weight", [h], "norm"),
            (p + "mlp.gate_proj.weight", [inter, h], "matrix"),
            (p + "mlp.up_proj.weight", [inter, h], "matrix"),
            (p + "mlp.down_proj.weight", [h, inter], "matrix"),
        ]
    plan.append(("model.norm.weight", [h], "norm"))
    if not cfg.get("tie_word_embeddings", False):
        plan.append(("lm_head.weight", [vocab, h], "matrix"))
    return plan


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True, help="folder with config.json (Llama or Qwen3, dense)")
    ap.add_argument("--tokenizer-dir", required=True, help="folder with tokenizer.json and tokenizer_config.json")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    with open(os.path.join(args.config, "config.json")) as f:
        cfg = json.load(f)
    if cfg.get("model_type") not in ("llama", "qwen3"):
        raise SystemExit(f"make_checkpoint: model_type {cfg.get('model_type')!r} is not llama or qwen3")
    os.makedirs(args.out, exist_ok=True)
    cfg["torch_dtype"] = "bfloat16"
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(args.tokenizer_dir, name), os.path.join(args.out, name))

    plan = tensor_plan(cfg)
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, shape, _ in plan:
        size = 2
        for d in shape:
            size *= d
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    rng = random.Random(args.seed)
    path = os.path.join(args.out, "model.safetensors")
    with open(path + ".part", "wb") as f:
        f.write(struct.pack("<Q", len(blob)) + blob)
        for name, shape, kind in plan:
            count = 1
            for d in shape:
                count *= d
            if kind == "norm":
                f.write(_ONE_BF16 * count)
                continue
            for start in range(0, count, 1 << 24):  # 32 MiB at a time
                f.write(random_bf16(rng, min(1 << 24, count - start)))
    os.replace(path + ".part", path)
    print(json.dumps({"checkpoint": args.out, "tensors": len(plan), "bytes": offset}))


if __name__ == "__main__":
    main()
