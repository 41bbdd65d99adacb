#!/usr/bin/env python3
"""Convert a dense Llama/Qwen3 bf16 safetensors checkpoint (as make_checkpoint.py writes) to GGUF for llama.cpp.

Only what the side-by-side benchmark needs: matrices stay bf16 (byte for byte), norm weights become f32, the
byte-level BPE tokenizer goes into the tokenizer.ggml.* keys. Written from the GGUF v3 file-format description.

  to_gguf.py CHECKPOINT_DIR OUT.gguf
"""
import array
import json
import mmap
import os
import struct
import sys

ALIGN = 32
GGML_F32, GGML_BF16 = 0, 30
T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY = 4, 5, 6, 7, 8, 9
TOKEN_NORMAL, TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_UNUSED = 1, 3, 4, 5


def gguf_str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, value):
    out = gguf_str(key) + struct.pack("<I", vtype)
    if vtype == T_STRING:
        return out + gguf_str(value)
    if vtype == T_ARRAY:
        etype, items = value
        out += struct.pack("<IQ", etype, len(items))
        if etype == T_STRING:
            return out + b"".join(gguf_str(s) for s in items)
        return out + array.array({T_INT32: "i", T_UINT32: "I"}[etype], items).tobytes()
    fmt = {T_UINT32: "<I", T_INT32: "<i", T_FLOAT32: "<f", T_BOOL: "<?"}[vtype]
    return out + struct.pack(fmt, value)


# HF tensor-name suffix -> GGUF name (per layer unless global).
LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
GLOBAL_NAMES = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
                "lm_head.weight": "output.weight"}


def rope_interleaved_rows(blob, rows, row_bytes, head_dim):
    """HF Llama q/k rows are ordered for rotate-half RoPE; llama.cpp's LLAMA architecture rotates adjacent pairs.
    Within each head, row i of the first half goes to 2i and row i of the second half to 2i + 1."""
    out = bytearray(len(blob))
    half = head_dim // 2
    for head in range(rows // head_dim):
        for i in range(head_dim):
            src = head * head_dim + i
            dst = head * head_dim + (2 * i if i < half else 2 * (i - half) + 1)
            out[dst * row_bytes:(dst + 1) * row_bytes] = blob[src * row_bytes:(src + 1) * row_bytes]
    return bytes(out)


def gguf_name(hf):
    if hf in GLOBAL_NAMES:
        return GLOBAL_NAMES[hf]
    parts = hf.split(".", 3)  # model.layers.N.rest
    if parts[:2] != ["model", "layers"] or parts[3] not in LAYER_NAMES:
        raise SystemExit(f"to_gguf: no GGUF name for tensor {hf}")
    return f"blk.{parts[2]}.{LAYER_NAMES[parts[3]]}"


def tokenizer_kvs(ckpt, cfg):
    with open(os.path.join(ckpt, "tokenizer.json")) as f:
        tok = json.load(f)
    model = tok["model"]
    if model["type"] != "BPE":
        raise SystemExit("to_gguf: only byte-level BPE tokenizers are supported")
    vocab_size = cfg["vocab_size"]
    tokens = [f"[PAD{i}]" for i in range(vocab_size)]
    types = [TOKEN_UNUSED] * vocab_size
    for text, idx in model["vocab"].items():
        if idx < vocab_size:
            tokens[idx], types[idx] = text, TOKEN_NORMAL
    for added in tok.get("added_tokens", []):
        if added["id"] < vocab_size:
            tokens[added["id"]] = added["content"]
            types[added["id"]] = TOKEN_CONTROL if added["special"] else TOKEN_USER_DEFINED
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    eos = cfg.get("eos_token_id")
    if eos is None:
        raise SystemExit("to_gguf: config.json has no eos_token_id")
    eos = eos[0] if isinstance(eos, list) else eos
    qwen = cfg["model_type"] == "qwen3"
    out = [kv("tokenizer.ggml.model", T_STRING, "gpt2"),
           kv("tokenizer.ggml.pre", T_STRING, "qwen2" if qwen else "llama-bpe"),
           kv("tokenizer.ggml.tokens", T_ARRAY, (T_STRING, tokens)),
           kv("tokenizer.ggml.token_type", T_ARRAY, (T_INT32, types)),
           kv("tokenizer.ggml.merges", T_ARRAY, (T_STRING, merges)),
           kv("tokenizer.ggml.eos_token_id", T_UINT32, eos),
           kv("tokenizer.ggml.add_bos_token", T_BOOL, not qwen)]
    if cfg.get("bos_token_id") is not None:
        out.append(kv("tokenizer.ggml.bos_token_id", T_UINT32, cfg["bos_token_id"]))
    return out


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    ckpt, out_path = sys.argv[1], sys.argv[2]
    with open(os.path.join(ckpt, "config.json")) as f:
        cfg = json.load(f)
    arch = {"qwen3": "qwen3", "llama": "llama"}.get(cfg["model_type"])
    if arch is None:
        raise SystemExit(f"to_gguf: model_type {cfg['model_type']!r} is not supported")
    rope = cfg.get("rope_parameters") or {}  # transformers v5 layout; v4 keeps rope_theta / rope_scaling on top
    scaling = cfg.get("rope_scaling") or (rope if rope.get("rope_type", "default") != "default" else None)
    if scaling:
        raise SystemExit("to_gguf: RoPE scaling is not converted (the benchmark needs plain RoPE)")
    rope_theta = float(cfg.get("rope_theta", rope.get("rope_theta", 10000.0)))
    h, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    head_dim = cfg.get("head_dim") or h // heads
    kvs = [kv("general.architecture", T_STRING, arch),
           kv("general.name", T_STRING, os.path.basename(os.path.normpath(ckpt))),
           kv("general.alignment", T_UINT32, ALIGN),
           kv(f"{arch}.block_count", T_UINT32, cfg["num_hidden_layers"]),
           kv(f"{arch}.context_length", T_UINT32, cfg["max_position_embeddings"]),
           kv(f"{arch}.embedding_length", T_UINT32, h),
           kv(f"{arch}.feed_forward_length", T_UINT32, cfg["intermediate_size"]),
           kv(f"{arch}.attention.head_count", T_UINT32, heads),
           kv(f"{arch}.attention.head_count_kv", T_UINT32, cfg.get("num_key_value_heads", heads)),
           kv(f"{arch}.attention.key_length", T_UINT32, head_dim),
           kv(f"{arch}.attention.value_length", T_UINT32, head_dim),
           kv(f"{arch}.rope.freq_base", T_FLOAT32, rope_theta),
           kv(f"{arch}.rope.dimension_count", T_UINT32, head_dim),
           kv(f"{arch}.attention.layer_norm_rms_epsilon", T_FLOAT32, float(cfg["rms_norm_eps"]))]
    kvs += tokenizer_kvs(ckpt, cfg)

    src_path = os.path.join(ckpt, "model.safetensors")
    with open(src_path, "rb") as f:
        src = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    header_len = struct.unpack("<Q", src[:8])[0]
    header = json.loads(src[8:8 + header_len])
    base = 8 + header_len
    tensors, offset = [], 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "BF16":
            raise SystemExit(f"to_gguf: {name} is {info['dtype']}, expected BF16")
        begin, end = info["data_offsets"]
        is_norm = len(info["shape"]) == 1
        size = (end - begin) * (2 if is_norm else 1)
        # Qwen3 uses rotate-half RoPE in llama.cpp too; Llama's q/k rows must be reordered.
        permute = arch == "llama" and name.endswith(("q_proj.weight", "k_proj.weight"))
        tensors.append((gguf_name(name), info["shape"], GGML_F32 if is_norm else GGML_BF16, base + begin,
                        base + end, offset, permute))
        offset += size + (-size % ALIGN)

    with open(out_path + ".part", "wb") as out:
        out.write(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)))
        for item in kvs:
            out.write(item)
        for name, shape, gtype, _, _, toff, _ in tensors:
            dims = list(reversed(shape))  # GGUF lists the fastest-varying dimension first
            out.write(gguf_str(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
                      + struct.pack("<IQ", gtype, toff))
        out.write(b"\0" * (-out.tell() % ALIGN))
        data_start = out.tell()
        for _, shape, gtype, begin, end, toff, permute in tensors:
            out.write(b"\0" * (data_start + toff - out.tell()))
            if permute:
                out.write(rope_interleaved_rows(src[begin:end], shape[0], shape[1] * 2, head_dim))
            elif gtype == GGML_F32:
                halves = array.array("H", src[begin:end])
                out.write(array.array("I", (u << 16 for u in halves)).tobytes())
            else:
                for start in range(begin, end, 1 << 26):
                    out.write(src[start:min(end, start + (1 << 26))])
        out.write(b"\0" * (-out.tell() % ALIGN))
    os.replace(out_path + ".part", out_path)
    print(json.dumps({"gguf": out_path, "tensors": len(tensors), "bytes": os.path.getsize(out_path)}))


if __name__ == "__main__":
    main()
