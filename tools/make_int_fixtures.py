#!/usr/bin/python3
"""Tiny integer-quantized checkpoints (MLX affine, AWQ, GPTQ), made from the committed f32 fixtures by each format's own
on-disk rules (numpy only, no torch, no mlx).

For every fixture it writes two folders, as tools/make_fp8_fixtures.py does:
  tests/data/models/<name>/               the quantized checkpoint (config.json with its quantization keys,
                                          model.safetensors, generation_config.json)
  tests/data/models/<name>/dequantized/   the same model in plain f32 HF layout (the source fixture's tensor names,
                                          config.json without quantization keys) with every quantized weight replaced
                                          by its exact dequantization in f32, the reference its greedy tokens must equal

Quantized modules: every attention / MLP linear projection (self_attn.{q,k,v,o}_proj, mlp.{gate,up,down}_proj, the MoE
experts' projections); for MLX also the embedding, an untied lm_head, the MoE router (mlp.gate) and Qwen3-Next's other
Linears (linear_attn.in_proj_*, mlp.shared_expert_gate). Norms stay f32.
Every product below (an integer of at most 8 bits times a bf16 / f16 scale) is exact in f32, so the only rounding of a
dequantized weight is MLX's one add of the bias; an FMA gives the same bits.

Layouts (W is a module's weight [out, in], g the group size along `in`, b the bits):
  qwen3_mlx4       MLX affine as `mlx_lm.convert -q` writes it (from qwen3, tied embedding). Per group of g inputs of
                   a row: scale = (max - min) / (2^b - 1), bias = min, both rounded to bf16; q = clip(round((w - bias)
                   / scale), 0, 2^b - 1). `M.weight` U32 [out, in*b/32] (element j of a row at bits (j % (32/b))*b of
                   word j // (32/b)), `M.scales` and `M.biases` BF16 [out, in/g]. Dequantized: scale * q + bias in f32.
                   g = 32, b = 4 including model.embed_tokens; model.layers.1.mlp.down_proj at b = 8, g = 64;
                   model.layers.2.self_attn.o_proj not quantized (f32 `weight`). config.json: "quantization" and an
                   identical "quantization_config" {"group_size", "bits", <module path>: {...} | false}.
  qwen3_moe_mlx4   the same from qwen3_moe (untied: lm_head quantized too). Experts stacked as mlx_lm's SwitchGLU
                   stores them: `model.layers.N.mlp.switch_mlp.{gate,up,down}_proj.weight` U32 [E, out, in*b/32],
                   `.scales` / `.biases` BF16 [E, out, in/g]; the router `model.layers.N.mlp.gate` at b = 8, g = 32
                   (a per-module override in the config). Every `in` (64, 128, the experts' down_proj 32) divides 32.
  qwen3_next_mlx4  the same from qwen3_next (Qwen3-Next: gated-delta-net layers 0 and 2, attention layers 1 and 3,
                   layer 0 a dense MLP, layers 1-3 MoE with a shared expert; untied), stored as mlx_lm's Qwen3-Next
                   sanitize() leaves it: the (1 + w) RMSNorms (input_layernorm, post_attention_layernorm,
                   self_attn.q_norm / k_norm, model.norm; not the gated linear_attn.norm) hold f32(w + 1),
                   linear_attn.conv1d.weight is [C, K, 1] (Hugging Face [C, 1, K]), experts stacked in switch_mlp.
                   Quantized at g = 32, b = 4: every Linear (self_attn.{q,k,v,o}_proj, linear_attn.in_proj_qkvz /
                   in_proj_ba / out_proj, the dense MLP, the experts, shared_expert.{gate,up}_proj), embed_tokens and
                   lm_head; mlp.gate and mlp.shared_expert_gate (out 1) at b = 8, g = 32 (per-module overrides, as
                   mlx_lm's Qwen3-Next quant_predicate gives both 8 bits). shared_expert.down_proj (in 48, not a
                   multiple of 32) stays f32 with no config entry, as mlx_lm's quantize_model skips such a module.
                   A_log, dt_bias, conv1d and the norms stay f32. The dequantized twin has the source's HF layout
                   and values (per-expert names, conv [C, 1, K], norms not shifted).
  qwen3_awq        AutoAWQ GEMM, b = 4, g = 32, zero_point. Per output column and group: scale = max((max - min) / 15,
                   1e-5) rounded to f16, zero = clip(round(-min / scale), 0, 15), q = clip(round(w / scale) + zero,
                   0, 15). `M.qweight` I32 [in, out/8]: nibble k (bits 4k) of word [i, c] holds column 8c + ORDER[k],
                   ORDER = [0, 2, 4, 6, 1, 3, 5, 7]; `M.qzeros` I32 [in/g, out/8] packed the same; `M.scales` F16
                   [in/g, out]. Dequantized: (q - zero) * scale. The tied embedding stays f32.
  qwen3_gptq       GPTQ v1 checkpoint format (AutoGPTQ / GPTQModel "gptq"), b = 4, g = 32, sym false, desc_act false.
                   Per output column and group: min' = min(min, 0), max' = max(max, 0) (GPTQ's quantizer always covers
                   zero), scale = (max' - min') / (2^b - 1) rounded to f16, zero = clip(round(-min' / scale), 1,
                   2^b - 1) (1, not 0: v1 stores zero - 1, and a stored -1 & (2^b - 1) reads back as 2^b, so real v1
                   readers cannot represent zero 0), q = clip(round(w / scale) + zero, 0, 2^b - 1).
                   `M.qweight` I32 [in*b/32, out]: input i of column o at bits (i % (32/b))*b of word [i // (32/b), o];
                   `M.qzeros` I32 [in/g, out*b/32] packed the same way along `out`, holding (zero - 1) & (2^b - 1)
                   (v1's off by one: readers add 1 back);
                   `M.scales` F16 [in/g, out]; `M.g_idx` I32 [in] = i // g. Dequantized: (q - zero) * scale.
  qwen3_gptq8      the same layout with b = 8, g = 64, sym true: scale = max|w| / 127.5 rounded to f16 (GPTQ's sym
                   range [-max|w|, max|w|] over 255 steps), zero = 128 (stored 127), q = clip(round(w / scale) + 128,
                   0, 255).
  qwen3_gptq_actorder  qwen3_gptq's layout and rule (b = 4, g = 32, sym false) with act-order, desc_act true. Each
                   module has a permutation P of its `in` inputs (GPTQ's order of decreasing Hessian diagonal; here
                   np.random.RandomState(1000 * (layer + 1) + role).permutation(in), role 0 for q/k/v_proj, 1 for
                   o_proj, 2 for gate/up_proj, 3 for down_proj, so modules reading the same input share P, as they
                   share the Hessian). Group k is the inputs P[k*g : (k+1)*g]: `M.g_idx`[P[j]] = j // g, not i // g.
                   Scale and zero of (group k, column o) come from that group's inputs by qwen3_gptq's rule; input i
                   is quantized with group g_idx[i]'s scale and zero. Storage is unchanged: qweight still packs inputs
                   in natural order i (GPTQ un-permutes before packing), qzeros / scales stay [in/g, ...] indexed by
                   group. Dequantized: (q[i, o] - zero[g_idx[i], o]) * scale[g_idx[i], o].

All arithmetic is in f32 (numpy), rounding half to even; bf16 / f16 roundings are to nearest even. Packing is done in
uint32 and stored as the format's dtype (U32 for MLX, I32 viewed from the same bits for AWQ / GPTQ).

Usage: /usr/bin/python3 tools/make_int_fixtures.py [--root tests/data/models]   (Debian: python3-numpy)
"""
import argparse
import json
import os
import re
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fp8_fixtures import bf16_round, is_projection, make_fixture, read_safetensors, save  # noqa: E402

AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]
F32 = np.float32

# ---------------------------------------------------------------------------------------------------------------------
# Quantizers (vectorized). Each returns the stored arrays and the exactly dequantized f32 weight [..., out, in].


def f16_scale(scale):
    """f32 scales -> f16 (nearest even), never zero; returns the f16 array."""
    s = np.asarray(scale, dtype=F32).astype(np.float16)
    return np.where(s == 0, np.float16(2.0**-24), s).astype(np.float16)


def pack_bitstream(q, bits):
    """uint values < 2^bits along the last axis as one little-endian bit stream (element j at bit j*bits), in uint32
    words: MLX's 3-, 5- and 6-bit packing (8 values in 3 or 5 bytes, 4 values in 3 bytes), the same stream 2/4/8 give."""
    q = np.asarray(q, dtype=np.uint8)
    assert (q.shape[-1] * bits) % 32 == 0, (q.shape, bits)
    stream = np.unpackbits(q[..., None], axis=-1, bitorder="little")[..., :bits]
    packed = np.packbits(stream.reshape(q.shape[:-1] + (q.shape[-1] * bits,)), axis=-1, bitorder="little")
    return np.ascontiguousarray(packed).view("<u4")


def pack_sequential(q, bits, axis):
    """uint values < 2^bits, packed 32/bits to a uint32 word along `axis`, element k of a word at bits k*bits."""
    if 32 % bits:
        assert axis in (-1, np.asarray(q).ndim - 1)
        return pack_bitstream(q, bits)
    q = np.moveaxis(np.asarray(q, dtype=np.uint32), axis, -1)
    per = 32 // bits
    assert q.shape[-1] % per == 0, (q.shape, bits)
    q = q.reshape(q.shape[:-1] + (q.shape[-1] // per, per))
    words = np.zeros(q.shape[:-1], dtype=np.uint32)
    for k in range(per):
        words |= q[..., k] << np.uint32(k * bits)
    return np.moveaxis(words, -1, axis)


def mlx_quantize(w, group, bits):
    """w [..., out, in] f32 -> (U32 words [..., out, in*bits/32], bf16 bits of scales and biases [..., out, in/group],
    the dequantized f32 weight)."""
    w = np.asarray(w, dtype=F32)
    *lead, rows, cols = w.shape
    assert cols % group == 0 and (cols * bits) % 32 == 0, (w.shape, group, bits)
    levels = F32(2**bits - 1)
    wg = w.reshape(*lead, rows, cols // group, group)
    w_min, w_max = wg.min(axis=-1), wg.max(axis=-1)
    scale = ((w_max - w_min) / levels).astype(F32)
    scale = np.where(scale == 0, F32(1e-8), scale).astype(F32)
    scale_f, scale_bits = bf16_round(scale)
    bias_f, bias_bits = bf16_round(w_min)
    scale_f, bias_f = scale_f.reshape(scale.shape), bias_f.reshape(scale.shape)
    q = np.clip(np.round((wg - bias_f[..., None]) / scale_f[..., None]), 0, levels).astype(F32)
    deq = (scale_f[..., None] * q + bias_f[..., None]).astype(F32).reshape(w.shape)
    words = pack_sequential(q.reshape(w.shape).astype(np.uint32), bits, axis=-1)
    return words, scale_bits.reshape(scale.shape), bias_bits.reshape(scale.shape), deq


def column_groups(w, group):
    """w [out, in] -> w.T grouped: [in/group, group, out]."""
    out_dim, in_dim = w.shape
    assert in_dim % group == 0, (w.shape, group)
    return np.ascontiguousarray(w.T).reshape(in_dim // group, group, out_dim)


def awq_quantize(w, group=32, bits=4):
    """AutoAWQ GEMM (zero_point): -> (qweight I32 [in, out/8], qzeros I32 [in/g, out/8], scales F16 [in/g, out],
    dequantized f32 [out, in])."""
    assert bits == 4
    w = np.asarray(w, dtype=F32)
    out_dim, in_dim = w.shape
    max_int = F32(2**bits - 1)
    wg = column_groups(w, group)
    w_min, w_max = wg.min(axis=1), wg.max(axis=1)
    scales = f16_scale(np.maximum((w_max - w_min) / max_int, F32(1e-5)))
    s = scales.astype(F32)
    zeros = np.clip(np.round(-w_min / s), 0, max_int).astype(F32)
    q = np.clip(np.round(wg / s[:, None, :]) + zeros[:, None, :], 0, max_int).astype(F32)
    deq = ((q - zeros[:, None, :]) * s[:, None, :]).astype(F32).reshape(in_dim, out_dim).T
    q = q.reshape(in_dim, out_dim).astype(np.uint32)

    def pack(values):  # [..., out] -> [..., out/8], nibble k holds column 8c + AWQ_ORDER[k]
        v = values.reshape(values.shape[0], out_dim // 8, 8)
        words = np.zeros(v.shape[:-1], dtype=np.uint32)
        for k, col in enumerate(AWQ_ORDER):
            words |= v[..., col] << np.uint32(4 * k)
        return words.view(np.int32)

    return pack(q), pack(zeros.astype(np.uint32)), scales, np.ascontiguousarray(deq)


def gptq_quantize(w, group, bits, sym, perm=None):
    """GPTQ v1 -> (qweight I32 [in*bits/32, out], qzeros I32 [in/g, out*bits/32], scales F16 [in/g, out], g_idx I32
    [in], dequantized f32 [out, in]). perm None: desc_act false, group k is inputs k*g .. (k+1)*g - 1. perm, a
    permutation of range(in): act-order (desc_act true), group k is inputs perm[k*g : (k+1)*g], g_idx[perm[j]] = j // g;
    the stored arrays keep the natural input order."""
    w = np.asarray(w, dtype=F32)
    out_dim, in_dim = w.shape
    maxq = F32(2**bits - 1)
    if perm is None:
        perm = np.arange(in_dim)
    perm = np.asarray(perm, dtype=np.int64)
    assert sorted(perm.tolist()) == list(range(in_dim)), "perm must be a permutation of range(in)"
    g_idx = np.empty(in_dim, dtype=np.int32)
    g_idx[perm] = (np.arange(in_dim) // group).astype(np.int32)
    wg = column_groups(w[:, perm], group)  # [in/g, g, out], group k = inputs perm[k*g : (k+1)*g]
    if sym:
        amax = np.abs(wg).max(axis=1)
        scale = (amax / F32(maxq / 2)).astype(F32)  # (2 amax) / maxq
        scale = np.where(scale == 0, F32(1.0), scale)
        scales = f16_scale(scale)
        zeros = np.full(scales.shape, F32((maxq + 1) / 2), dtype=F32)
    else:
        w_min, w_max = np.minimum(wg.min(axis=1), F32(0)), np.maximum(wg.max(axis=1), F32(0))
        scale = ((w_max - w_min) / maxq).astype(F32)
        scale = np.where(scale == 0, F32(1.0), scale)
        scales = f16_scale(scale)
        # zero 0 would be stored as (0 - 1) & maxq = maxq and read back as maxq + 1 (v1's known defect): use 1 there.
        zeros = np.clip(np.round(-w_min / scales.astype(F32)), 1, maxq).astype(F32)
    # Every input i in natural order, with its group's scale and zero ([in, out]).
    s, z = scales.astype(F32)[g_idx], zeros[g_idx]
    wt = np.ascontiguousarray(w.T)
    q = np.clip(np.round(wt / s) + z, 0, maxq).astype(F32)
    deq = ((q - z) * s).astype(F32).T
    q = q.astype(np.uint32)
    qweight = pack_sequential(q, bits, axis=0).view(np.int32)
    stored_zeros = (zeros.astype(np.int64) - 1).astype(np.uint32) & np.uint32(2**bits - 1)
    qzeros = pack_sequential(stored_zeros, bits, axis=1).view(np.int32)
    return qweight, qzeros, scales, g_idx, np.ascontiguousarray(deq)


# ---------------------------------------------------------------------------------------------------------------------
# Independent element-by-element unpackers (used by self_check and verify; they share nothing with the packers).


def u32(x):
    return int(x) & 0xFFFFFFFF


def bf16_bits_to_f32(bits):
    return F32(struct.unpack("<f", struct.pack("<I", int(bits) << 16))[0])


def f16_to_f32(h):
    return F32(struct.unpack("<e", struct.pack("<H", int(np.asarray(h, dtype=np.float16).view(np.uint16))))[0])


def loop_mlx_codes(words, out_dim, in_dim, bits):
    """Element j of a row at bit j*bits of the row's words read as one little-endian integer (any bits)."""
    mask = (1 << bits) - 1
    q = np.zeros((out_dim, in_dim), dtype=np.int64)
    for r in range(out_dim):
        row = sum(u32(words[r, k]) << (32 * k) for k in range(words.shape[1]))
        for j in range(in_dim):
            q[r, j] = (row >> (j * bits)) & mask
    return q


def loop_mlx_dequant(words, scale_bits, bias_bits, out_dim, in_dim, group, bits):
    q = loop_mlx_codes(words, out_dim, in_dim, bits)
    out = np.zeros((out_dim, in_dim), dtype=F32)
    for r in range(out_dim):
        for gi in range(in_dim // group):
            s, b = bf16_bits_to_f32(scale_bits[r, gi]), bf16_bits_to_f32(bias_bits[r, gi])
            for j in range(gi * group, (gi + 1) * group):
                out[r, j] = s * F32(q[r, j]) + b
    return out, q


def loop_awq_dequant(qweight, qzeros, scales, group):
    in_dim, out_dim = qweight.shape[0], scales.shape[1]
    out = np.zeros((out_dim, in_dim), dtype=F32)
    q = np.zeros((out_dim, in_dim), dtype=np.int64)
    for i in range(in_dim):
        for o in range(out_dim):
            c, k = o // 8, AWQ_ORDER.index(o % 8)
            q[o, i] = (u32(qweight[i, c]) >> (4 * k)) & 15
            zero = (u32(qzeros[i // group, c]) >> (4 * k)) & 15
            out[o, i] = F32(q[o, i] - zero) * f16_to_f32(scales[i // group, o])
    return out, q


def loop_gptq_dequant(qweight, qzeros, scales, g_idx, bits):
    per, mask = 32 // bits, (1 << bits) - 1
    in_dim, out_dim = len(g_idx), scales.shape[1]
    out = np.zeros((out_dim, in_dim), dtype=F32)
    q = np.zeros((out_dim, in_dim), dtype=np.int64)
    for i in range(in_dim):
        g = int(g_idx[i])
        for o in range(out_dim):
            q[o, i] = (u32(qweight[i // per, o]) >> ((i % per) * bits)) & mask
            zero = ((u32(qzeros[g, o // per]) >> ((o % per) * bits)) & mask) + 1
            out[o, i] = F32(q[o, i] - zero) * f16_to_f32(scales[g, o])
    return out, q


# ---------------------------------------------------------------------------------------------------------------------
# Fixtures


def mlx_quantized_module(name):
    """The module path of an f32 tensor MLX quantizes (every Linear and Embedding), else None."""
    if not name.endswith(".weight"):
        return None
    module = name[: -len(".weight")]
    if is_projection(name) or module in ("model.embed_tokens", "lm_head") or re.fullmatch(r".*\.mlp\.gate", module):
        return module
    # Qwen3-Next: the gated delta net's input projections and the shared expert's sigmoid gate (a Linear, out 1).
    if re.fullmatch(r".*\.linear_attn\.in_proj_\w+|.*\.mlp\.shared_expert_gate", module):
        return module
    return None


QWEN3_NEXT_SHIFTED_NORMS = (".input_layernorm.weight", ".post_attention_layernorm.weight", "model.norm.weight",
                            ".q_norm.weight", ".k_norm.weight")


def qwen3_next_sanitize(name, w):
    """A float tensor as mlx_lm's Qwen3-Next sanitize() leaves it: the (1 + w) RMSNorms stored with the 1 added
    (f32(w + 1), not the gated linear_attn.norm), the depthwise conv [C, 1, K] -> [C, K, 1]."""
    if "conv1d.weight" in name and w.shape[-1] != 1:
        return np.ascontiguousarray(np.moveaxis(w, 2, 1))
    if name.endswith(QWEN3_NEXT_SHIFTED_NORMS) and w.ndim == 1:
        return (w + F32(1.0)).astype(F32)
    return w


EXPERT = re.compile(r"(model\.layers\.\d+\.mlp)\.experts\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight")


def save_folder(folder, config, tensors, dequantized, src):
    """make_fp8_fixtures.save, whose dequantized/config.json drops only quantization_config: MLX's "quantization" key
    must go too."""
    save(folder, config, tensors, dequantized, src)
    plain = {k: v for k, v in config.items() if k not in ("quantization", "quantization_config")}
    with open(os.path.join(folder, "dequantized", "config.json"), "w") as f:
        json.dump(plain, f, indent=2)


def make_mlx(root, src_name, out_name, overrides, sanitize=None, defaults=None):
    """sanitize(name, w): how an f32 tensor kept unquantized is stored (mlx_lm's model.sanitize); the twin keeps w.
    A module whose `in` the default group size does not divide stays f32 with no config entry, as mlx_lm's
    quantize_model leaves it (its loader tells it by the absent `.scales`)."""
    src = os.path.join(root, src_name)
    weights = read_safetensors(os.path.join(src, "model.safetensors"))
    config = json.load(open(os.path.join(src, "config.json")))
    quantization = dict(defaults or {"group_size": 32, "bits": 4})
    quantization.update(overrides)
    config["quantization"] = quantization
    config["quantization_config"] = dict(quantization)

    def params(module):
        spec = quantization.get(module, {})
        if spec is False:
            return None
        return spec.get("group_size", quantization["group_size"]), spec.get("bits", quantization["bits"])

    tensors, dequantized, experts = {}, {}, {}
    for name, w in weights.items():
        match = EXPERT.fullmatch(name)
        if match:
            experts.setdefault((match.group(1), match.group(3)), {})[int(match.group(2))] = name
            continue
        module = mlx_quantized_module(name)
        p = params(module) if module and w.shape[-1] % quantization["group_size"] == 0 else None
        if p is None:
            tensors[name], dequantized[name] = ("F32", sanitize(name, w) if sanitize else w), w
            continue
        words, scale_bits, bias_bits, dequantized[name] = mlx_quantize(w, *p)
        tensors.update({name: ("U32", words), module + ".scales": ("BF16", scale_bits),
                        module + ".biases": ("BF16", bias_bits)})
    for (mlp, proj), by_expert in experts.items():
        assert sorted(by_expert) == list(range(len(by_expert)))
        names = [by_expert[e] for e in range(len(by_expert))]
        module = f"{mlp}.switch_mlp.{proj}"
        assert params(module) == (quantization["group_size"], quantization["bits"])  # no expert overrides here
        words, scale_bits, bias_bits, deq = mlx_quantize(np.stack([weights[n] for n in names]), *params(module))
        tensors.update({module + ".weight": ("U32", words), module + ".scales": ("BF16", scale_bits),
                        module + ".biases": ("BF16", bias_bits)})
        for e, n in enumerate(names):
            dequantized[n] = deq[e]
    save_folder(os.path.join(root, out_name), config, tensors, dequantized, src)


def make_qwen3_mlx4(root):
    make_mlx(root, "qwen3", "qwen3_mlx4", {"model.layers.1.mlp.down_proj": {"group_size": 64, "bits": 8},
                                           "model.layers.2.self_attn.o_proj": False})


def make_qwen3_mlx3(root):
    """mlx-community's 3-, 5- and 6-bit conversions: 3-bit g64 by default, the MLP down projections at 6 bits and one
    o_proj at 5 (per-module overrides); the codes are one little-endian bit stream per row (pack_bitstream)."""
    make_mlx(root, "qwen3", "qwen3_mlx3", {f"model.layers.{n}.mlp.down_proj": {"group_size": 64, "bits": 6}
                                           for n in range(3)} | {"model.layers.0.self_attn.o_proj": {"bits": 5}},
             defaults={"group_size": 64, "bits": 3})


def make_qwen3_moe_mlx4(root):
    config = json.load(open(os.path.join(root, "qwen3_moe", "config.json")))
    dense = set(config.get("mlp_only_layers", []))
    routers = {f"model.layers.{n}.mlp.gate": {"group_size": 32, "bits": 8}
               for n in range(config["num_hidden_layers"]) if n not in dense}
    make_mlx(root, "qwen3_moe", "qwen3_moe_mlx4", routers)


def make_qwen3_next_mlx4(root):
    """qwen3_next as `mlx_lm.convert -q` writes it: sanitized (norms shifted, conv [C, K, 1], experts stacked), g 32,
    b 4, the routers and shared-expert gates at b 8, g 32 (mlx_lm's Qwen3-Next quant_predicate gives both 8 bits)."""
    config = json.load(open(os.path.join(root, "qwen3_next", "config.json")))
    dense = set(config.get("mlp_only_layers", []))
    gates = {f"model.layers.{n}.mlp.{gate}": {"group_size": 32, "bits": 8}
             for n in range(config["num_hidden_layers"]) if n not in dense for gate in ("gate", "shared_expert_gate")}
    make_mlx(root, "qwen3_next", "qwen3_next_mlx4", gates, sanitize=qwen3_next_sanitize)


def make_awq(root):
    config = {"quant_method": "awq", "bits": 4, "group_size": 32, "zero_point": True, "version": "gemm",
              "modules_to_not_convert": None}

    def quantize(name, w):
        qweight, qzeros, scales, deq = awq_quantize(w, 32, 4)
        m = name[: -len(".weight")]
        return {m + ".qweight": ("I32", qweight), m + ".qzeros": ("I32", qzeros), m + ".scales": ("F16", scales)}, deq

    make_fixture(root, "qwen3", "qwen3_awq", config, quantize)


GPTQ_PROJ = re.compile(r"model\.layers\.(\d+)\.(?:self_attn|mlp)\.(q|k|v|o|gate|up|down)_proj\.weight")
ACTORDER_ROLE = {"q": 0, "k": 0, "v": 0, "o": 1, "gate": 2, "up": 2, "down": 3}  # same input, same role, same P


def actorder_perm(name, in_dim):
    """The fixed act-order permutation of a projection's inputs: one per (layer, input it reads)."""
    match = GPTQ_PROJ.fullmatch(name)
    assert match, name
    layer, role = int(match.group(1)), ACTORDER_ROLE[match.group(2)]
    return np.random.RandomState(1000 * (layer + 1) + role).permutation(in_dim)


def make_gptq(root, out_name, bits, group, sym, desc_act=False):
    config = {"quant_method": "gptq", "bits": bits, "group_size": group, "desc_act": desc_act, "sym": sym,
              "checkpoint_format": "gptq"}

    def quantize(name, w):
        perm = actorder_perm(name, w.shape[1]) if desc_act else None
        qweight, qzeros, scales, g_idx, deq = gptq_quantize(w, group, bits, sym, perm)
        m = name[: -len(".weight")]
        return {m + ".qweight": ("I32", qweight), m + ".qzeros": ("I32", qzeros), m + ".scales": ("F16", scales),
                m + ".g_idx": ("I32", g_idx)}, deq

    make_fixture(root, "qwen3", out_name, config, quantize)


# ---------------------------------------------------------------------------------------------------------------------
# Checks


def self_check():
    """One random matrix per format: the element-by-element unpack of what was packed equals codes computed here
    element by element from the format's formula, and the dequantized weight equals the formula bit for bit."""
    rng = np.random.default_rng(1234)
    w = (rng.standard_normal((16, 128)) * 0.05).astype(F32)
    w[3, 32:64] = 0.25  # a constant group
    w[5, :32] = np.abs(w[5, :32]) + 0.01  # a group entirely above zero

    for group, bits in ((32, 4), (64, 8), (64, 3), (32, 5), (64, 6)):
        words, scale_bits, bias_bits, deq = mlx_quantize(w, group, bits)
        assert words.dtype == np.uint32 and words.shape == (16, 128 * bits // 32)
        got, q = loop_mlx_dequant(words, scale_bits, bias_bits, 16, 128, group, bits)
        for r in range(16):
            for j in range(128):
                s = bf16_bits_to_f32(scale_bits[r, j // group])
                b = bf16_bits_to_f32(bias_bits[r, j // group])
                expect = min(max(int(np.round((w[r, j] - b) / s)), 0), 2**bits - 1)
                assert q[r, j] == expect, ("mlx", bits, r, j)
        assert np.array_equal(got.view(np.uint32), deq.view(np.uint32)), ("mlx dequant", bits)
        stacked = mlx_quantize(np.stack([w, -w]), group, bits)
        assert np.array_equal(stacked[0][0], words) and np.array_equal(stacked[3][1], mlx_quantize(-w, group, bits)[3])

    # MLX's 3-bit pack: values 0..7 in order make bytes 0b10001000, 0b11000110, 0b11111010 (bits 3k little-endian).
    assert pack_bitstream(np.tile(np.arange(8, dtype=np.uint8), 4).reshape(1, 32), 3).view(np.uint8)[0, :3].tolist() \
        == [0b10001000, 0b11000110, 0b11111010]

    wa = w.reshape(32, 64)  # out 32, in 64 (its rows 6 and 10 hold the constant and the all-positive groups)
    qweight, qzeros, scales, deq = awq_quantize(wa, 32, 4)
    assert qweight.dtype == np.int32 and qweight.shape == (64, 4) and qzeros.shape == (2, 4) and scales.shape == (2, 32)
    got, q = loop_awq_dequant(qweight, qzeros, scales, 32)
    for o in range(32):
        for i in range(64):
            col = wa[o, (i // 32) * 32 : (i // 32 + 1) * 32]
            s = f16_to_f32(scales[i // 32, o])
            assert s == F32(np.float16(max(F32(col.max() - col.min()) / F32(15), F32(1e-5))))
            zero = min(max(int(np.round(-col.min() / s)), 0), 15)
            assert q[o, i] == min(max(int(np.round(wa[o, i] / s)) + zero, 0), 15), ("awq", o, i)
    assert np.array_equal(got.view(np.uint32), deq.view(np.uint32)), "awq dequant"

    for bits, group, sym in ((4, 32, False), (8, 64, True)):
        qweight, qzeros, scales, g_idx, deq = gptq_quantize(wa, group, bits, sym)
        assert qweight.shape == (64 * bits // 32, 32) and qzeros.shape == (64 // group, 32 * bits // 32)
        got, q = loop_gptq_dequant(qweight, qzeros, scales, g_idx, bits)
        maxq = 2**bits - 1
        for o in range(32):
            for i in range(64):
                assert g_idx[i] == i // group
                col = wa[o, (i // group) * group : (i // group + 1) * group]
                s = f16_to_f32(scales[i // group, o])
                if sym:
                    zero = 128
                else:
                    lo = min(F32(col.min()), F32(0))
                    zero = min(max(int(np.round(-lo / s)), 1), maxq)
                assert q[o, i] == min(max(int(np.round(wa[o, i] / s)) + zero, 0), maxq), ("gptq", bits, o, i)
        if sym:
            assert np.all(qzeros.view(np.uint32) == np.uint32(0x7F7F7F7F))
        assert np.array_equal(got.view(np.uint32), deq.view(np.uint32)), ("gptq dequant", bits)
        identity = gptq_quantize(wa, group, bits, sym, np.arange(64))
        assert all(np.array_equal(a, b) for a, b in zip(identity, (qweight, qzeros, scales, g_idx, deq)))

    # GPTQ act-order (desc_act): w [16, 128], 4 groups of 32 inputs chosen by a permutation. The constant group and
    # the all-positive group are placed on permuted groups, so they straddle the natural 32-input blocks.
    perm = np.random.RandomState(99).permutation(128)
    wp = w.copy()
    wp[3, perm[32:64]] = 0.25
    wp[5, perm[:32]] = np.abs(wp[5, perm[:32]]) + 0.01
    qweight, qzeros, scales, g_idx, deq = gptq_quantize(wp, 32, 4, False, perm)
    assert qweight.dtype == np.int32 and qweight.shape == (16, 16) and qzeros.shape == (4, 2)
    assert scales.dtype == np.float16 and scales.shape == (4, 16) and g_idx.dtype == np.int32 and g_idx.shape == (128,)
    assert any(int(g_idx[i]) != i // 32 for i in range(128)), "act-order g_idx must not be i // g"
    got, q = loop_gptq_dequant(qweight, qzeros, scales, g_idx, 4)
    perm_list = [int(p) for p in perm]
    for i in range(128):
        g = perm_list.index(i) // 32
        assert g_idx[i] == g, ("gptq act-order g_idx", i)
        members = [perm_list[k] for k in range(g * 32, (g + 1) * 32)]
        for o in range(16):
            lo = min(min(F32(wp[o, m]) for m in members), F32(0))
            hi = max(max(F32(wp[o, m]) for m in members), F32(0))
            s = f16_to_f32(scales[g, o])
            raw = F32(hi - lo) / F32(15)
            assert s == (F32(np.float16(raw)) if raw != 0 else F32(1.0)), ("gptq act-order scale", o, i)
            zero = min(max(int(np.round(-lo / s)), 1), 15)
            assert ((u32(qzeros[g, o // 8]) >> (4 * (o % 8))) & 15) + 1 == zero, ("gptq act-order zero", o, i)
            assert q[o, i] == min(max(int(np.round(wp[o, i] / s)) + zero, 0), 15), ("gptq act-order", o, i)
            assert got[o, i] == F32(q[o, i] - zero) * s
    assert np.array_equal(got.view(np.uint32), deq.view(np.uint32)), "gptq act-order dequant"


def read_any(path):
    """name -> (dtype, array) for F32 / BF16 (uint16 bits) / F16 / U32 / I32 tensors."""
    dtypes = {"F32": np.float32, "BF16": np.uint16, "F16": np.float16, "U32": np.uint32, "I32": np.int32}
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        begin, end = meta["data_offsets"]
        raw = np.frombuffer(data[8 + n + begin : 8 + n + end], dtype=dtypes[meta["dtype"]])
        out[name] = (meta["dtype"], raw.reshape(meta["shape"]))
    return out


def reference_dequant(folder):
    """Dequantizes a fixture from its stored tensors with the element-by-element unpackers: name -> f32, named as
    the source fixture's tensors."""
    config = json.load(open(os.path.join(folder, "config.json")))
    qc = config["quantization_config"]
    stored = read_any(os.path.join(folder, "model.safetensors"))
    out, quantized = {}, set()
    method = qc.get("quant_method", "mlx")
    for name, (dtype, a) in stored.items():
        if dtype == "F32":
            out[name] = a
            continue
        if method == "mlx":
            if not name.endswith(".weight"):
                continue
            module = name[: -len(".weight")]
            spec = qc.get(module, {})
            group, bits = spec.get("group_size", qc["group_size"]), spec.get("bits", qc["bits"])
            scales, biases = stored[module + ".scales"][1], stored[module + ".biases"][1]
            in_dim = scales.shape[-1] * group
            if ".switch_mlp." in module:
                mlp, proj = module.split(".switch_mlp.")
                for e in range(a.shape[0]):
                    target = f"{mlp}.experts.{e}.{proj}.weight"
                    out[target] = loop_mlx_dequant(a[e], scales[e], biases[e], a.shape[1], in_dim, group, bits)[0]
                    quantized.add(target)
            else:
                out[name] = loop_mlx_dequant(a, scales, biases, a.shape[0], in_dim, group, bits)[0]
                quantized.add(name)
        elif name.endswith(".qweight"):
            module = name[: -len(".qweight")]
            qzeros, scales = stored[module + ".qzeros"][1], stored[module + ".scales"][1]
            if method == "awq":
                deq = loop_awq_dequant(a, qzeros, scales, qc["group_size"])[0]
            else:
                deq = loop_gptq_dequant(a, qzeros, scales, stored[module + ".g_idx"][1], qc["bits"])[0]
            out[module + ".weight"] = deq
            quantized.add(module + ".weight")
    return out, quantized


def verify(root, src_name, out_name):
    folder = os.path.join(root, out_name)
    source = read_safetensors(os.path.join(root, src_name, "model.safetensors"))
    twin = read_safetensors(os.path.join(folder, "dequantized", "model.safetensors"))
    assert set(twin) == set(source), (out_name, set(twin) ^ set(source))
    reference, quantized = reference_dequant(folder)
    assert set(reference) == set(source), (out_name, set(reference) ^ set(source))
    stored = read_any(os.path.join(folder, "model.safetensors"))
    sanitize = SANITIZE.get(out_name, lambda name, w: w)
    max_err, worst = 0.0, None
    for name, w in source.items():
        assert twin[name].shape == w.shape
        if name in quantized:
            assert np.array_equal(reference[name].view(np.uint32), twin[name].view(np.uint32)), (out_name, name)
            err = float(np.abs(twin[name] - w).max())
            if err > max_err:
                max_err, worst = err, name
        else:
            # The twin holds the source tensor; the checkpoint holds it as the format's converter stores it.
            assert np.array_equal(twin[name].view(np.uint32), w.view(np.uint32)), (out_name, name)
            expect = sanitize(name, w)
            assert stored[name][0] == "F32" and stored[name][1].shape == expect.shape, (out_name, name)
            assert np.array_equal(stored[name][1].view(np.uint32), expect.view(np.uint32)), (out_name, name)
    config = json.load(open(os.path.join(folder, "dequantized", "config.json")))
    assert "quantization" not in config and "quantization_config" not in config
    assert config == json.load(open(os.path.join(root, src_name, "config.json")))
    if out_name in SANITIZE:
        check_qwen3_next_layout(folder, stored, source, config)
    size = lambda p: os.path.getsize(os.path.join(folder, p))  # noqa: E731
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(folder) for f in fs)
    print(f"{out_name}: {len(quantized)} quantized weights, {len(source) - len(quantized)} f32 kept; "
          f"model.safetensors {size('model.safetensors')} B, dequantized/model.safetensors "
          f"{size('dequantized/model.safetensors')} B, folder {total} B; "
          f"max |W_deq - W_source| {max_err:.3g} ({worst})")
    kinds = config.get("layer_types", [])
    shown = [0] + [n for n in range(1, len(kinds)) if kinds[n] != kinds[0]][:1]  # layer 0 and one of another kind
    for layer in shown:
        for name in sorted(stored):
            if f".layers.{layer}." in name:
                print(f"    {name:56s} {stored[name][0]:4s} {list(stored[name][1].shape)}")
    unquantized = sorted(n for n in source if n not in quantized and not n.endswith("norm.weight"))
    print(f"    f32, not quantized: {unquantized or 'only norms'}")
    qc = json.load(open(os.path.join(folder, "config.json")))["quantization_config"]
    if qc.get("quant_method") == "gptq":
        check_g_idx(stored, qc)


def check_qwen3_next_layout(folder, stored, source, config):
    """mlx_lm's Qwen3-Next layout, element by element: every (1 + w) norm holds f32(source + 1), the gated norm the
    source; every conv [C, K, 1] holds the source [C, 1, K] transposed; experts only stacked; a module whose `in` the
    group size does not divide is stored f32 and absent from the config."""
    qc = json.load(open(os.path.join(folder, "config.json")))["quantization_config"]
    one, shifted, convs = F32(1.0), 0, 0
    for name, w in source.items():
        a = stored.get(name, (None, None))[1]
        if name.endswith(QWEN3_NEXT_SHIFTED_NORMS):
            assert ".linear_attn." not in name and a.shape == w.shape, name
            for i in range(w.shape[0]):
                assert u32(a.view(np.uint32)[i]) == u32(np.array([F32(w[i]) + one], dtype=F32).view(np.uint32)[0]), \
                    (name, i)
            shifted += 1
        elif name.endswith("linear_attn.norm.weight"):
            assert np.array_equal(a.view(np.uint32), w.view(np.uint32)), name
        elif name.endswith("linear_attn.conv1d.weight"):
            channels, _, taps = w.shape
            assert a.shape == (channels, taps, 1), (name, a.shape)
            for c in range(channels):
                for k in range(taps):
                    assert u32(a[c, k, 0].view(np.uint32)) == u32(w[c, 0, k].view(np.uint32)), (name, c, k)
            convs += 1
    layers, kinds = config["num_hidden_layers"], config["layer_types"]
    attention = sum(kind == "full_attention" for kind in kinds)
    assert shifted == 2 * layers + 2 * attention + 1, shifted
    assert convs == layers - attention, convs
    assert not any(".experts." in name for name in stored)
    dense = set(config.get("mlp_only_layers", []))
    for n in range(layers):
        for proj in ("gate_proj", "up_proj", "down_proj"):
            stacked = f"model.layers.{n}.mlp.switch_mlp.{proj}.weight"
            assert (stacked in stored) == (n not in dense), stacked
            if stacked in stored:
                assert stored[stacked][1].shape[0] == config["num_experts"], stacked
    for name, (dtype, a) in stored.items():
        module = name[: -len(".weight")]
        if dtype == "F32" and mlx_quantized_module(name) and a.shape[-1] % qc["group_size"] != 0:
            assert module not in qc and module + ".scales" not in stored, name
    print(f"    {shifted} (1 + w) norms stored as f32(w + 1), {convs} convs [C, K, 1]: equal the source element by "
          f"element")


def check_g_idx(stored, qc):
    """GPTQ g_idx: every group holds exactly group_size inputs; i // g unless desc_act, then a real permutation,
    the same for modules that read the same input (q/k/v, gate/up), different across layers and inputs."""
    group, by_module = qc["group_size"], {}
    for name, (dtype, g_idx) in stored.items():
        if not name.endswith(".g_idx"):
            continue
        assert dtype == "I32" and g_idx.ndim == 1, name
        in_dim = g_idx.shape[0]
        assert np.array_equal(np.bincount(g_idx, minlength=in_dim // group), np.full(in_dim // group, group)), name
        natural = np.arange(in_dim) // group
        if not qc["desc_act"]:
            assert np.array_equal(g_idx, natural), name
            continue
        blocks = g_idx.reshape(in_dim // group, group)
        assert all(len(set(b.tolist())) > 1 for b in blocks), (name, "a natural block of inputs is one group")
        by_module[name[: -len(".g_idx")]] = g_idx
    if not qc["desc_act"]:
        return
    shared, distinct = {}, {}
    for module, g_idx in by_module.items():
        match = GPTQ_PROJ.fullmatch(module + ".weight")
        key = (int(match.group(1)), ACTORDER_ROLE[match.group(2)])
        if key in shared:
            assert np.array_equal(shared[key], g_idx), (module, "differs from its input's other modules")
        shared[key] = g_idx
        distinct.setdefault(g_idx.tobytes(), []).append(key)
    assert all(len(set(keys)) == 1 for keys in distinct.values()), "two inputs share a g_idx"
    print(f"    act-order g_idx: {len(by_module)} modules, {len(shared)} distinct permutations (one per layer and "
          f"input), none i // {group}, q/k/v and gate/up share theirs")
    for module in sorted(by_module):
        if ".layers.0." in module:
            print(f"    {module + '.g_idx':48s} {by_module[module].tolist()}")


FIXTURES = [("qwen3", "qwen3_mlx4"), ("qwen3_moe", "qwen3_moe_mlx4"), ("qwen3", "qwen3_awq"), ("qwen3", "qwen3_gptq"),
            ("qwen3", "qwen3_gptq8"), ("qwen3", "qwen3_gptq_actorder"), ("qwen3_next", "qwen3_next_mlx4")]
SANITIZE = {"qwen3_next_mlx4": qwen3_next_sanitize}  # fixtures whose f32 tensors are stored other than the source


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", "tests", "data", "models"))
    parser.add_argument("--no-verify", action="store_true", help="skip re-reading the fixtures element by element")
    args = parser.parse_args()
    self_check()
    make_qwen3_mlx4(args.root)
    make_qwen3_mlx3(args.root)
    make_qwen3_moe_mlx4(args.root)
    make_qwen3_next_mlx4(args.root)
    make_awq(args.root)
    make_gptq(args.root, "qwen3_gptq", bits=4, group=32, sym=False)
    make_gptq(args.root, "qwen3_gptq8", bits=8, group=64, sym=True)
    make_gptq(args.root, "qwen3_gptq_actorder", bits=4, group=32, sym=False, desc_act=True)
    if not args.no_verify:
        for src_name, out_name in FIXTURES:
            verify(args.root, src_name, out_name)


if __name__ == "__main__":
    main()
