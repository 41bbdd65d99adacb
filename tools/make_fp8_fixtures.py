#!/usr/bin/python3
"""Tiny FP8 checkpoints, made from the committed f32 fixtures by each format's own rules (numpy only, no torch).

For every fixture it writes two folders:
  tests/data/models/<name>/               the FP8 checkpoint (config.json with quantization_config, model.safetensors)
  tests/data/models/<name>/dequantized/   the same model with every FP8 weight exactly dequantized to f32
                                          (fp8 value * scale, rounded once to f32), the reference its greedy tokens
                                          must equal (tests/model/quantized_test.cpp)

Layouts:
  qwen3_fp8        transformers' fine-grained FP8 (Qwen3-*-FP8): weight F8_E4M3 [out, in] + weight_scale_inv F32
                   [ceil(out/b), ceil(in/b)], quant_method "fp8", weight_block_size [32, 32] (Qwen ships [128, 128];
                   32 gives the 64-wide fixture several blocks per row and column). The tied embedding stays f32.
  qwen3_fp8_channel compressed-tensors per channel with F32 scales (an f32 model's FP8_DYNAMIC): exactly what
                   `--quantization fp8` makes of the qwen3 fixture.
  qwen3_moe_fp8_ct compressed-tensors "float-quantized" (RedHat/neuralmagic *-FP8-dynamic): weight F8_E4M3 +
                   weight_scale BF16 [out, 1] per channel (o_proj per tensor, [1]), experts included; lm_head and the
                   routers stay as stored (the `ignore` list).

E4M3 (OCP e4m3fn) encoding here is independent of radixserve's: nearest of the 254 finite values by table search,
ties to the even code, saturating at +-448.

Usage: python3 tools/make_fp8_fixtures.py [--root tests/data/models]   (Debian: python3-numpy)
"""
import argparse
import json
import os
import re
import shutil
import struct

import numpy as np

E4M3_MAX = 448.0


def e4m3_values():
    """The value of every code 0..255 (NaN for 0x7f / 0xff)."""
    values = np.zeros(256, dtype=np.float64)
    for code in range(256):
        exponent, mantissa = (code >> 3) & 15, code & 7
        if exponent == 15 and mantissa == 7:
            values[code] = np.nan
            continue
        magnitude = mantissa * 2.0**-9 if exponent == 0 else (1 + mantissa / 8) * 2.0 ** (exponent - 7)
        values[code] = -magnitude if code & 0x80 else magnitude
    return values


VALUES = e4m3_values()
POSITIVE_CODES = np.array([c for c in range(0x7f)], dtype=np.uint8)  # 0x00..0x7e, ascending values
POSITIVE_VALUES = VALUES[POSITIVE_CODES]


def to_e4m3(x):
    """float array -> uint8 codes: nearest finite value, ties to the even code, saturating."""
    x = np.asarray(x, dtype=np.float64)
    magnitude = np.minimum(np.abs(x), E4M3_MAX)
    hi = np.clip(np.searchsorted(POSITIVE_VALUES, magnitude, side="left"), 0, len(POSITIVE_VALUES) - 1)
    lo = np.clip(hi - 1, 0, None)
    d_hi = POSITIVE_VALUES[hi] - magnitude
    d_lo = magnitude - POSITIVE_VALUES[lo]
    pick_lo = (d_lo < d_hi) | ((d_lo == d_hi) & (POSITIVE_CODES[lo] % 2 == 0))
    codes = np.where(pick_lo, POSITIVE_CODES[lo], POSITIVE_CODES[hi]).astype(np.uint8)
    return np.where(np.signbit(x) & (codes != 0), codes | 0x80, codes).astype(np.uint8)


def from_e4m3(codes):
    return VALUES[codes].astype(np.float32)


def bf16_round(x):
    """f32 -> the f32 value of its bf16 rounding (to nearest even), and the bf16 bits."""
    bits = np.atleast_1d(np.asarray(x, dtype=np.float32)).view(np.uint32).astype(np.uint64)
    u = np.uint64
    bits = (bits + u(0x7FFF) + ((bits >> u(16)) & u(1))) >> u(16)
    bf16 = bits.astype(np.uint16)
    return (bf16.astype(np.uint32) << 16).view(np.float32), bf16


def read_safetensors(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        assert meta["dtype"] == "F32", (name, meta["dtype"])
        begin, end = meta["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + begin : 8 + n + end], dtype=np.float32).reshape(meta["shape"])
    return out


def write_safetensors(path, tensors):
    """tensors: name -> (safetensors dtype, numpy array of matching byte layout)."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        dtype, array = tensors[name]
        raw = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def quantize_blocks(w, block):
    rows, cols = w.shape
    br, bc = block
    scale_rows, scale_cols = -(-rows // br), -(-cols // bc)
    scales = np.zeros((scale_rows, scale_cols), dtype=np.float32)
    codes = np.zeros(w.shape, dtype=np.uint8)
    for i in range(scale_rows):
        for j in range(scale_cols):
            tile = w[i * br : (i + 1) * br, j * bc : (j + 1) * bc]
            amax = float(np.abs(tile).max())
            scale = np.float32(amax / E4M3_MAX if amax > 0 else 1.0)
            scales[i, j] = scale
            codes[i * br : (i + 1) * br, j * bc : (j + 1) * bc] = to_e4m3(tile / scale)
    dequantized = np.zeros(w.shape, dtype=np.float32)
    for i in range(scale_rows):
        for j in range(scale_cols):
            sl = (slice(i * br, (i + 1) * br), slice(j * bc, (j + 1) * bc))
            dequantized[sl] = from_e4m3(codes[sl]) * scales[i, j]  # f32 * f32, rounded once
    return codes, scales, dequantized


def quantize_rows(w, per_tensor, bf16_scales):
    """compressed-tensors: scale amax / 448 per output channel (or one per tensor), computed in f32 and stored in the
    model's dtype as llm-compressor does (bf16 for a bf16 model: then rounded first). Returns codes, the stored scales
    (uint16 bf16 bits or f32) and the dequantized weight."""
    amax = np.abs(w).max(keepdims=True) if per_tensor else np.abs(w).max(axis=1, keepdims=True)
    scale = np.where(amax > 0, amax / np.float32(E4M3_MAX), np.float32(1.0)).astype(np.float32)
    stored = scale
    if bf16_scales:
        scale, stored = bf16_round(scale)
        scale = scale.reshape(amax.shape)
    codes = to_e4m3((w / scale).astype(np.float32))
    dequantized = (from_e4m3(codes) * scale).astype(np.float32)
    shape = (1,) if per_tensor else (w.shape[0], 1)
    return codes, stored.reshape(shape), dequantized


def save(folder, config, tensors, dequantized, src):
    if os.path.exists(folder):
        shutil.rmtree(folder)
    os.makedirs(os.path.join(folder, "dequantized"))
    write_safetensors(os.path.join(folder, "model.safetensors"), tensors)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    plain = {k: v for k, v in config.items() if k != "quantization_config"}
    with open(os.path.join(folder, "dequantized", "config.json"), "w") as f:
        json.dump(plain, f, indent=2)
    write_safetensors(os.path.join(folder, "dequantized", "model.safetensors"),
                      {k: ("F32", v) for k, v in dequantized.items()})
    for extra in ("generation_config.json",):
        if os.path.exists(os.path.join(src, extra)):
            shutil.copy(os.path.join(src, extra), folder)
            shutil.copy(os.path.join(src, extra), os.path.join(folder, "dequantized"))


def is_projection(name):
    return name.endswith("_proj.weight")


def make_fixture(root, src_name, out_name, quantization_config, quantize):
    """Copies fixture `src_name` to `out_name` with every projection replaced by quantize(name, w) -> (the tensors to
    store under their names, the exactly dequantized weight); other tensors stay f32."""
    src = os.path.join(root, src_name)
    weights = read_safetensors(os.path.join(src, "model.safetensors"))
    config = json.load(open(os.path.join(src, "config.json")))
    config["quantization_config"] = quantization_config
    tensors, dequantized = {}, {}
    for name, w in weights.items():
        if is_projection(name):
            stored, dequantized[name] = quantize(name, w)
            tensors.update(stored)
        else:
            tensors[name] = ("F32", w)
            dequantized[name] = w
    save(os.path.join(root, out_name), config, tensors, dequantized, src)


def make_fine_grained(root):
    block = [32, 32]

    def quantize(name, w):
        codes, scales, deq = quantize_blocks(w, block)
        return {name: ("F8_E4M3", codes), name.replace(".weight", ".weight_scale_inv"): ("F32", scales)}, deq

    make_fixture(root, "qwen3", "qwen3_fp8", {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3",
                                              "weight_block_size": block}, quantize)


def make_compressed_tensors(root):
    fp8 = {"num_bits": 8, "type": "float", "symmetric": True, "dynamic": False}
    config = {
        "quant_method": "compressed-tensors", "format": "float-quantized", "quantization_status": "compressed",
        "ignore": ["lm_head", "re:.*mlp.gate$"],
        "config_groups": {
            "group_0": {"targets": ["re:.*o_proj$"], "weights": dict(fp8, strategy="tensor"),
                        "input_activations": {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False}},
            "group_1": {"targets": ["Linear"], "weights": dict(fp8, strategy="channel"),
                        "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True}},
        },
    }

    def quantize(name, w):
        per_tensor = ".o_proj." in name
        codes, scale_bits, deq = quantize_rows(w, per_tensor, bf16_scales=True)
        stored = {name: ("F8_E4M3", codes), name.replace(".weight", ".weight_scale"): ("BF16", scale_bits)}
        if per_tensor:  # a static activation scale, as FP8 (static) checkpoints carry; W8A16 paths ignore it
            stored[name.replace(".weight", ".input_scale")] = ("BF16", bf16_round(np.float32([0.05]))[1])
        return stored, deq

    make_fixture(root, "qwen3_moe", "qwen3_moe_fp8_ct", config, quantize)


def make_channel(root):
    """qwen3 with every projection per channel, f32 scales (an f32 model's llm-compressor FP8_DYNAMIC): what
    `--quantization fp8` must produce from the unquantized qwen3 fixture, bit for bit."""
    config = {
        "quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
            "num_bits": 8, "type": "float", "symmetric": True, "dynamic": False, "strategy": "channel"},
            "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True}}},
    }

    def quantize(name, w):
        codes, scales, deq = quantize_rows(w, per_tensor=False, bf16_scales=False)
        return {name: ("F8_E4M3", codes), name.replace(".weight", ".weight_scale"): ("F32", scales)}, deq

    make_fixture(root, "qwen3", "qwen3_fp8_channel", config, quantize)


def self_check():
    # Every finite code round-trips; midpoints go to the even code; saturation.
    finite = [c for c in range(256) if (c & 0x7F) != 0x7F]
    assert all(to_e4m3(VALUES[c])[()] == c or VALUES[c] == 0 for c in finite)
    assert to_e4m3(1.0625) == 0x38 and to_e4m3(1.1875) == 0x3A and to_e4m3(15.5) == 0x58
    assert to_e4m3(1e6) == 0x7E and to_e4m3(-1e6) == 0xFE


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", "tests", "data", "models"))
    args = parser.parse_args()
    self_check()
    make_fine_grained(args.root)
    make_compressed_tensors(args.root)
    make_channel(args.root)


if __name__ == "__main__":
    main()
