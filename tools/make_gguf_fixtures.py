#!/usr/bin/python3
"""Tiny GGUF checkpoints, written the way llama.cpp's convert_hf_to_gguf.py (+ llama-quantize, + gguf-split) writes
them, from the committed f32 fixtures and two widened random models (numpy only: no torch, no gguf-py).

For every fixture it writes:
  tests/data/models/<name>/<name>.gguf         the GGUF (llama_gguf_q8 also as two gguf-split shards, below)
  tests/data/models/<name>/dequantized/        an HF folder (config.json, generation_config.json, model.safetensors F32)
                                               holding every tensor of the GGUF decoded from the file's bytes by
                                               ggml's dequantize_row_* rules in f32, under the source's HF names and
                                               shapes (llama's q/k rows un-permuted; expert stacks split per expert).
                                               rope_freqs has no HF tensor and is left out; a tied lm_head is absent
                                               from the GGUF and so from the twin. The folder loads with the source's
                                               config.json, unchanged, and is exactly the model the GGUF stores.

Fixtures (in = a weight's input width, ne[0]; every quantized row is encoded along `in`):
  qwen3_gguf_f32     qwen3 (tied), `convert_hf_to_gguf.py --outtype f32`: every tensor F32, general.file_type 0.
  llama_gguf_q8      llama (untied, rope_type llama3), `--outtype q8_0`: every 2-D weight Q8_0 (token_embd and output
                     included), norms and rope_freqs F32, file_type 7. q_proj / k_proj rows permuted as convert's
                     LlamaModel.permute does (n_head, then n_head_kv for k). Also split as `gguf-split
                     --split-max-tensors 16`: llama_gguf_q8-00001-of-00002.gguf (16 tensors), -00002-of-00002.gguf
                     (15), next to the whole file.
  qwen3_gguf_q4      qwen3 through llama-quantize with per-tensor types (file_type 2, MOSTLY_Q4_0): attn_q / attn_k
                     Q4_0, attn_v Q4_1, attn_output Q5_0 (blk.2: F16), ffn_gate Q5_1, ffn_up Q4_0 (blk.1: BF16),
                     ffn_down Q8_0, token_embd Q4_0, norms F32; no output (tied lm_head, dropped as convert does).
  qwen3_gguf_k       a new random qwen3: hidden 256, 4 heads x head_dim 64, 2 kv heads, intermediate 256, 2 layers,
                     vocab 512, tied (every K-quantized `in` is 256), Q4_K_M-like (file_type 15):
                     attn_q / attn_k / attn_output / ffn_gate / ffn_up / token_embd Q4_K, attn_v and ffn_down Q6_K
                     (blk.1 ffn_down Q5_K), norms F32, tied.
  qwen3_gguf_k23     the same model as qwen3_gguf_k (same widened config and seed), Q3_K_M-like (file_type 12,
                     MOSTLY_Q3_K_M): attn_q / attn_k / ffn_gate / ffn_up Q3_K, attn_v / attn_output Q4_K, ffn_down
                     Q5_K (blk.0) / Q2_K (blk.1), token_embd Q2_K, norms F32, tied.
  qwen3_moe_gguf_k   a new random qwen3_moe: hidden 256, 4 x 64 heads, 2 kv heads, 2 layers, layer 0 dense
                     (mlp_only_layers [0], intermediate_size 128), layer 1 MoE with 4 experts of moe_intermediate_size
                     256, top 2, vocab 512, untied; file_type 15: attn_q / attn_k / attn_output Q4_K, attn_v Q6_K,
                     ffn_gate_exps / ffn_up_exps Q4_K, ffn_down_exps Q6_K, ffn_gate_inp F32, the dense layer's
                     ffn_gate / ffn_up / ffn_down Q8_0, token_embd Q8_0, output Q6_K, norms F32.
  gpt_oss_gguf       gpt-oss from tests/data/models/gpt_oss_mxfp4 (MXFP4 experts, BF16 rest), as `convert_hf_to_gguf.py
                     --outtype q8_0` writes it (file_type 7): ffn_{gate,up,down}_exps MXFP4 (type 39) repacked from
                     the HF blocks / scales (nothing re-quantized), token_embd / output / attn_{q,k,v,output} Q8_0
                     (from the BF16 values), ffn_gate_inp (router), biases, sinks and norms F32. Its twin has
                     transformers' dequantized GptOss layout, names and shapes of tests/data/models/gpt_oss
                     (gate_up_proj [E, H, 2I] gate / up interleaved in the columns, down_proj [E, I, H], ...) and the
                     source config.json without quantization_config; its experts equal transformers' own MXFP4
                     dequantization of the source (HF's -0.0 becomes ggml's +0.0).
  qwen3_next_gguf    qwen3next from tests/data/models/qwen3_next (f32), `--outtype q8_0`: Q8_0 for every 2-D weight,
  qwen3_5_gguf       F16 where ne[0] % 32 != 0 (ffn_down_shexp, in 48: convert's fallback), F32 for norms, ssm_conv1d,
  qwen3_5_moe_gguf   ssm_a, ssm_dt.bias, ssm_norm, ffn_gate_inp, ffn_gate_inp_shexp; qwen35 and qwen35moe likewise from
                     tests/data/models/qwen3_5 and qwen3_5_moe (vision tower dropped, as convert does: the twin holds
                     the text model only). Twins: every transform undone, the source's names and shapes, the source's
                     config.json unchanged.
  The K models' twins are the only copy of their (random) source: what is written is the dequantized GGUF. Weights
  are seeded N(0, 1/in) (router 2/sqrt(in), embeddings / lm_head 0.25), norms 1 + N(0, 0.2^2), like the committed
  fixtures. These are the least sizes that keep every type / role above; --k-dims brief gives the first proposal
  (intermediate 512; MoE: 3 layers, 8 experts, dense intermediate 512), about 6 MB and 21 MB with their f32 twins.

File layout (GGUF v3, little endian; gguf.cpp / gguf_writer.py):
  "GGUF", u32 version 3, u64 n_tensors, u64 n_kv; n_kv x (string key, u32 value type, value); n_tensors x (string
  name, u32 n_dims, u64 ne[0..n_dims-1] with ne[0] the fastest-varying (an HF [out, in] weight has ne [in, out], an
  expert stack [E, out, in] has ne [in, out, E]), u32 ggml type, u64 offset from the data section); zero padding to
  the alignment; the data section: each tensor's bytes followed by zero padding to the alignment (the last one too),
  offsets therefore multiples of 32. A string is u64 byte length + UTF-8 bytes (no NUL); an array is u32 element
  type + u64 count + the elements. Value types: u8 0, i8 1, u16 2, i16 3, u32 4, i32 5, f32 6, bool 7 (one byte),
  string 8, array 9, u64 10, i64 11, f64 12. ggml types: F32 0, F16 1, Q4_0 2, Q4_1 3, Q5_0 6, Q5_1 7, Q8_0 8, Q2_K 10,
  Q3_K 11, Q4_K 12, Q5_K 13, Q6_K 14, BF16 30, MXFP4 39.

Metadata, in file order (convert_hf_to_gguf.py: GGUFWriter.__init__ adds general.architecture, prepare_metadata adds
general.type "model", general.name (Metadata.set_gguf_meta_model; here the fixture's name, where convert derives it
and optional general.basename / size_label keys from the model folder and model card), set_gguf_parameters, then
general.quantization_version (convert writes it for unquantized files too); TextModel.set_gguf_parameters writes, when
present in config.json:
  {arch}.block_count u32 (num_hidden_layers), {arch}.context_length u32 (max_position_embeddings),
  {arch}.embedding_length u32 (hidden_size), {arch}.feed_forward_length u32 (intermediate_size),
  {arch}.attention.head_count u32, {arch}.attention.head_count_kv u32, {arch}.rope.freq_base f32 (rope_theta),
  {arch}.attention.layer_norm_rms_epsilon f32, {arch}.expert_count u32 (num_local_experts / num_experts),
  {arch}.expert_used_count u32 (num_experts_per_tok), {arch}.attention.key_length u32 and .value_length u32
  (head_dim), general.file_type u32;
then the model class's own keys: LlamaModel adds llama.vocab_size u32 and llama.rope.dimension_count u32 (head_dim);
Qwen2MoeModel (Qwen3MoeModel's base) adds qwen3moe.expert_feed_forward_length u32 (moe_intermediate_size); Qwen3Model
adds nothing (no rope.dimension_count: llama.cpp defaults n_rot to the head size). rope_type "default" and "llama3"
write no rope.scaling keys (llama3 becomes the rope_freqs tensor). No tokenizer.* keys: the tiny fixtures have no
tokenizer, so none are written (convert itself would stop at set_vocab; tools/make_gguf_vocab.py writes vocab GGUFs).
  general.alignment u32 32 is written right after general.architecture in every whole file (asked for by this
project's tests; convert writes it only for a non-default alignment, so real files usually lack it and a reader must
default to 32, as the second llama shard, which has no general.alignment, exercises).
  llama-quantize (qwen3_gguf_q4, qwen3_gguf_k, qwen3_gguf_k23, qwen3_moe_gguf_k) copies the converted file's KV pairs
and then sets general.quantization_version u32 2 and general.file_type u32 (gguf_set_val_* removes a key and appends
it), so both move to the end, in that order. Its tensors come in llama_model_loader's weights_map order
(weight_name_comparer: non-block tensors first, then by block number, names compared as strings within a group);
convert's own files (qwen3_gguf_f32, llama_gguf_q8) keep convert's order: generated tensors (rope_freqs) first, then
the safetensors order, an expert stack emitted (down, gate, up) when a layer's last expert tensor is read.
  gguf-split: shard 1 holds every KV pair of the whole file then split.no u16 0, split.tensors.count i32 (total
tensors), split.count u16; the other shards hold only split.no, split.tensors.count, split.count (that order:
split.count is set last, after its placeholder). Tensor bytes are copied unchanged, in the whole file's order;
shard k (from 1) holds tensors 16(k - 1) .. 16k - 1. Only shard 1 has general.* / arch keys (and so general.alignment).

Tensor names (gguf-py TensorNameMap): model.embed_tokens -> token_embd, lm_head -> output, model.norm -> output_norm,
model.layers.N. + input_layernorm -> blk.N.attn_norm, self_attn.{q,k,v,o}_proj -> attn_{q,k,v,output},
self_attn.{q,k}_norm -> attn_{q,k}_norm, post_attention_layernorm -> ffn_norm, mlp.{gate,up,down}_proj ->
ffn_{gate,up,down}, mlp.gate -> ffn_gate_inp, mlp.experts.E.{gate,up,down}_proj (stacked over E) ->
ffn_{gate,up,down}_exps; every name ends in ".weight". (llama.cpp's qwen3moe has no dense FFN tensors; layer 0 of
qwen3_moe_gguf_k uses the generic ffn_gate / ffn_up / ffn_down names, which llama.cpp's converter would refuse.)

rope_freqs (llama3 rope): convert's LlamaModel.generate_extra_tensors, in float32 like its torch code: freqs =
1 / base^(arange(0, head_dim, 2) / head_dim); wavelen = 2 pi / freq; factor 1 if wavelen < old_ctx / high_freq_factor,
`factor` if wavelen > old_ctx / low_freq_factor, else 1 / ((1 - s) / factor + s) with s = (old_ctx / wavelen -
low_freq_factor) / (high_freq_factor - low_freq_factor). old_ctx is rope_parameters.original_max_position_embeddings
(64 here), the value transformers uses for this config; convert reads a top-level original_max_position_embeddings
with default 8192, which real Llama 3 configs make equal, but which here would give a GGUF that is not the HF model.

Block layouts (ggml-common.h; d, m, dmin are IEEE half, little endian; y is the dequantized f32, every product below
is exact in f32, so only the final add / subtract rounds and an FMA gives the same bits):
  Q8_0  34 B / 32: d, qs[32] int8.                                y[j] = qs[j] * d
  Q4_0  18 B / 32: d, qs[16]; element j (j < 16) in the low nibble of qs[j], element j + 16 in its high nibble.
                                                                  y = (nibble - 8) * d
  Q4_1  20 B / 32: d, m, qs[16] as Q4_0.                          y = nibble * d + m
  Q5_0  22 B / 32: d, qh[4] (u32 LE: bit k is the 5th bit of element k), qs[16] as Q4_0.
                                                                  y = ((nibble | bit << 4) - 16) * d
  Q5_1  24 B / 32: d, m, qh[4], qs[16].                           y = (nibble | bit << 4) * d + m
  Q2_K  84 B / 256: scales[16], qs[64], d, dmin. Sixteen sub-blocks of 16: element e uses scales[e // 16] (low nibble
        sc, high nibble m). Element 128n + 32j + l (n < 2, j < 4, l < 32) is bits 2j..2j+1 of qs[32n + l].
                                                                  y = (d * sc) * q - (dmin * m)
  Q3_K  110 B / 256: hmask[32], qs[64], scales[12], d. q = (2 low bits, placed as Q2_K's) - (0 if bit e // 32 of
        hmask[e % 32] is set else 4), in -4..3. Sixteen 6-bit scales u (element e uses u[e // 16]): low 4 bits of u[j]
        are the low nibble of scales[j] (j < 8) or the high nibble of scales[j - 8], bits 4-5 are bits 2(j // 4)..
        of scales[8 + j % 4] (dequantize_row_q3_K's kmask1 / kmask2 shuffle of the three u32 words).
                                                                  y = (d * (u - 32)) * q
  Q4_K  144 B / 256: d, dmin, scales[12], qs[128]. Eight sub-blocks of 32 with 6-bit scale sc[s] and min m[s]
        (get_scale_min_k4: s < 4: sc = scales[s] & 63, m = scales[s + 4] & 63; s >= 4: sc = (scales[s + 4] & 15) |
        (scales[s - 4] >> 6) << 4, m = (scales[s + 4] >> 4) | (scales[s] >> 6) << 4). Element 64c + l (l < 32) is
        the low nibble of qs[32c + l] (sub-block 2c), element 64c + 32 + l its high nibble (sub-block 2c + 1).
                                                                  y = (d * sc) * q - (dmin * m)
  Q5_K  176 B / 256: d, dmin, scales[12], qh[32], qs[128]: as Q4_K plus a 5th bit: bit 2c of qh[l] for element
        64c + l, bit 2c + 1 for element 64c + 32 + l.               y = (d * sc) * (q + 16 * bit) - (dmin * m)
  Q6_K  210 B / 256: ql[128], qh[64], scales[16] int8, d. For half n (elements 128n ..), l < 32: elements
        128n + l, + 32 + l, + 64 + l, + 96 + l take the low nibble of ql[64n + l], low nibble of ql[64n + 32 + l], high
        nibble of ql[64n + l], high nibble of ql[64n + 32 + l], and bits 0-1, 2-3, 4-5, 6-7 of qh[32n + l] as bits
        4-5; q = that 6-bit value - 32; element e uses scales[e // 16].  y = (d * scales) * q
  MXFP4 17 B / 32: e (E8M0), qs[16] as Q4_0. y = kvalues_mxfp4[nibble] * 2^(e - 128), kvalues_mxfp4 = {0, 1, 2, 3,
        4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12} (twice E2M1; ggml_e8m0_to_fp32_half, e < 2 via denormals).
        HF's *_blocks byte k holds element 2k (low) and 2k + 1 (high), value E2M1 * 2^(scale - 127): the repack only
        moves nibbles and prepends the scale byte.
  F16 / BF16: 2 B per element (bf16: the top half of the f32 bits). Conversions round to nearest even (ggml's).
Encoders: Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1 follow ggml's quantize_row_*_ref arithmetic (f32); the K-quants use one
min / max pass (not llama-quantize's search, any valid encoding decodes the same): Q4_K / Q5_K per sub-block scale =
(max - min(min, 0)) / (2^b - 1), min offset = -min(min, 0), 6-bit codes against d = max scale / 63, dmin = max offset
/ 63 (f16), q = clamp(nearest((x + dmin * m) / (d * sc))); Q2_K the same per 16 with b = 2 and 4-bit codes (/ 15);
Q6_K per 16 the signed largest-magnitude value maps to -32, int8 scales against d = -(that scale's max) / 128 (f16),
q = clamp(nearest(x / (d * sc)), -32, 31); Q3_K likewise maps it to -4, 6-bit signed scales clamp(nearest(-32 *
scale / max scale), -32, 31) against d = -(max scale) / 32 (f16), q = clamp(nearest(x / (d * sc)), -4, 3).
A self-check encodes random rows (with constant, all-zero, all-positive blocks) in every type and decodes them twice:
vectorised, and element by element with loops transcribed from ggml-quants.c dequantize_row_*; both must agree bit for
bit and be close to the input; hand-laid blocks (Q2_K, Q3_K, Q4_K, Q6_K) must decode to known values, and random
Q2_K / Q3_K bytes must decode alike both ways. After writing, every file is parsed back and every tensor decoded both
ways again and compared bit for bit with the twin.

gpt-oss / qwen3next / qwen35 / qwen35moe (convert's GptOssModel, Qwen2MoeModel, Qwen3NextModel,
_LinearAttentionVReorderBase, _Qwen35MRopeMixin; general.architecture "gpt-oss", "qwen3next", "qwen35", "qwen35moe"):
  Metadata after the generic keys above (which for these also write, when present: rope.scaling.type "yarn" string,
  .factor f32, .original_context_length u32, .yarn_beta_fast / .yarn_beta_slow f32 right after head_count_kv, and
  rope.dimension_sections i32[4] (mrope_section padded with 0) before rope.freq_base; feed_forward_length is absent for
  qwen35moe, whose text_config (merged over the top level) has no intermediate_size): gpt-oss adds
  attention.sliding_window and expert_feed_forward_length (= intermediate_size); the Qwen ones add
  expert_feed_forward_length (moe_intermediate_size) and expert_shared_feed_forward_length when present, then
  ssm.conv_kernel (linear_conv_kernel_dim), ssm.state_size (linear_key_head_dim), ssm.group_count
  (linear_num_key_heads), ssm.time_step_rank (linear_num_value_heads), ssm.inner_size (value head dim x value heads),
  full_attention_interval, rope.dimension_count (int(head_dim x partial_rotary_factor)), and for qwen35* without an
  mrope_section the default rope.dimension_sections [11, 11, 10, 0]. convert writes full_attention_interval from the
  config's own key (default 4); these configs only have layer_types (full attention at (i + 1) % n == 0, llama.cpp's
  rule), so the fixtures write that n (2, 2, 3), without which the GGUF would not be the HF model.
  Tensors (ne of an HF [out, in] weight is [in, out]; no q/k permute): input_layernorm -> attn_norm,
  post_attention_layernorm -> post_attention_norm, self_attn.{q,k,v,o}_proj (+ .bias for gpt-oss) ->
  attn_{q,k,v,output}, self_attn.sinks -> attn_sinks.weight, mlp.router / mlp.gate -> ffn_gate_inp, experts ->
  ffn_{gate,up,down}_exps (+ .bias), mlp.shared_expert.{gate,up,down}_proj -> ffn_{gate,up,down}_shexp,
  mlp.shared_expert_gate -> ffn_gate_inp_shexp (ne [H, 1]), linear_attn.in_proj_qkv / in_proj_z / in_proj_a /
  in_proj_b / in_proj_ba / conv1d / norm / out_proj / A_log / dt_bias -> attn_qkv / attn_gate / ssm_alpha / ssm_beta /
  ssm_ba / ssm_conv1d / ssm_norm / ssm_out / ssm_a (no suffix) / ssm_dt.bias; "model.language_model." loses
  "language_model.". Transforms: every `norm.weight` but linear_attn.norm gets + 1 (f32 add; the twin holds
  fl32(g - 1), a subtraction that never rounds for w >= -2, but not the source's bits: w + 1 rounds); A_log ->
  -exp(A_log) (computed in f64, rounded to f32; the twin holds fl32(log(-a)) in f64, and -exp of it gives a back on
  every value here); conv1d [C, 1, K] squeezed to [C, K];
  qwen3next's in_proj_qkvz rows [q_g, k_g, v_g, z_g] per key head g become attn_qkv = [all q, all k, all v] and
  attn_gate = all z; qwen35*'s value heads (nk != nv) go from grouped (head g r + j) to tiled (position j nk + g)
  order in the v rows of in_proj_qkv, in_proj_z, in_proj_a / _b, A_log, dt_bias, the v channels of conv1d and the
  columns of out_proj. gpt-oss's gate_up_proj (blocks, scales, bias) is split even rows -> gate, odd -> up. Dense
  layers of the Qwen MoE configs (qwen3_next's mlp_only_layers [0]) take the generic ffn_gate / ffn_up / ffn_down
  names (llama.cpp's converter would refuse them). Order: gpt-oss's MXFP4 tensors first (convert writes them from
  generate_extra_tensors: per layer down, gate, up), then the safetensors order; experts stacked as above.
  The check undoes every transform on the decoded GGUF (must give the twin bit for bit), converts the twin again
  (must give the GGUF's decoded values bit for bit: every inverse exact on these values) and compares with the source.

Usage: /usr/bin/python3 tools/make_gguf_fixtures.py [--root tests/data/models] [--k-dims small|brief]
"""
import argparse
import json
import math
import os
import shutil
import struct
import sys

try:  # the GGUF container (gguf_file, read_gguf) needs no numpy: make_gguf_vocab.py runs under any python3
    import numpy as np

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from make_fp8_fixtures import bf16_round, read_safetensors, write_safetensors  # noqa: E402

    F32 = np.float32
except ImportError:
    np = None
ALIGNMENT = 32
GGUF_VERSION = 3
QUANT_VERSION = 2

# ---------------------------------------------------------------------------------------------------------------------
# GGUF values and files

U8, I8, U16, I16, U32, I32, FLOAT32, BOOL, STRING, ARRAY, U64, I64, FLOAT64 = range(13)
_SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", FLOAT32: "<f", BOOL: "<?", U64: "<Q",
           I64: "<q", FLOAT64: "<d"}

# name -> (ggml type id, elements per block, bytes per block)
TYPES = {"F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18), "Q4_1": (3, 32, 20), "Q5_0": (6, 32, 22),
         "Q5_1": (7, 32, 24), "Q8_0": (8, 32, 34), "Q2_K": (10, 256, 84), "Q3_K": (11, 256, 110),
         "Q4_K": (12, 256, 144), "Q5_K": (13, 256, 176), "Q6_K": (14, 256, 210), "BF16": (30, 1, 2),
         "MXFP4": (39, 32, 17)}
TYPE_BY_ID = {v[0]: k for k, v in TYPES.items()}


def pack_string(s):
    raw = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(raw)) + raw


def pack_value(vtype, value, subtype=None):
    """A value's bytes, without its type tag (an array carries its element type and count)."""
    if vtype in _SCALAR:
        return struct.pack(_SCALAR[vtype], value)
    if vtype == STRING:
        return pack_string(value)
    if vtype == ARRAY:
        assert subtype is not None and len(value) > 0
        head = struct.pack("<IQ", subtype, len(value))
        if subtype == STRING:
            return head + b"".join(pack_string(v) for v in value)
        if subtype in (I32, U32, FLOAT32):
            return head + struct.pack("<%d%s" % (len(value), {I32: "i", U32: "I", FLOAT32: "f"}[subtype]), *value)
        return head + b"".join(struct.pack(_SCALAR[subtype], v) for v in value)
    raise ValueError(vtype)


def pad_to(n, alignment=ALIGNMENT):
    return (n + alignment - 1) // alignment * alignment


def gguf_file(kvs, tensors, alignment=ALIGNMENT):
    """kvs: [(key, vtype, value[, subtype])]; tensors: [(name, ne (fastest first), type name, raw bytes)]."""
    out = [b"GGUF", struct.pack("<IQQ", GGUF_VERSION, len(tensors), len(kvs))]
    for kv in kvs:
        key, vtype, value = kv[:3]
        out += [pack_string(key), struct.pack("<I", vtype), pack_value(vtype, value, kv[3] if len(kv) > 3 else None)]
    offset = 0
    for name, ne, tname, raw in tensors:
        tid, blk, bbytes = TYPES[tname]
        assert ne[0] % blk == 0 and len(raw) == math.prod(ne) // blk * bbytes, (name, ne, tname, len(raw))
        out += [pack_string(name), struct.pack("<I", len(ne)), struct.pack(f"<{len(ne)}Q", *ne),
                struct.pack("<IQ", tid, offset)]
        offset += pad_to(len(raw), alignment)
    meta = b"".join(out)
    parts = [meta, bytes(pad_to(len(meta), alignment) - len(meta))]
    if not tensors:
        return meta  # a file without tensors ends after its KV pairs (gguf_writer.write_vocab)
    for _, _, _, raw in tensors:
        parts += [raw, bytes(pad_to(len(raw), alignment) - len(raw))]
    return b"".join(parts)


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v[0] if len(v) == 1 else v

    def string(self):
        n = self.take("<Q")
        s = self.data[self.pos:self.pos + n].decode("utf-8")
        self.pos += n
        return s

    def value(self, vtype):
        if vtype in _SCALAR:
            return self.take(_SCALAR[vtype])
        if vtype == STRING:
            return self.string()
        if vtype == ARRAY:
            sub, n = self.take("<I"), self.take("<Q")
            return (sub, [self.value(sub) for _ in range(n)])
        raise ValueError(f"bad GGUF value type {vtype}")


def read_gguf(data):
    """-> (kvs: [(key, vtype, value)], tensors: [(name, ne, type name, raw bytes)]), checking the container rules
    (magic, version, offsets aligned and in order, zero padding, file ending where the last tensor's padding ends)."""
    r = Reader(data)
    assert data[:4] == b"GGUF", "magic"
    r.pos = 4
    version, n_tensors, n_kv = r.take("<I"), r.take("<Q"), r.take("<Q")
    assert version == GGUF_VERSION, version
    kvs = []
    for _ in range(n_kv):
        key = r.string()
        vtype = r.take("<I")
        kvs.append((key, vtype, r.value(vtype)))
    keys = [k for k, _, _ in kvs]
    assert len(set(keys)) == len(keys), "duplicate key"
    alignment = dict((k, v) for k, _, v in kvs).get("general.alignment", ALIGNMENT)
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        n_dims = r.take("<I")
        ne = [r.take("<Q") for _ in range(n_dims)]
        tid, offset = r.take("<I"), r.take("<Q")
        infos.append((name, ne, TYPE_BY_ID[tid], offset))
    if not infos:
        assert r.pos == len(data), "trailing bytes after the KV pairs of a file without tensors"
        return kvs, []
    data_start = pad_to(r.pos, alignment)
    assert data[r.pos:data_start] == bytes(data_start - r.pos), "non-zero padding before the data section"
    tensors, expect = [], 0
    for name, ne, tname, offset in infos:
        _, blk, bbytes = TYPES[tname]
        size = math.prod(ne) // blk * bbytes
        assert offset == expect and offset % alignment == 0, (name, offset, expect)
        begin = data_start + offset
        tensors.append((name, ne, tname, data[begin:begin + size]))
        end = pad_to(size, alignment)
        assert data[begin + size:begin + end] == bytes(end - size), f"non-zero padding after {name}"
        expect = offset + end
    assert len(data) == data_start + expect, "file size"
    return kvs, tensors


# ---------------------------------------------------------------------------------------------------------------------
# Encoders (vectorised; x: f32 [n_blocks, block elements] -> uint8 [n_blocks, block bytes])


def f16_bytes(a):
    return np.ascontiguousarray(np.asarray(a, dtype=F32).astype(np.float16)).view(np.uint8).reshape(len(a), 2)


def roundf(v):
    """C roundf (halves away from zero) of f32 values, exact (done in f64)."""
    v = np.asarray(v, dtype=np.float64)
    return np.where(v >= 0, np.floor(v + 0.5), -np.floor(-v + 0.5))


def abs_max_signed(x):
    """Per row, the value of largest magnitude (the first one on ties), as ggml's `if (amax < fabsf(v))` loop."""
    idx = np.argmax(np.abs(x), axis=1)
    return x[np.arange(len(x)), idx]


def inverse(d):
    with np.errstate(divide="ignore"):
        return np.where(d != 0, F32(1.0) / np.where(d != 0, d, F32(1.0)), F32(0.0)).astype(F32)


def nibbles_32(q):
    """q [nb, 32] values < 16 -> qs [nb, 16]: element j low nibble of byte j, element j + 16 its high nibble."""
    return (q[:, :16] | (q[:, 16:] << 4)).astype(np.uint8)


def high_bits_u32(q):
    """5th bits of q [nb, 32] -> qh [nb, 4] (u32 little endian, bit k = element k)."""
    bits = ((q >> 4) & 1).astype(np.uint64)
    word = (bits << np.arange(32, dtype=np.uint64)).sum(axis=1).astype("<u4")
    return np.ascontiguousarray(word).view(np.uint8).reshape(len(q), 4)


def enc_q8_0(x):
    amax = np.abs(x).max(axis=1)
    d = (amax / F32(127)).astype(F32)
    q = roundf(x * inverse(d)[:, None]).astype(np.int8)
    return np.concatenate([f16_bytes(d), q.view(np.uint8)], axis=1)


def enc_q4_0(x):
    d = (abs_max_signed(x) / F32(-8)).astype(F32)
    v = (x * inverse(d)[:, None]).astype(F32) + F32(8.5)
    q = np.minimum(15, np.trunc(v)).astype(np.uint8)
    return np.concatenate([f16_bytes(d), nibbles_32(q)], axis=1)


def enc_q4_1(x):
    lo, hi = x.min(axis=1), x.max(axis=1)
    d = ((hi - lo) / F32(15)).astype(F32)
    v = ((x - lo[:, None]) * inverse(d)[:, None]).astype(F32) + F32(0.5)
    q = np.minimum(15, np.trunc(v)).astype(np.uint8)
    return np.concatenate([f16_bytes(d), f16_bytes(lo), nibbles_32(q)], axis=1)


def enc_q5_0(x):
    d = (abs_max_signed(x) / F32(-16)).astype(F32)
    v = (x * inverse(d)[:, None]).astype(F32) + F32(16.5)
    q = np.minimum(31, np.trunc(v)).astype(np.uint8)
    return np.concatenate([f16_bytes(d), high_bits_u32(q), nibbles_32(q & 15)], axis=1)


def enc_q5_1(x):
    lo, hi = x.min(axis=1), x.max(axis=1)
    d = ((hi - lo) / F32(31)).astype(F32)
    v = ((x - lo[:, None]) * inverse(d)[:, None]).astype(F32) + F32(0.5)
    q = np.minimum(31, np.trunc(v)).astype(np.uint8)
    return np.concatenate([f16_bytes(d), f16_bytes(lo), high_bits_u32(q), nibbles_32(q & 15)], axis=1)


def _k_scales_mins(x, levels, sub=32, codes=63):
    """Shared Q2_K / Q4_K / Q5_K step: x [nb, 256] -> (d f16 bytes, dmin f16 bytes, ls [nb, 256 / sub],
    lm [nb, 256 / sub], L [nb, 256 / sub, sub]); scale / min codes 0..codes (63: 6-bit Q4_K / Q5_K, 15: Q2_K)."""
    xs = x.reshape(len(x), 256 // sub, sub)
    mn = np.minimum(xs.min(axis=2), F32(0))
    scale = ((xs.max(axis=2) - mn) / F32(levels)).astype(F32)
    mins = (-mn).astype(F32)
    max_scale, max_min = scale.max(axis=1), mins.max(axis=1)
    top = F32(codes)
    inv_scale = np.where(max_scale > 0, top / np.where(max_scale > 0, max_scale, F32(1)), F32(0)).astype(F32)
    inv_min = np.where(max_min > 0, top / np.where(max_min > 0, max_min, F32(1)), F32(0)).astype(F32)
    ls = np.minimum(codes, np.rint(inv_scale[:, None] * scale)).astype(np.int64)
    lm = np.minimum(codes, np.rint(inv_min[:, None] * mins)).astype(np.int64)
    d16 = (max_scale / top).astype(F32).astype(np.float16)
    dmin16 = (max_min / top).astype(F32).astype(np.float16)
    d_eff = (d16.astype(F32)[:, None] * ls.astype(F32)).astype(F32)
    dm_eff = (dmin16.astype(F32)[:, None] * lm.astype(F32)).astype(F32)
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.rint(((xs + dm_eff[:, :, None]) / np.where(d_eff > 0, d_eff, F32(1))[:, :, None]).astype(F32))
    L = np.where(d_eff[:, :, None] > 0, np.clip(v, 0, levels), 0).astype(np.int64)
    return d16.view(np.uint8).reshape(-1, 2), dmin16.view(np.uint8).reshape(-1, 2), ls, lm, L


def pack_k_scales(ls, lm):
    """6-bit scales and mins [nb, 8] -> scales[12] as get_scale_min_k4 reads them."""
    s = np.zeros((len(ls), 12), dtype=np.int64)
    s[:, 0:4] = ls[:, 0:4] | ((ls[:, 4:8] >> 4) << 6)
    s[:, 4:8] = lm[:, 0:4] | ((lm[:, 4:8] >> 4) << 6)
    s[:, 8:12] = (ls[:, 4:8] & 15) | ((lm[:, 4:8] & 15) << 4)
    return s.astype(np.uint8)


def enc_q4_k(x):
    d, dmin, ls, lm, L = _k_scales_mins(x, 15)
    L = L.reshape(len(x), 4, 2, 32)  # chunk c of 64 elements, half h (sub-block 2c + h), l
    qs = (L[:, :, 0, :] | (L[:, :, 1, :] << 4)).reshape(len(x), 128).astype(np.uint8)
    return np.concatenate([d, dmin, pack_k_scales(ls, lm), qs], axis=1)


def enc_q5_k(x):
    d, dmin, ls, lm, L = _k_scales_mins(x, 31)
    L = L.reshape(len(x), 4, 2, 32)
    low = L & 15
    qs = (low[:, :, 0, :] | (low[:, :, 1, :] << 4)).reshape(len(x), 128).astype(np.uint8)
    high = (L >> 4) & 1  # [nb, c, h, l] -> bit 2c + h of qh[l]
    shifts = (2 * np.arange(4)[:, None] + np.arange(2)[None, :])[None, :, :, None]
    qh = (high << shifts).sum(axis=(1, 2)).astype(np.uint8)
    return np.concatenate([d, dmin, pack_k_scales(ls, lm), qh, qs], axis=1)


def enc_q6_k(x):
    nb = len(x)
    xs = x.reshape(nb, 16, 16)
    big = abs_max_signed(xs.reshape(nb * 16, 16)).reshape(nb, 16)
    iscale16 = np.where(big != 0, F32(-32) / np.where(big != 0, big, F32(1)), F32(0)).astype(F32)
    scale = inverse(iscale16)  # = -big / 32
    idx = np.argmax(np.abs(scale), axis=1)
    max_scale = scale[np.arange(nb), idx]
    iscale = np.where(max_scale != 0, F32(-128) / np.where(max_scale != 0, max_scale, F32(1)), F32(0)).astype(F32)
    d16 = inverse(iscale).astype(np.float16)
    sc = np.minimum(127, np.rint(iscale[:, None] * scale)).astype(np.int64)
    d_eff = (d16.astype(F32)[:, None] * sc.astype(F32)).astype(F32)
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.rint((xs / np.where(d_eff != 0, d_eff, F32(1))[:, :, None]).astype(F32))
    L = (np.where(d_eff[:, :, None] != 0, np.clip(v, -32, 31), 0) + 32).astype(np.int64).reshape(nb, 2, 4, 32)
    q1, q2, q3, q4 = L[:, :, 0, :], L[:, :, 1, :], L[:, :, 2, :], L[:, :, 3, :]
    ql = np.concatenate([(q1 & 15) | ((q3 & 15) << 4), (q2 & 15) | ((q4 & 15) << 4)], axis=2)  # [nb, 2, 64]
    qh = (q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6)  # [nb, 2, 32]
    return np.concatenate([ql.reshape(nb, 128).astype(np.uint8), qh.reshape(nb, 64).astype(np.uint8),
                           sc.astype(np.int8).view(np.uint8), d16.view(np.uint8).reshape(nb, 2)], axis=1)


def crumbs_128(L):
    """2-bit codes L [nb, 256] -> qs [nb, 64] (Q2_K / Q3_K low bits): element 128n + 32j + l is bits 2j..2j+1 of
    qs[32n + l]."""
    L = L.reshape(len(L), 2, 4, 32)
    qs = L[:, :, 0, :] | (L[:, :, 1, :] << 2) | (L[:, :, 2, :] << 4) | (L[:, :, 3, :] << 6)
    return qs.reshape(len(L), 64).astype(np.uint8)


def enc_q2_k(x):
    d, dmin, ls, lm, L = _k_scales_mins(x, 3, sub=16, codes=15)
    scales = (ls | (lm << 4)).astype(np.uint8)  # [nb, 16]: low nibble scale, high nibble min
    return np.concatenate([scales, crumbs_128(L.reshape(len(x), 256)), d, dmin], axis=1)


def enc_q3_k(x):
    nb = len(x)
    xs = x.reshape(nb, 16, 16)
    big = abs_max_signed(xs.reshape(nb * 16, 16)).reshape(nb, 16)
    iscale4 = np.where(big != 0, F32(-4) / np.where(big != 0, big, F32(1)), F32(0)).astype(F32)
    scale = inverse(iscale4)  # = -big / 4: the largest magnitude maps to -4
    idx = np.argmax(np.abs(scale), axis=1)
    max_scale = scale[np.arange(nb), idx]
    iscale = np.where(max_scale != 0, F32(-32) / np.where(max_scale != 0, max_scale, F32(1)), F32(0)).astype(F32)
    d16 = inverse(iscale).astype(np.float16)
    sc = np.clip(np.rint(iscale[:, None] * scale), -32, 31).astype(np.int64)  # signed 6-bit, stored + 32
    d_eff = (d16.astype(F32)[:, None] * sc.astype(F32)).astype(F32)
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.rint((xs / np.where(d_eff != 0, d_eff, F32(1))[:, :, None]).astype(F32))
    L = (np.where(d_eff[:, :, None] != 0, np.clip(v, -4, 3), 0) + 4).astype(np.int64).reshape(nb, 256)
    high = (L >> 2).reshape(nb, 8, 32)  # bit (e // 32) of hmask[e % 32]
    hmask = (high << np.arange(8)[None, :, None]).sum(axis=1).astype(np.uint8)
    u = sc + 32
    scales = np.zeros((nb, 12), dtype=np.int64)
    scales[:, 0:8] = (u[:, 0:8] & 15) | ((u[:, 8:16] & 15) << 4)  # low nibbles: scale j in byte j % 8, nibble j // 8
    for j in range(16):  # high 2 bits: bits 2 (j // 4) .. of byte 8 + j % 4
        scales[:, 8 + j % 4] |= (u[:, j] >> 4) << (2 * (j // 4))
    return np.concatenate([hmask, crumbs_128(L & 3), scales.astype(np.uint8), d16.view(np.uint8).reshape(nb, 2)],
                          axis=1)


ENCODERS = {"Q8_0": enc_q8_0, "Q4_0": enc_q4_0, "Q4_1": enc_q4_1, "Q5_0": enc_q5_0, "Q5_1": enc_q5_1,
            "Q2_K": enc_q2_k, "Q3_K": enc_q3_k, "Q4_K": enc_q4_k, "Q5_K": enc_q5_k, "Q6_K": enc_q6_k}


def encode(tname, w):
    """w f32 [..., in] -> the tensor's bytes in ggml type tname (rows along the last axis)."""
    w = np.ascontiguousarray(w, dtype=F32)
    if tname == "F32":
        return w.astype("<f4").tobytes()
    if tname == "F16":
        return w.astype("<f2").tobytes()
    if tname == "BF16":
        return bf16_round(w)[1].astype("<u2").tobytes()
    _, blk, _ = TYPES[tname]
    assert w.shape[-1] % blk == 0, (tname, w.shape)
    return ENCODERS[tname](w.reshape(-1, blk)).tobytes()


# ---------------------------------------------------------------------------------------------------------------------
# Vectorised decoders (raw bytes -> f32 [n elements])


def _blocks(raw, tname):
    return np.frombuffer(raw, dtype=np.uint8).reshape(-1, TYPES[tname][2])


def _half(b):
    return np.ascontiguousarray(b).view("<f2").astype(F32)  # [nb, 1]


def _unnibble(qs):
    return np.concatenate([qs & 15, qs >> 4], axis=1).astype(np.int64)


def _bits_u32(qh):
    word = np.ascontiguousarray(qh).view("<u4").astype(np.int64)  # [nb, 1]
    return (word >> np.arange(32)) & 1


def _uncrumb_128(qs):
    """qs [nb, 64] -> 2-bit codes [nb, 256]: element 128n + 32j + l is bits 2j..2j+1 of qs[32n + l]."""
    qs = qs.astype(np.int64).reshape(len(qs), 2, 1, 32)
    return ((qs >> (2 * np.arange(4))[None, None, :, None]) & 3).reshape(len(qs), 256)


def _k_unpack_scales(s):
    s = s.astype(np.int64)
    sc = np.concatenate([s[:, 0:4] & 63, (s[:, 8:12] & 15) | ((s[:, 0:4] >> 6) << 4)], axis=1)
    m = np.concatenate([s[:, 4:8] & 63, (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)], axis=1)
    return sc.astype(F32), m.astype(F32)


# ggml's kvalues_mxfp4: twice the E2M1 values (d below is half the block's E8M0 scale)
KVALUES_MXFP4 = (0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12)


def e8m0_half(e):
    """ggml_e8m0_to_fp32_half: 2^(e - 128) for every byte e (e < 2 through the denormal bit patterns), exact."""
    return np.ldexp(np.ones(np.shape(e), dtype=F32), np.asarray(e, dtype=np.int32) - 128).astype(F32)


def decode(tname, raw):
    if tname == "F32":
        return np.frombuffer(raw, dtype="<f4").astype(F32)
    if tname == "F16":
        return np.frombuffer(raw, dtype="<f2").astype(F32)
    if tname == "BF16":
        return (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(F32)
    b = _blocks(raw, tname)
    nb = len(b)
    if tname == "Q8_0":
        y = b[:, 2:34].view(np.int8).astype(F32) * _half(b[:, 0:2])
    elif tname == "Q4_0":
        y = (_unnibble(b[:, 2:18]) - 8).astype(F32) * _half(b[:, 0:2])
    elif tname == "Q4_1":
        y = _unnibble(b[:, 4:20]).astype(F32) * _half(b[:, 0:2]) + _half(b[:, 2:4])
    elif tname == "Q5_0":
        q = _unnibble(b[:, 6:22]) | (_bits_u32(b[:, 2:6]) << 4)
        y = (q - 16).astype(F32) * _half(b[:, 0:2])
    elif tname == "Q5_1":
        q = _unnibble(b[:, 8:24]) | (_bits_u32(b[:, 4:8]) << 4)
        y = q.astype(F32) * _half(b[:, 0:2]) + _half(b[:, 2:4])
    elif tname == "Q2_K":
        sc = b[:, 0:16].astype(np.int64)
        L = _uncrumb_128(b[:, 16:80]).reshape(nb, 16, 16).astype(F32)
        d, dmin = _half(b[:, 80:82]), _half(b[:, 82:84])
        y = (d * (sc & 15).astype(F32))[:, :, None] * L - (dmin * (sc >> 4).astype(F32))[:, :, None]
    elif tname == "Q3_K":
        hm = b[:, 0:32].astype(np.int64)
        low = _uncrumb_128(b[:, 32:96])  # [nb, 256]
        high = (hm[:, None, :] >> np.arange(8)[None, :, None]) & 1  # [nb, 8, 32]: bit e // 32 of hmask[e % 32]
        q = (low - 4 * (1 - high.reshape(nb, 256))).reshape(nb, 16, 16).astype(F32)
        s = b[:, 96:108].astype(np.int64)
        j = np.arange(16)
        low4 = np.concatenate([s[:, 0:8] & 15, s[:, 0:8] >> 4], axis=1)
        high2 = (s[:, 8 + j % 4] >> (2 * (j // 4))) & 3
        sc = ((low4 | (high2 << 4)) - 32).astype(F32)
        y = (_half(b[:, 108:110]) * sc)[:, :, None] * q
    elif tname in ("Q4_K", "Q5_K"):
        d, dmin = _half(b[:, 0:2]), _half(b[:, 2:4])
        sc, m = _k_unpack_scales(b[:, 4:16])
        qs = b[:, 16:144] if tname == "Q4_K" else b[:, 48:176]
        qs = qs.reshape(nb, 4, 1, 32).astype(np.int64)
        L = np.concatenate([qs & 15, qs >> 4], axis=2).reshape(nb, 8, 32)  # sub-block 2c + h
        if tname == "Q5_K":
            qh = b[:, 16:48].astype(np.int64)[:, None, :]  # [nb, 1, 32]
            L = L + 16 * ((qh >> np.arange(8)[None, :, None]) & 1)
        y = (d * sc)[:, :, None] * L.astype(F32) - (dmin * m)[:, :, None]
    elif tname == "Q6_K":
        ql, qh = b[:, 0:128].astype(np.int64), b[:, 128:192].astype(np.int64)
        sc = b[:, 192:208].view(np.int8).astype(F32)
        d = _half(b[:, 208:210])
        halves = []
        for n in range(2):
            lo, hi, h = ql[:, 64 * n:64 * n + 32], ql[:, 64 * n + 32:64 * n + 64], qh[:, 32 * n:32 * n + 32]
            halves += [(lo & 15) | ((h & 3) << 4), (hi & 15) | (((h >> 2) & 3) << 4),
                       (lo >> 4) | (((h >> 4) & 3) << 4), (hi >> 4) | (((h >> 6) & 3) << 4)]
        q = (np.concatenate(halves, axis=1) - 32).astype(F32).reshape(nb, 16, 16)
        y = (d * sc)[:, :, None] * q
    elif tname == "MXFP4":
        q = _unnibble(b[:, 1:17])
        y = np.array(KVALUES_MXFP4, dtype=F32)[q] * e8m0_half(b[:, 0])[:, None]
    else:
        raise ValueError(tname)
    return np.ascontiguousarray(y, dtype=F32).reshape(-1)


# ---------------------------------------------------------------------------------------------------------------------
# Element-by-element decoders, transcribed from ggml-quants.c dequantize_row_* (share nothing with the above).
# Every operation is rounded to f32 as C's float arithmetic does.

_F = struct.Struct("<f")


def f32(v):
    return _F.unpack(_F.pack(v))[0]


def half_at(raw, off):
    return struct.unpack_from("<e", raw, off)[0]


def loop_q4_0(raw, k):
    y = [0.0] * k
    for i in range(k // 32):
        base = i * 18
        d = half_at(raw, base)
        for j in range(16):
            byte = raw[base + 2 + j]
            y[i * 32 + j] = f32(((byte & 0x0F) - 8) * d)
            y[i * 32 + j + 16] = f32(((byte >> 4) - 8) * d)
    return y


def loop_q4_1(raw, k):
    y = [0.0] * k
    for i in range(k // 32):
        base = i * 20
        d, m = half_at(raw, base), half_at(raw, base + 2)
        for j in range(16):
            byte = raw[base + 4 + j]
            y[i * 32 + j] = f32(f32((byte & 0x0F) * d) + m)
            y[i * 32 + j + 16] = f32(f32((byte >> 4) * d) + m)
    return y


def loop_q5_0(raw, k):
    y = [0.0] * k
    for i in range(k // 32):
        base = i * 22
        d = half_at(raw, base)
        qh = struct.unpack_from("<I", raw, base + 2)[0]
        for j in range(16):
            xh_0 = ((qh >> (j + 0)) << 4) & 0x10
            xh_1 = (qh >> (j + 12)) & 0x10
            byte = raw[base + 6 + j]
            y[i * 32 + j] = f32((((byte & 0x0F) | xh_0) - 16) * d)
            y[i * 32 + j + 16] = f32((((byte >> 4) | xh_1) - 16) * d)
    return y


def loop_q5_1(raw, k):
    y = [0.0] * k
    for i in range(k // 32):
        base = i * 24
        d, m = half_at(raw, base), half_at(raw, base + 2)
        qh = struct.unpack_from("<I", raw, base + 4)[0]
        for j in range(16):
            xh_0 = ((qh >> (j + 0)) << 4) & 0x10
            xh_1 = (qh >> (j + 12)) & 0x10
            byte = raw[base + 8 + j]
            y[i * 32 + j] = f32(f32(((byte & 0x0F) | xh_0) * d) + m)
            y[i * 32 + j + 16] = f32(f32(((byte >> 4) | xh_1) * d) + m)
    return y


def loop_q8_0(raw, k):
    y = [0.0] * k
    for i in range(k // 32):
        base = i * 34
        d = half_at(raw, base)
        for j in range(32):
            q = raw[base + 2 + j]
            y[i * 32 + j] = f32((q - 256 if q > 127 else q) * d)
    return y


def get_scale_min_k4(j, raw, q):
    if j < 4:
        return raw[q + j] & 63, raw[q + j + 4] & 63
    return (raw[q + j + 4] & 0xF) | ((raw[q + j - 4] >> 6) << 4), (raw[q + j + 4] >> 4) | ((raw[q + j] >> 6) << 4)


def loop_q2_k(raw, k):
    y, yi = [0.0] * k, 0
    for i in range(k // 256):
        base = i * 84
        d, mn = half_at(raw, base + 80), half_at(raw, base + 82)
        q, is_ = base + 16, 0
        for _ in range(0, 256, 128):
            shift = 0
            for _ in range(4):
                sc = raw[base + is_]
                is_ += 1
                dl, ml = f32(d * (sc & 0xF)), f32(mn * (sc >> 4))
                for l in range(16):
                    y[yi] = f32(f32(dl * ((raw[q + l] >> shift) & 3)) - ml)
                    yi += 1
                sc = raw[base + is_]
                is_ += 1
                dl, ml = f32(d * (sc & 0xF)), f32(mn * (sc >> 4))
                for l in range(16):
                    y[yi] = f32(f32(dl * ((raw[q + l + 16] >> shift) & 3)) - ml)
                    yi += 1
                shift += 2
            q += 32
    return y


def loop_q3_k(raw, k):
    kmask1, kmask2 = 0x03030303, 0x0F0F0F0F
    y, yi = [0.0] * k, 0
    for i in range(k // 256):
        base = i * 110
        d_all = half_at(raw, base + 108)
        q, hm, m = base + 32, base, 1
        aux = list(struct.unpack_from("<3I", raw, base + 96)) + [0]
        tmp = aux[2]
        aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4)
        aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4)
        aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4)
        aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4)
        scales = struct.unpack("<16b", struct.pack("<4I", *aux))
        is_ = 0
        for _ in range(0, 256, 128):
            shift = 0
            for _ in range(4):
                dl = f32(d_all * (scales[is_] - 32))
                is_ += 1
                for l in range(16):
                    y[yi] = f32(dl * (((raw[q + l] >> shift) & 3) - (0 if raw[hm + l] & m else 4)))
                    yi += 1
                dl = f32(d_all * (scales[is_] - 32))
                is_ += 1
                for l in range(16):
                    y[yi] = f32(dl * (((raw[q + l + 16] >> shift) & 3) - (0 if raw[hm + l + 16] & m else 4)))
                    yi += 1
                shift += 2
                m <<= 1
            q += 32
    return y


def loop_q4_k(raw, k):
    y, yi = [0.0] * k, 0
    for i in range(k // 256):
        base = i * 144
        d, mn = half_at(raw, base), half_at(raw, base + 2)
        q, is_ = base + 16, 0
        for _ in range(0, 256, 64):
            sc, m = get_scale_min_k4(is_ + 0, raw, base + 4)
            d1, m1 = f32(d * sc), f32(mn * m)
            sc, m = get_scale_min_k4(is_ + 1, raw, base + 4)
            d2, m2 = f32(d * sc), f32(mn * m)
            for l in range(32):
                y[yi] = f32(f32(d1 * (raw[q + l] & 0xF)) - m1)
                yi += 1
            for l in range(32):
                y[yi] = f32(f32(d2 * (raw[q + l] >> 4)) - m2)
                yi += 1
            q += 32
            is_ += 2
    return y


def loop_q5_k(raw, k):
    y, yi = [0.0] * k, 0
    for i in range(k // 256):
        base = i * 176
        d, mn = half_at(raw, base), half_at(raw, base + 2)
        ql, qh, is_, u1, u2 = base + 48, base + 16, 0, 1, 2
        for _ in range(0, 256, 64):
            sc, m = get_scale_min_k4(is_ + 0, raw, base + 4)
            d1, m1 = f32(d * sc), f32(mn * m)
            sc, m = get_scale_min_k4(is_ + 1, raw, base + 4)
            d2, m2 = f32(d * sc), f32(mn * m)
            for l in range(32):
                y[yi] = f32(f32(d1 * ((raw[ql + l] & 0xF) + (16 if raw[qh + l] & u1 else 0))) - m1)
                yi += 1
            for l in range(32):
                y[yi] = f32(f32(d2 * ((raw[ql + l] >> 4) + (16 if raw[qh + l] & u2 else 0))) - m2)
                yi += 1
            ql += 32
            is_ += 2
            u1 <<= 2
            u2 <<= 2
    return y


def loop_q6_k(raw, k):
    y = [0.0] * k
    for i in range(k // 256):
        base = i * 210
        d = half_at(raw, base + 208)
        ql, qh, sc, yo = base, base + 128, base + 192, i * 256
        for _ in range(0, 256, 128):
            for l in range(32):
                is_ = l // 16
                q1 = ((raw[ql + l] & 0xF) | (((raw[qh + l] >> 0) & 3) << 4)) - 32
                q2 = ((raw[ql + l + 32] & 0xF) | (((raw[qh + l] >> 2) & 3) << 4)) - 32
                q3 = ((raw[ql + l] >> 4) | (((raw[qh + l] >> 4) & 3) << 4)) - 32
                q4 = ((raw[ql + l + 32] >> 4) | (((raw[qh + l] >> 6) & 3) << 4)) - 32
                s = [struct.unpack_from("<b", raw, sc + is_ + 2 * t)[0] for t in range(4)]
                y[yo + l + 0] = f32(f32(d * s[0]) * q1)
                y[yo + l + 32] = f32(f32(d * s[1]) * q2)
                y[yo + l + 64] = f32(f32(d * s[2]) * q3)
                y[yo + l + 96] = f32(f32(d * s[3]) * q4)
            yo += 128
            ql += 64
            qh += 32
            sc += 8
    return y


def loop_mxfp4(raw, k):
    y = [0.0] * k
    for i in range(k // 32):
        base = i * 17
        e = raw[base]
        d = _F.unpack(struct.pack("<I", 0x00200000 << e if e < 2 else (e - 1) << 23))[0]
        for j in range(16):
            byte = raw[base + 1 + j]
            y[i * 32 + j] = f32(KVALUES_MXFP4[byte & 0x0F] * d)
            y[i * 32 + j + 16] = f32(KVALUES_MXFP4[byte >> 4] * d)
    return y


def loop_f16(raw, k):
    return [half_at(raw, 2 * i) for i in range(k)]


def loop_bf16(raw, k):
    return [_F.unpack(struct.pack("<I", struct.unpack_from("<H", raw, 2 * i)[0] << 16))[0] for i in range(k)]


def loop_f32(raw, k):
    return [struct.unpack_from("<f", raw, 4 * i)[0] for i in range(k)]


LOOPS = {"F32": loop_f32, "F16": loop_f16, "BF16": loop_bf16, "Q4_0": loop_q4_0, "Q4_1": loop_q4_1,
         "Q5_0": loop_q5_0, "Q5_1": loop_q5_1, "Q8_0": loop_q8_0, "Q2_K": loop_q2_k, "Q3_K": loop_q3_k,
         "Q4_K": loop_q4_k, "Q5_K": loop_q5_k, "Q6_K": loop_q6_k, "MXFP4": loop_mxfp4}


def decode_checked(tname, raw, n):
    """Both decoders; they must agree bit for bit."""
    y = decode(tname, raw)
    assert y.size == n, (tname, y.size, n)
    ref = np.array(LOOPS[tname](raw, n), dtype=np.float64).astype(F32)
    assert np.array_equal(y.view(np.uint32), ref.view(np.uint32)), f"{tname}: vectorised and loop decoders differ"
    return y


# ---------------------------------------------------------------------------------------------------------------------
# Self-check

MAX_REL_RMSE = {"F32": 0.0, "F16": 1e-3, "BF16": 5e-3, "Q8_0": 0.015, "Q6_K": 0.04, "Q5_0": 0.08, "Q5_1": 0.08,
                "Q5_K": 0.08, "Q4_0": 0.15, "Q4_1": 0.15, "Q4_K": 0.15, "Q3_K": 0.18,
                "Q2_K": 0.36}  # a wrong layout gives about 1.4


def self_check():
    rng = np.random.RandomState(1234)
    w = (rng.standard_normal((8, 512)) * 0.05).astype(F32)
    w[1, 32:64] = 0.25  # a constant block
    w[2, 0:256] = 0.0  # an all-zero super-block
    w[3, 256:512] = np.abs(w[3, 256:512]) + 0.01  # an all-positive super-block
    w[4, :] *= 40  # a large row
    w[5, 100] = -3.0  # an outlier
    for tname in [t for t in TYPES if t != "MXFP4"]:  # MXFP4 is only repacked, never encoded (mxfp4_self_check)
        raw = encode(tname, w)
        assert len(raw) == w.size // TYPES[tname][1] * TYPES[tname][2], tname
        y = decode_checked(tname, raw, w.size).reshape(w.shape)
        rel_rows = np.sqrt(np.mean((y - w) ** 2, axis=1) / np.maximum(np.mean(w ** 2, axis=1), 1e-30))
        rel = float(np.delete(rel_rows, 5).max())  # row 5's outlier zeroes its block's small values in any 32-block
        assert rel <= MAX_REL_RMSE[tname] + 1e-12 and rel_rows[5] < max(0.2, MAX_REL_RMSE[tname]), \
            (tname, rel, rel_rows[5])
        assert abs(float(y[5, 100]) + 3.0) < 0.02, (tname, y[5, 100])
        assert np.array_equal(y[2, 0:256], np.zeros(256, F32)), tname
        print(f"self-check {tname:5s}: relative RMSE {rel:.4f}")
        assert encode(tname, w) == raw, f"{tname} encoder is not deterministic"
    # Known bytes, laid out by hand from ggml-common.h, for one block of each K type.
    q4k = bytearray(144)
    q4k[0:2] = np.float16(0.5).tobytes()
    q4k[2:4] = np.float16(0.25).tobytes()
    q4k[4] = 2 | (1 << 6)  # sc0 = 2; bits 6-7 = high bits of sc4
    q4k[8] = 3  # m0 = 3
    q4k[12] = 5 | (6 << 4)  # sc4 low 4 = 5, m4 low 4 = 6 -> sc4 = 5 + 16 = 21, m4 = 6
    q4k[16] = 7 | (9 << 4)  # element 0 -> 7 (sub-block 0), element 32 -> 9 (sub-block 1)
    q4k[16 + 64] = 4  # element 128 (sub-block 4) -> 4
    y = decode_checked("Q4_K", bytes(q4k), 256)
    assert y[0] == 0.5 * 2 * 7 - 0.25 * 3 and y[32] == 0.0 and y[128] == 0.5 * 21 * 4 - 0.25 * 6, y[[0, 32, 128]]
    q6k = bytearray(210)
    q6k[208:210] = np.float16(0.5).tobytes()
    q6k[192 + 0] = 3
    q6k[192 + 2] = (-2) & 0xFF  # scale of elements 32..47
    q6k[192 + 6] = 4  # scale of elements 96..111
    q6k[0] = 0x5 | (0xA << 4)  # element 0 low nibble 5, element 64 low nibble 10
    q6k[32] = 0x1  # element 32 low nibble 1
    q6k[128] = 2 | (3 << 2) | (1 << 6)  # element 0 high 2, element 32 high 3, element 96 high 1
    y = decode_checked("Q6_K", bytes(q6k), 256)
    assert y[0] == 0.5 * 3 * ((5 | 2 << 4) - 32) and y[32] == 0.5 * -2 * ((1 | 3 << 4) - 32), y[[0, 32]]
    assert y[96] == 0.5 * 4 * ((0 | 1 << 4) - 32), y[96]
    q2k = bytearray(84)
    q2k[80:82] = np.float16(0.5).tobytes()  # d
    q2k[82:84] = np.float16(0.25).tobytes()  # dmin
    q2k[0] = 3 | (2 << 4)  # elements 0..15: scale 3, min 2
    q2k[1] = 4  # elements 16..31: scale 4, min 0
    q2k[2] = 1  # elements 32..47: scale 1
    q2k[6] = 2 | (4 << 4)  # elements 96..111
    q2k[9] = 1 | (1 << 4)  # elements 144..159
    q2k[16 + 0] = 2 | (1 << 2) | (3 << 6)  # element 0 -> 2, element 32 -> 1, element 96 -> 3 (element 64 -> 0)
    q2k[16 + 16] = 3  # element 16 -> 3
    q2k[16 + 48] = 2  # element 144 (128 + 16: qs[32 + 16], bits 0-1) -> 2
    y = decode_checked("Q2_K", bytes(q2k), 256)
    assert (y[0], y[1], y[16], y[32], y[96], y[144]) == (0.5 * 3 * 2 - 0.25 * 2, -0.25 * 2, 0.5 * 4 * 3, 0.5 * 1 * 1,
                                                         0.5 * 2 * 3 - 0.25 * 4, 0.5 * 1 * 2 - 0.25 * 1), y
    q3k = bytearray(110)
    q3k[108:110] = np.float16(0.5).tobytes()  # d
    # stored scale u = sc + 32: low nibble of byte j % 8 (nibble j // 8), high 2 bits at 2 (j // 4) of byte 8 + j % 4
    q3k[96 + 0] = (32 + 3) & 15  # scale 0 = 3
    q3k[96 + 8] = (32 + 3) >> 4
    q3k[96 + 1] = ((32 - 5) & 15) << 4  # scale 9 = -5
    q3k[96 + 9] = ((32 - 5) >> 4) << 4
    q3k[96 + 7] = ((32 + 7) & 15) << 4  # scale 15 = 7
    q3k[96 + 11] = ((32 + 7) >> 4) << 6
    q3k[32 + 0] = 1  # element 0: low bits 1
    q3k[0] |= 1  # element 0: high bit set -> q = 1 (element 1: low 0, high clear -> q = -4)
    q3k[32 + 48] = 2  # element 144 (qs[32 + 16] bits 0-1) -> 2
    q3k[16] |= 1 << 4  # element 144's high bit: bit 144 // 32 = 4 of hmask[144 % 32] -> q = 2
    q3k[32 + 63] = 3 << 6  # element 255 (qs[32 + 31] bits 6-7), high bit (bit 7 of hmask[31]) clear -> q = -1
    y = decode_checked("Q3_K", bytes(q3k), 256)
    assert (y[0], y[1], y[144], y[255]) == (0.5 * 3 * 1, 0.5 * 3 * -4, 0.5 * -5 * 2, 0.5 * 7 * -1), y[[0, 1, 144, 255]]
    # Random bytes (every bit pattern of scales / quants, finite halves): both decoders must still agree.
    rng = np.random.RandomState(1011)
    for tname, halves in (("Q2_K", (80, 82)), ("Q3_K", (108,))):
        blocks = rng.randint(0, 256, size=(6, TYPES[tname][2])).astype(np.uint8)
        for off in halves:
            blocks[:, off:off + 2] = f16_bytes(rng.uniform(-1, 1, size=6).astype(F32))
        decode_checked(tname, blocks.tobytes(), 6 * 256)
    mxfp4_self_check()


def mxfp4_self_check():
    """MXFP4 is only repacked (GptOssModel.repack_mxfp4), never encoded: random HF blocks and scales (e = 0 and 1 take
    ggml's denormal branch) repacked and decoded by both decoders must give transformers' values (+0.0 for HF's
    -0.0); a hand-made block checks the nibble order."""
    rng = np.random.RandomState(39)
    blocks = rng.randint(0, 256, size=(2, 3, 4, 16)).astype(np.uint8)
    scales = rng.randint(100, 150, size=(2, 3, 4)).astype(np.uint8)
    scales.flat[:6] = [0, 1, 2, 127, 128, 250]  # 2^(e - 128) * 12 stays finite up to e = 253
    raw = mxfp4_repack(blocks, scales)
    assert raw.shape == (2, 3, 4 * 17)
    y = decode_checked("MXFP4", raw.tobytes(), blocks.size * 2).reshape(2, 3, -1)
    ref = hf_mxfp4_dequant(blocks, scales)
    assert np.array_equal(y, ref) and not np.any(np.signbit(y) & (y == 0)), "MXFP4 repack / decode"
    block = bytearray(17)
    block[0] = 128  # d = 2^0: y = kvalues
    block[1] = 0x5 | (0xA << 4)  # element 0 -> kvalues[5] = 6, element 16 -> kvalues[10] = -2
    block[16] = 0x7 | (0xF << 4)  # element 15 -> 12, element 31 -> -12
    y = decode_checked("MXFP4", bytes(block), 32)
    assert (y[0], y[16], y[15], y[31], y[1]) == (6.0, -2.0, 12.0, -12.0, 0.0), y
    hf = np.zeros((1, 1, 1, 16), dtype=np.uint8)
    hf[..., 0], hf[..., 8] = 0x5 | (0x3 << 4), 0x7  # HF elements 0, 1 and 16
    q = mxfp4_repack(hf, np.array([[[127]]], dtype=np.uint8)).reshape(17)
    assert q[0] == 127 and q[1] == 0x5 | (0x7 << 4) and q[2] == 0x3, q  # ggml: 0 and 16 share qs[0], 1 is qs[1]
    print("self-check MXFP4: repack + decode == transformers' dequantization")


# ---------------------------------------------------------------------------------------------------------------------
# HF -> GGUF names, convert's transforms

LAYER_NAMES = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
               "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
               "self_attn.k_norm": "attn_k_norm", "post_attention_layernorm": "ffn_norm",
               "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
               "mlp.gate": "ffn_gate_inp"}
TOP_NAMES = {"model.embed_tokens": "token_embd", "lm_head": "output", "model.norm": "output_norm"}
EXPERT_PROJ = {"gate_proj": "ffn_gate_exps", "up_proj": "ffn_up_exps", "down_proj": "ffn_down_exps"}


def gguf_name(hf):
    assert hf.endswith(".weight"), hf
    module = hf[:-len(".weight")]
    if module in TOP_NAMES:
        return TOP_NAMES[module] + ".weight"
    parts = module.split(".")
    assert parts[:2] == ["model", "layers"], hf
    return f"blk.{parts[2]}.{LAYER_NAMES['.'.join(parts[3:])]}.weight"


HF_TOP = {v: k for k, v in TOP_NAMES.items()}
HF_LAYER = {v: k for k, v in LAYER_NAMES.items()}
HF_EXPERT = {v: k for k, v in EXPERT_PROJ.items()}


def hf_name(gg):
    module = gg[:-len(".weight")]
    if module in HF_TOP:
        return HF_TOP[module] + ".weight"
    _, layer, role = module.split(".")
    return f"model.layers.{layer}.{HF_LAYER[role]}.weight"


def llama_permute(w, n_head):
    """convert_hf_to_gguf LlamaModel.permute (n_head already n_head_kv for k)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama_unpermute(w, n_head):
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama3_rope_freqs(config):
    """convert's LlamaModel.generate_extra_tensors, step by step in float32 (see the docstring for old_ctx)."""
    rp = config["rope_parameters"]
    base = F32(rp.get("rope_theta", 10000.0))
    dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    freqs = (F32(1.0) / np.power(base, (np.arange(0, dim, 2, dtype=F32) / F32(dim)).astype(F32))).astype(F32)
    factor = float(rp.get("factor", 8.0))
    low, high = float(rp.get("low_freq_factor", 1.0)), float(rp.get("high_freq_factor", 4.0))
    old_ctx = float(rp["original_max_position_embeddings"])
    low_wavelen, high_wavelen = old_ctx / low, old_ctx / high
    out = []
    for freq in freqs:
        wavelen = F32(F32(2 * math.pi) / freq)
        if wavelen < F32(high_wavelen):
            out.append(F32(1.0))
        elif wavelen > F32(low_wavelen):
            out.append(F32(factor))
        else:
            smooth = F32(F32(F32(F32(old_ctx) / wavelen) - F32(low)) / F32(high - low))
            out.append(F32(F32(1.0) / F32(F32(F32(F32(1.0) - smooth) / F32(factor)) + smooth)))
    return np.array(out, dtype=F32)


def convert_tensors(config, weights):
    """HF f32 tensors (file order) -> [(gguf name, f32 array in HF axis order)] in convert_hf_to_gguf's order."""
    arch = config["model_type"]
    out = []
    if arch == "llama" and config.get("rope_parameters", {}).get("rope_type") == "llama3":
        out.append(("rope_freqs.weight", llama3_rope_freqs(config)))
    n_experts = config.get("num_local_experts", config.get("num_experts"))
    experts = {}
    for name, w in weights.items():
        if name == "lm_head.weight" and config.get("tie_word_embeddings"):
            continue  # never in a tied checkpoint; convert would not write it either
        if ".mlp.experts." in name:
            parts = name.split(".")
            layer = int(parts[2])
            experts.setdefault(layer, {})[(int(parts[5]), parts[6])] = w
            if len(experts[layer]) == 3 * n_experts:
                for proj in ("down_proj", "gate_proj", "up_proj"):
                    stack = np.stack([experts[layer][(e, proj)] for e in range(n_experts)])
                    out.append((f"blk.{layer}.{EXPERT_PROJ[proj]}.weight", stack))
                del experts[layer]
            continue
        if arch == "llama" and name.endswith(("q_proj.weight", "k_proj.weight")):
            heads = config["num_attention_heads"] if "q_proj" in name else config["num_key_value_heads"]
            w = llama_permute(w, heads)
        out.append((gguf_name(name), np.ascontiguousarray(w, dtype=F32)))
    assert not experts, "unprocessed experts"
    return out


def quantize_order(names):
    """llama_model_loader's weights_map order (weight_name_comparer)."""
    def key(n):
        layer = int(n.split(".")[1]) if n.startswith("blk.") else -1
        return (layer, n.encode())
    return sorted(names, key=key)


def twin_tensors(config, gguf_tensors):
    """GGUF name -> decoded f32 in GGUF ne (reversed) shape  ==>  HF name -> f32 in the source's shape."""
    arch = config["model_type"]
    twin = {}
    for name, w in gguf_tensors.items():
        if name == "rope_freqs.weight":
            continue
        role = name.split(".")[-2]
        if role in EXPERT_PROJ.values():
            layer = name.split(".")[1]
            proj = HF_EXPERT[role]
            for e in range(w.shape[0]):
                twin[f"model.layers.{layer}.mlp.experts.{e}.{proj}.weight"] = np.ascontiguousarray(w[e])
            continue
        hf = hf_name(name)
        if arch == "llama" and role in ("attn_q", "attn_k"):
            w = llama_unpermute(w, config["num_attention_heads"] if role == "attn_q" else config["num_key_value_heads"])
        twin[hf] = np.ascontiguousarray(w, dtype=F32)
    return twin


# ---------------------------------------------------------------------------------------------------------------------
# Metadata

ARCH = {"qwen3": "qwen3", "llama": "llama", "qwen3_moe": "qwen3moe"}


def model_kvs(config, name, file_type, quantized_by_llama_quantize):
    arch = ARCH[config["model_type"]]
    rp = config.get("rope_parameters") or {}
    kvs = [("general.architecture", STRING, arch), ("general.alignment", U32, ALIGNMENT),
           ("general.type", STRING, "model"), ("general.name", STRING, name),
           (f"{arch}.block_count", U32, config["num_hidden_layers"]),
           (f"{arch}.context_length", U32, config["max_position_embeddings"]),
           (f"{arch}.embedding_length", U32, config["hidden_size"]),
           (f"{arch}.feed_forward_length", U32, config["intermediate_size"]),
           (f"{arch}.attention.head_count", U32, config["num_attention_heads"]),
           (f"{arch}.attention.head_count_kv", U32, config["num_key_value_heads"]),
           (f"{arch}.rope.freq_base", FLOAT32, rp["rope_theta"]),
           (f"{arch}.attention.layer_norm_rms_epsilon", FLOAT32, config["rms_norm_eps"])]
    n_experts = config.get("num_local_experts", config.get("num_experts"))
    if n_experts is not None:
        kvs += [(f"{arch}.expert_count", U32, n_experts),
                (f"{arch}.expert_used_count", U32, config["num_experts_per_tok"])]
    if config.get("head_dim") is not None:
        kvs += [(f"{arch}.attention.key_length", U32, config["head_dim"]),
                (f"{arch}.attention.value_length", U32, config["head_dim"])]
    kvs.append(("general.file_type", U32, file_type))
    if arch == "llama":
        kvs += [("llama.vocab_size", U32, config["vocab_size"]),
                ("llama.rope.dimension_count", U32,
                 config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"])]
    if arch == "qwen3moe" and config.get("moe_intermediate_size") is not None:
        kvs.append(("qwen3moe.expert_feed_forward_length", U32, config["moe_intermediate_size"]))
    kvs.append(("general.quantization_version", U32, QUANT_VERSION))
    if quantized_by_llama_quantize:  # gguf_set_val_u32 removes then appends
        kvs = [kv for kv in kvs if kv[0] not in ("general.quantization_version", "general.file_type")]
        kvs += [("general.quantization_version", U32, QUANT_VERSION), ("general.file_type", U32, file_type)]
    return kvs


def split_files(kvs, tensors, max_tensors):
    """gguf-split --split-max-tensors: [(kvs, tensors)] per shard."""
    chunks = [tensors[i:i + max_tensors] for i in range(0, len(tensors), max_tensors)]
    shards = []
    for i, chunk in enumerate(chunks):
        split_kvs = [("split.no", U16, i), ("split.tensors.count", I32, len(tensors)),
                     ("split.count", U16, len(chunks))]
        shards.append(((list(kvs) if i == 0 else []) + split_kvs, chunk))
    return shards


# ---------------------------------------------------------------------------------------------------------------------
# Fixtures

def role_of(name):
    return name.split(".")[-2] if name.startswith("blk.") else name.split(".")[0]


def layer_of(name):
    return int(name.split(".")[1]) if name.startswith("blk.") else None


def types_f32(name, w):
    return "F32"


def types_q8(name, w):
    return "F32" if w.ndim == 1 else "Q8_0"


def types_q4_mix(name, w):
    if w.ndim == 1:
        return "F32"
    role, layer = role_of(name), layer_of(name)
    if role == "attn_output" and layer == 2:
        return "F16"
    if role == "ffn_up" and layer == 1:
        return "BF16"
    return {"attn_q": "Q4_0", "attn_k": "Q4_0", "attn_v": "Q4_1", "attn_output": "Q5_0", "ffn_gate": "Q5_1",
            "ffn_up": "Q4_0", "ffn_down": "Q8_0", "token_embd": "Q4_0"}[role]


def types_k_dense(name, w):
    if w.ndim == 1:
        return "F32"
    role, layer = role_of(name), layer_of(name)
    if role == "ffn_down":
        return "Q5_K" if layer == 1 else "Q6_K"
    return {"attn_q": "Q4_K", "attn_k": "Q4_K", "attn_output": "Q4_K", "ffn_gate": "Q4_K", "ffn_up": "Q4_K",
            "attn_v": "Q6_K", "token_embd": "Q4_K"}[role]


def types_k23(name, w):
    """Q3_K_M-like: llama-quantize's Q3_K_M keeps attn_v / attn_output / (some) ffn_down wider; here one of each."""
    if w.ndim == 1:
        return "F32"
    role, layer = role_of(name), layer_of(name)
    if role == "ffn_down":
        return "Q5_K" if layer == 0 else "Q2_K"
    return {"attn_q": "Q3_K", "attn_k": "Q3_K", "ffn_gate": "Q3_K", "ffn_up": "Q3_K", "attn_v": "Q4_K",
            "attn_output": "Q4_K", "token_embd": "Q2_K"}[role]


def types_k_moe(name, w):
    if w.ndim == 1:
        return "F32"
    role = role_of(name)
    return {"attn_q": "Q4_K", "attn_k": "Q4_K", "attn_output": "Q4_K", "attn_v": "Q6_K", "ffn_gate_exps": "Q4_K",
            "ffn_up_exps": "Q4_K", "ffn_down_exps": "Q6_K", "ffn_gate_inp": "F32", "ffn_gate": "Q8_0",
            "ffn_up": "Q8_0", "ffn_down": "Q8_0", "token_embd": "Q8_0", "output": "Q6_K"}[role]


# Widened models for the K-quants (every K-quantized `in` a multiple of 256). "small" (the default) keeps every
# type / role combination the fixtures are meant to cover at the least size (the f32 twin dominates: 4 B a weight);
# "brief" is the first proposal (hidden 256, intermediate 512, 8 experts, 3 layers): about 6 MB and 21 MB.
K_MODELS = {
    "small": {"qwen3": {"intermediate_size": 256, "num_hidden_layers": 2},
              "qwen3_moe": {"intermediate_size": 128, "num_hidden_layers": 2, "num_local_experts": 4}},
    "brief": {"qwen3": {"intermediate_size": 512, "num_hidden_layers": 2},
              "qwen3_moe": {"intermediate_size": 512, "num_hidden_layers": 3, "num_local_experts": 8}},
}


def widened_config(root, src, dims):
    config = json.load(open(os.path.join(root, src, "config.json")))
    config.update({"hidden_size": 256, "head_dim": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
                   "vocab_size": 512})
    config.update(dims)
    if "layer_types" in config:
        config["layer_types"] = ["full_attention"] * config["num_hidden_layers"]
    if src == "qwen3_moe":
        config.update({"moe_intermediate_size": 256, "num_experts_per_tok": 2, "mlp_only_layers": [0]})
    return config


def random_model(config, seed):
    """Seeded f32 weights shaped like the committed fixtures' (projections ~ N(0, 1/in), norms ~ 1 + N(0, 0.2^2))."""
    rng = np.random.RandomState(seed)
    h, hd = config["hidden_size"], config["head_dim"]
    nh, nkv = config["num_attention_heads"], config["num_key_value_heads"]
    vocab = config["vocab_size"]
    shapes = {"model.embed_tokens.weight": (vocab, h), "model.norm.weight": (h,)}
    if not config.get("tie_word_embeddings"):
        shapes["lm_head.weight"] = (vocab, h)
    dense = set(config.get("mlp_only_layers", []))
    n_experts = config.get("num_local_experts", config.get("num_experts"))
    for n in range(config["num_hidden_layers"]):
        p = f"model.layers.{n}."
        shapes.update({p + "input_layernorm.weight": (h,), p + "post_attention_layernorm.weight": (h,),
                       p + "self_attn.q_proj.weight": (nh * hd, h), p + "self_attn.k_proj.weight": (nkv * hd, h),
                       p + "self_attn.v_proj.weight": (nkv * hd, h), p + "self_attn.o_proj.weight": (h, nh * hd),
                       p + "self_attn.q_norm.weight": (hd,), p + "self_attn.k_norm.weight": (hd,)})
        if n_experts is None or n in dense:
            ff = config["intermediate_size"]
            shapes.update({p + "mlp.gate_proj.weight": (ff, h), p + "mlp.up_proj.weight": (ff, h),
                           p + "mlp.down_proj.weight": (h, ff)})
        else:
            ff = config["moe_intermediate_size"]
            shapes[p + "mlp.gate.weight"] = (n_experts, h)
            for e in range(n_experts):
                shapes.update({p + f"mlp.experts.{e}.gate_proj.weight": (ff, h),
                               p + f"mlp.experts.{e}.up_proj.weight": (ff, h),
                               p + f"mlp.experts.{e}.down_proj.weight": (h, ff)})
    weights = {}
    for name in sorted(shapes):  # HF safetensors order
        shape = shapes[name]
        z = rng.standard_normal(shape)
        if len(shape) == 1:
            w = 1.0 + 0.2 * z
        elif name in ("model.embed_tokens.weight", "lm_head.weight"):
            w = 0.25 * z
        elif name.endswith("mlp.gate.weight"):
            w = 2.0 / math.sqrt(shape[1]) * z
        else:
            w = z / math.sqrt(shape[1])
        weights[name] = w.astype(F32)
    return weights


def write_fixture(root, out_name, config, config_src, gen_src, weights, choose_type, file_type, by_quantize,
                  split_max_tensors=None):
    folder = os.path.join(root, out_name)
    if os.path.exists(folder):
        shutil.rmtree(folder)
    os.makedirs(os.path.join(folder, "dequantized"))
    converted = convert_tensors(config, weights)
    by_name = dict(converted)
    order = quantize_order(by_name) if by_quantize else [n for n, _ in converted]
    tensors, decoded = [], {}
    for name in order:
        w = by_name[name]
        tname = choose_type(name, w)
        raw = encode(tname, w)
        tensors.append((name, list(reversed(w.shape)), tname, raw))
        decoded[name] = decode(tname, raw).reshape(w.shape)
    kvs = model_kvs(config, out_name, file_type, by_quantize)
    data = gguf_file(kvs, tensors)
    with open(os.path.join(folder, out_name + ".gguf"), "wb") as f:
        f.write(data)
    if split_max_tensors:
        shards = split_files(kvs, tensors, split_max_tensors)
        for i, (skvs, stensors) in enumerate(shards):
            path = os.path.join(folder, f"{out_name}-{i + 1:05d}-of-{len(shards):05d}.gguf")
            with open(path, "wb") as f:
                f.write(gguf_file(skvs, stensors))
    twin = twin_tensors(config, decoded)
    write_safetensors(os.path.join(folder, "dequantized", "model.safetensors"),
                      {k: ("F32", v) for k, v in twin.items()})
    if config_src:
        shutil.copy(config_src, os.path.join(folder, "dequantized", "config.json"))
    else:
        with open(os.path.join(folder, "dequantized", "config.json"), "w") as f:
            json.dump(config, f, indent=2)
            f.write("\n")
    shutil.copy(gen_src, os.path.join(folder, "dequantized", "generation_config.json"))
    return weights


def make_all(root, k_dims):
    sources = {}
    for src, out, types, ftype, by_quantize, split in (("qwen3", "qwen3_gguf_f32", types_f32, 0, False, None),
                                                        ("llama", "llama_gguf_q8", types_q8, 7, False, 16),
                                                        ("qwen3", "qwen3_gguf_q4", types_q4_mix, 2, True, None)):
        folder = os.path.join(root, src)
        config = json.load(open(os.path.join(folder, "config.json")))
        weights = read_safetensors(os.path.join(folder, "model.safetensors"))
        write_fixture(root, out, config, os.path.join(folder, "config.json"),
                      os.path.join(folder, "generation_config.json"), weights, types, ftype, by_quantize, split)
        sources[out] = (config, weights)
    for src, out, types, seed, ftype in (("qwen3", "qwen3_gguf_k", types_k_dense, 4096, 15),
                                         ("qwen3", "qwen3_gguf_k23", types_k23, 4096, 12),  # same model as above
                                         ("qwen3_moe", "qwen3_moe_gguf_k", types_k_moe, 4097, 15)):
        config = widened_config(root, src, K_MODELS[k_dims][src])
        weights = random_model(config, seed)
        write_fixture(root, out, config, None, os.path.join(root, src, "generation_config.json"), weights, types,
                      ftype, True)
        sources[out] = (config, weights)
    for src, out in HYBRID_FIXTURES:
        sources[out] = write_hybrid_fixture(root, out, src)
    return sources


# ---------------------------------------------------------------------------------------------------------------------
# gpt-oss (MXFP4 experts) and the gated-delta-net hybrids (qwen3next, qwen35, qwen35moe): convert's transforms and
# their inverses (the spec of every step is in the module docstring)

HYBRID_ARCH = {"gpt_oss": "gpt-oss", "qwen3_next": "qwen3next", "qwen3_5_text": "qwen35", "qwen3_5_moe": "qwen35moe"}
# (source folder, fixture): gpt_oss_gguf from the MXFP4 checkpoint, the others from the f32 fixtures
HYBRID_FIXTURES = (("gpt_oss_mxfp4", "gpt_oss_gguf"), ("qwen3_next", "qwen3_next_gguf"), ("qwen3_5", "qwen3_5_gguf"),
                   ("qwen3_5_moe", "qwen3_5_moe_gguf"))
HYBRID_FILE_TYPE = 7  # convert_hf_to_gguf.py --outtype q8_0 (MOSTLY_Q8_0; an MXFP4 source keeps it, not 38)

# HF module under model.layers.N -> GGUF role (".weight" / ".bias" carried over)
HYBRID_MODULES = {"input_layernorm": "attn_norm", "post_attention_layernorm": "post_attention_norm",
                  "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
                  "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
                  "self_attn.k_norm": "attn_k_norm", "mlp.router": "ffn_gate_inp", "mlp.gate": "ffn_gate_inp",
                  "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
                  "mlp.shared_expert.gate_proj": "ffn_gate_shexp", "mlp.shared_expert.up_proj": "ffn_up_shexp",
                  "mlp.shared_expert.down_proj": "ffn_down_shexp", "mlp.shared_expert_gate": "ffn_gate_inp_shexp",
                  "linear_attn.in_proj_qkv": "attn_qkv", "linear_attn.in_proj_z": "attn_gate",
                  "linear_attn.in_proj_a": "ssm_alpha", "linear_attn.in_proj_b": "ssm_beta",
                  "linear_attn.in_proj_ba": "ssm_ba", "linear_attn.conv1d": "ssm_conv1d",
                  "linear_attn.norm": "ssm_norm", "linear_attn.out_proj": "ssm_out"}
# HF parameters without a ".weight" / ".bias" suffix -> full GGUF name tail
HYBRID_PARAMS = {"self_attn.sinks": "attn_sinks.weight", "linear_attn.A_log": "ssm_a",
                 "linear_attn.dt_bias": "ssm_dt.bias"}
HYBRID_ROLE = {role: module for module, role in HYBRID_MODULES.items() if module != "mlp.router"}  # gpt-oss's
HYBRID_PARAM = {v: k for k, v in HYBRID_PARAMS.items()}
PLUS_ONE_ROLES = ("attn_norm", "post_attention_norm", "attn_q_norm", "attn_k_norm")  # and output_norm
CONVERT_F32_ROLES = ("ffn_gate_inp", "ffn_gate_inp_shexp", "ssm_conv1d")


def read_safetensors_any(path):
    """name -> array, header order: F32 as is, BF16 widened to f32 (exact), U8 as uint8."""
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        begin, end = meta["data_offsets"]
        raw = data[8 + n + begin:8 + n + end]
        if meta["dtype"] == "F32":
            a = np.frombuffer(raw, dtype="<f4").astype(F32)
        elif meta["dtype"] == "BF16":
            a = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(F32)
        elif meta["dtype"] == "U8":
            a = np.frombuffer(raw, dtype=np.uint8)
        else:
            raise ValueError((name, meta["dtype"]))
        out[name] = a.reshape(meta["shape"])
    return out


def hparams_of(config):
    """convert's TextModel.__init__: text_config merged over the top level."""
    hp = dict(config)
    hp.update(config.get("text_config") or {})
    return hp


def hf_prefix(config):
    return "model.language_model." if "text_config" in config else "model."


def full_attention_interval(hp):
    """The n with layer i full attention iff (i + 1) % n == 0 (llama.cpp's rule), from HF layer_types."""
    types = hp["layer_types"]
    for n in range(1, len(types) + 1):
        if all((t == "full_attention") == ((i + 1) % n == 0) for i, t in enumerate(types)):
            return n
    raise ValueError(f"layer_types {types} follow no full_attention_interval")


def hybrid_gguf_name(hf):
    """HF name (language_model. already stripped) -> GGUF name."""
    for suffix in (".weight", ".bias"):
        if hf.endswith(suffix) and hf[:-len(suffix)] in TOP_NAMES:
            return TOP_NAMES[hf[:-len(suffix)]] + suffix
    parts = hf.split(".")
    assert parts[:2] == ["model", "layers"], hf
    rest = ".".join(parts[3:])
    if rest in HYBRID_PARAMS:
        return f"blk.{parts[2]}.{HYBRID_PARAMS[rest]}"
    module, param = rest.rsplit(".", 1)
    assert param in ("weight", "bias"), hf
    return f"blk.{parts[2]}.{HYBRID_MODULES[module]}.{param}"


def hybrid_hf_name(gg, arch, prefix):
    """GGUF name -> the source's HF name (prefix "model." or "model.language_model.")."""
    top, _, suffix = gg.rpartition(".")
    if not gg.startswith("blk."):
        module = HF_TOP[top]
        return (module if module == "lm_head" else prefix + module[len("model."):]) + "." + suffix
    _, layer, tail = gg.split(".", 2)
    if tail in HYBRID_PARAM:
        return f"{prefix}layers.{layer}.{HYBRID_PARAM[tail]}"
    role, suffix = tail.split(".")
    module = "mlp.router" if role == "ffn_gate_inp" and arch == "gpt-oss" else HYBRID_ROLE[role]  # else mlp.gate
    return f"{prefix}layers.{layer}.{module}.{suffix}"


def neg_exp(a_log):
    """convert's -torch.exp(A_log), here computed in float64 and rounded once to f32 (torch's float32 exp is within
    an ulp of it; the f64 route is the same on every machine)."""
    return np.array([-math.exp(float(v)) for v in np.ravel(a_log)], dtype=np.float64).astype(F32).reshape(
        np.shape(a_log))


def log_neg(a):
    """The reader's A_log = fl32(log(-float64(a)))."""
    assert np.all(a < 0), a
    return np.array([math.log(-float(v)) for v in np.ravel(a)], dtype=np.float64).astype(F32).reshape(np.shape(a))


def v_tiled(t, axis, nk, r, hd, inverse=False):
    """_LinearAttentionVReorderBase._reorder_v_heads: value heads along `axis` from grouped (head g * r + j) to tiled
    (position j * nk + g) order; inverse=True goes back."""
    t = np.moveaxis(np.asarray(t), axis, 0)
    shape = t.shape
    t = t.reshape(((r, nk) if inverse else (nk, r)) + (hd,) + shape[1:]).swapaxes(0, 1).reshape(shape)
    return np.ascontiguousarray(np.moveaxis(t, 0, axis))


def v_reorder(role, w, hp, inverse=False):
    """The V-head reorder of one linear-attention tensor (HF shapes; conv1d squeezed or not), by GGUF role."""
    nk, nv = hp["linear_num_key_heads"], hp["linear_num_value_heads"]
    hk, hv, r = hp["linear_key_head_dim"], hp["linear_value_head_dim"], nv // nk
    if role in ("attn_qkv", "ssm_conv1d"):  # q and k rows / channels stay, the v part moves
        qk = 2 * nk * hk
        return np.concatenate([w[:qk], v_tiled(w[qk:], 0, nk, r, hv, inverse)], axis=0)
    if role == "attn_gate":
        return v_tiled(w, 0, nk, r, hv, inverse)
    if role in ("ssm_alpha", "ssm_beta", "ssm_a", "ssm_dt"):
        return v_tiled(w, 0, nk, r, 1, inverse)
    if role == "ssm_out":
        return v_tiled(w, 1, nk, r, hv, inverse)
    return w  # ssm_norm is shared by the heads


def qkvz_split(w, hp):
    """Qwen3NextModel.modify_tensors: in_proj_qkvz rows [q_g, k_g, v_g, z_g] per key head g -> (attn_qkv = [all q,
    all k, all v], attn_gate = all z)."""
    nk, nv = hp["linear_num_key_heads"], hp["linear_num_value_heads"]
    hk, hv, r = hp["linear_key_head_dim"], hp["linear_value_head_dim"], nv // nk
    g = w.reshape(nk, 2 * hk + 2 * r * hv, w.shape[1])
    q, k, v, z = np.split(g, [hk, 2 * hk, 2 * hk + r * hv], axis=1)
    flat = [t.reshape(-1, w.shape[1]) for t in (q, k, v, z)]
    return np.ascontiguousarray(np.concatenate(flat[:3])), np.ascontiguousarray(flat[3])


def qkvz_join(qkv, z, hp):
    nk, nv = hp["linear_num_key_heads"], hp["linear_num_value_heads"]
    hk, hv, r = hp["linear_key_head_dim"], hp["linear_value_head_dim"], nv // nk
    h = qkv.shape[1]
    q, k, v = qkv[:nk * hk], qkv[nk * hk:2 * nk * hk], qkv[2 * nk * hk:]
    parts = [q.reshape(nk, hk, h), k.reshape(nk, hk, h), v.reshape(nk, r * hv, h), z.reshape(nk, r * hv, h)]
    return np.ascontiguousarray(np.concatenate(parts, axis=1).reshape(-1, h))


def hybrid_forward(config, weights):
    """convert_hf_to_gguf.py for qwen3next / qwen35 / qwen35moe (Qwen3NextModel, _LinearAttentionVReorderBase,
    Qwen2MoeModel, ModelBase.filter_tensors): HF f32 tensors in file order -> [(GGUF name, f32 in HF axis order)]."""
    arch, hp = HYBRID_ARCH[config["model_type"]], hparams_of(config)
    reorder = arch in ("qwen35", "qwen35moe") and hp["linear_num_key_heads"] != hp["linear_num_value_heads"]
    n_experts = hp.get("num_experts")
    out, experts = [], {}
    for name, w in weights.items():
        name = name.replace("language_model.", "")
        if "visual." in name:
            continue  # TextModel.filter_tensors: the vision tower goes to the mmproj file
        w = np.asarray(w, dtype=F32)
        if reorder and "linear_attn." in name:
            w = v_reorder(hybrid_gguf_name(name).split(".")[2], w, hp)
        if name.endswith(".A_log"):
            w = neg_exp(w)
        elif "conv1d" in name:
            w = w.reshape(w.shape[0], w.shape[-1])  # squeeze [conv_dim, 1, K]
        elif name.endswith("norm.weight") and not name.endswith("linear_attn.norm.weight"):
            w = (w + F32(1)).astype(F32)
        layer = name.split(".")[2] if name.startswith("model.layers.") else None
        if name.endswith("in_proj_qkvz.weight"):
            qkv, z = qkvz_split(w, hp)
            out += [(f"blk.{layer}.attn_qkv.weight", qkv), (f"blk.{layer}.attn_gate.weight", z)]
            continue
        if ".mlp.experts." in name:
            parts = name.split(".")
            experts.setdefault(layer, {})[(int(parts[5]), parts[6])] = w
            if len(experts[layer]) == 3 * n_experts:
                for proj in ("down_proj", "gate_proj", "up_proj"):
                    stack = np.stack([experts[layer][(e, proj)] for e in range(n_experts)])
                    out.append((f"blk.{layer}.{EXPERT_PROJ[proj]}.weight", stack))
                del experts[layer]
            continue
        out.append((hybrid_gguf_name(name), np.ascontiguousarray(w)))
    assert not experts, "unprocessed experts"
    return out


def hybrid_twin(config, decoded):
    """Decoded GGUF tensors (reversed-ne shapes) -> the source's HF names and layouts, every transform undone."""
    arch, hp = HYBRID_ARCH[config["model_type"]], hparams_of(config)
    prefix = hf_prefix(config)
    reorder = arch in ("qwen35", "qwen35moe") and hp["linear_num_key_heads"] != hp["linear_num_value_heads"]
    twin = {}
    for name, w in decoded.items():
        if name == "output_norm.weight":
            twin[prefix + "norm.weight"] = (w - F32(1)).astype(F32)
            continue
        if not name.startswith("blk."):
            twin[hybrid_hf_name(name, arch, prefix)] = np.ascontiguousarray(w, dtype=F32)
            continue
        layer, role = name.split(".")[1], name.split(".")[2]
        if role in HF_EXPERT:
            for e in range(w.shape[0]):
                twin[f"{prefix}layers.{layer}.mlp.experts.{e}.{HF_EXPERT[role]}.weight"] = np.ascontiguousarray(w[e])
            continue
        if arch == "qwen3next" and role == "attn_gate":
            continue  # joined with attn_qkv
        if arch == "qwen3next" and role == "attn_qkv":
            hf = f"{prefix}layers.{layer}.linear_attn.in_proj_qkvz.weight"
            w = qkvz_join(w, decoded[f"blk.{layer}.attn_gate.weight"], hp)
        else:
            hf = hybrid_hf_name(name, arch, prefix)
        if role in PLUS_ONE_ROLES:
            w = (w - F32(1)).astype(F32)  # never rounds for g = fl32(w + 1), w >= -2; not the source's bits
        elif role == "ssm_a":
            w = log_neg(w)
        elif role == "ssm_conv1d":
            w = w.reshape(w.shape[0], 1, w.shape[1])
        if reorder:
            w = v_reorder(role, w, hp, inverse=True)
        twin[hf] = np.ascontiguousarray(w, dtype=F32)
    return twin


FP4_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def hf_mxfp4_nibbles(blocks):
    """HF *_blocks [..., 16] -> nibbles [..., 32]: byte k holds element 2k (low nibble) and 2k + 1 (high)."""
    return np.stack([blocks & 15, blocks >> 4], axis=-1).reshape(*blocks.shape[:-1], 32)


def mxfp4_repack(blocks, scales):
    """GptOssModel.repack_mxfp4: HF blocks [E, rows, nb, 16] + scales [E, rows, nb] -> ggml block_mxfp4 bytes
    [E, rows, nb * 17]: e = the scale byte, then qs[16] with element j in the low nibble of qs[j] and element j + 16
    in its high nibble (transform_nibble_layout). No value changes."""
    n = hf_mxfp4_nibbles(blocks)
    qs = (n[..., :16] | (n[..., 16:] << 4)).astype(np.uint8)
    raw = np.concatenate([scales[..., None].astype(np.uint8), qs], axis=-1)
    return np.ascontiguousarray(raw.reshape(*blocks.shape[:2], -1))


def hf_mxfp4_dequant(blocks, scales):
    """transformers' rule, independent of ggml's decoder: E2M1 value * 2^(scale - 127) -> f32 [E, rows, nb * 32]."""
    vals = np.ldexp(np.array(FP4_E2M1, dtype=np.float64)[hf_mxfp4_nibbles(blocks)],
                    scales.astype(np.int64)[..., None] - 127)
    return vals.astype(F32).reshape(*blocks.shape[:2], -1)


def gpt_oss_forward(tensors):
    """convert_hf_to_gguf.py GptOssModel: generate_extra_tensors writes the MXFP4 experts first (down when a layer's
    down_proj_scales is read, then gate and up at gate_up_proj_scales: even / odd rows), then modify_tensors maps the
    rest in file order (gate_up_proj_bias split even / odd, sinks -> attn_sinks.weight). An already dequantized
    checkpoint (down_proj [E, I, H], gate_up_proj [E, H, 2I], as the twin stores it) takes convert's other branch:
    transposed to [E, out, in] and split the same way. MXFP4 entries are ("MXFP4", bytes [E, rows, nb * 17])."""
    out, pending = [], {}
    for name, t in tensors.items():
        layer = name.split(".")[2] if name.startswith("model.layers.") else None
        if name.endswith("mlp.experts.down_proj_blocks"):
            pending[layer] = t
        elif name.endswith("mlp.experts.down_proj_scales"):
            out.append((f"blk.{layer}.ffn_down_exps.weight", ("MXFP4", mxfp4_repack(pending.pop(layer), t))))
        elif name.endswith("mlp.experts.gate_up_proj_blocks"):
            pending[layer] = t
        elif name.endswith("mlp.experts.gate_up_proj_scales"):
            blocks = pending.pop(layer)
            out += [(f"blk.{layer}.ffn_gate_exps.weight", ("MXFP4", mxfp4_repack(blocks[:, ::2], t[:, ::2]))),
                    (f"blk.{layer}.ffn_up_exps.weight", ("MXFP4", mxfp4_repack(blocks[:, 1::2], t[:, 1::2])))]
    assert not pending, "blocks without scales"
    for name, t in tensors.items():
        layer = name.split(".")[2] if name.startswith("model.layers.") else None
        if name.endswith(("_blocks", "_scales")):
            continue
        if name.endswith("mlp.experts.gate_up_proj_bias"):
            out += [(f"blk.{layer}.ffn_gate_exps.bias", np.ascontiguousarray(t[..., ::2])),
                    (f"blk.{layer}.ffn_up_exps.bias", np.ascontiguousarray(t[..., 1::2]))]
        elif name.endswith("mlp.experts.down_proj_bias"):
            out.append((f"blk.{layer}.ffn_down_exps.bias", t))
        elif name.endswith("mlp.experts.down_proj"):
            out.append((f"blk.{layer}.ffn_down_exps.weight", np.ascontiguousarray(t.transpose(0, 2, 1))))
        elif name.endswith("mlp.experts.gate_up_proj"):
            t = t.transpose(0, 2, 1)
            out += [(f"blk.{layer}.ffn_gate_exps.weight", np.ascontiguousarray(t[:, ::2, :])),
                    (f"blk.{layer}.ffn_up_exps.weight", np.ascontiguousarray(t[:, 1::2, :]))]
        else:
            out.append((hybrid_gguf_name(name), t))
    return out


def gpt_oss_twin(config, decoded):
    """Decoded GGUF -> transformers' dequantized GptOss layout (tests/data/models/gpt_oss): gate_up_proj [E, H, 2I]
    with gate in the even and up in the odd columns, down_proj [E, I, H], gate_up_proj_bias [E, 2I] interleaved."""
    twin = {}
    for name, w in decoded.items():
        if name.split(".")[2:3] and name.split(".")[2] in HF_EXPERT:
            continue
        twin[hybrid_hf_name(name, "gpt-oss", "model.")] = np.ascontiguousarray(w, dtype=F32)
    for layer in range(config["num_hidden_layers"]):
        p, d = f"model.layers.{layer}.mlp.experts.", {k: decoded[f"blk.{layer}.{k}"] for k in (
            "ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight", "ffn_gate_exps.bias",
            "ffn_up_exps.bias", "ffn_down_exps.bias")}
        gate, up = d["ffn_gate_exps.weight"], d["ffn_up_exps.weight"]  # [E, I, H]
        gate_up = np.empty((gate.shape[0], gate.shape[2], 2 * gate.shape[1]), dtype=F32)
        gate_up[:, :, 0::2], gate_up[:, :, 1::2] = gate.transpose(0, 2, 1), up.transpose(0, 2, 1)
        bias = np.empty((gate.shape[0], 2 * gate.shape[1]), dtype=F32)
        bias[:, 0::2], bias[:, 1::2] = d["ffn_gate_exps.bias"], d["ffn_up_exps.bias"]
        twin[p + "gate_up_proj"], twin[p + "gate_up_proj_bias"] = gate_up, bias
        twin[p + "down_proj"] = np.ascontiguousarray(d["ffn_down_exps.weight"].transpose(0, 2, 1))
        twin[p + "down_proj_bias"] = np.ascontiguousarray(d["ffn_down_exps.bias"], dtype=F32)
    return twin


def types_convert_q8(name, w):
    """convert_hf_to_gguf.py --outtype q8_0 (ModelBase.prepare_tensors): F32 for 1-D tensors, *_norm.weight, names
    not ending .weight (biases, ssm_a) and ffn_gate_inp / ffn_gate_inp_shexp / ssm_conv1d; Q8_0 otherwise, F16 where
    ne[0] % 32 != 0 (gguf.quants raises QuantError, convert falls back to F16)."""
    if w.ndim <= 1 or name.endswith("_norm.weight") or not name.endswith(".weight") or \
            role_of(name) in CONVERT_F32_ROLES:
        return "F32"
    return "Q8_0" if w.shape[-1] % 32 == 0 else "F16"


def hybrid_kvs(config, name, file_type):
    """TextModel.set_gguf_parameters, then GptOssModel's or Qwen2MoeModel + Qwen3NextModel + _Qwen35MRopeMixin's
    keys, then general.quantization_version (no _Qwen35MtpMixin key: no mtp_num_hidden_layers here)."""
    arch, hp = HYBRID_ARCH[config["model_type"]], hparams_of(config)
    rp = hp.get("rope_parameters") or {}
    head_dim = hp.get("head_dim") or hp["hidden_size"] // hp["num_attention_heads"]
    kvs = [("general.architecture", STRING, arch), ("general.alignment", U32, ALIGNMENT),
           ("general.type", STRING, "model"), ("general.name", STRING, name),
           (f"{arch}.block_count", U32, hp["num_hidden_layers"]),
           (f"{arch}.context_length", U32, hp["max_position_embeddings"]),
           (f"{arch}.embedding_length", U32, hp["hidden_size"])]
    if hp.get("intermediate_size") is not None:
        kvs.append((f"{arch}.feed_forward_length", U32, hp["intermediate_size"]))
    kvs += [(f"{arch}.attention.head_count", U32, hp["num_attention_heads"]),
            (f"{arch}.attention.head_count_kv", U32, hp["num_key_value_heads"])]
    if rp.get("rope_type") == "yarn" and rp.get("factor") is not None:
        kvs += [(f"{arch}.rope.scaling.type", STRING, "yarn"), (f"{arch}.rope.scaling.factor", FLOAT32, rp["factor"]),
                (f"{arch}.rope.scaling.original_context_length", U32, rp["original_max_position_embeddings"])]
        for key, value in (("yarn_ext_factor", rp.get("extrapolation_factor")),
                           ("yarn_attn_factor", rp.get("attention_factor", rp.get("attn_factor"))),
                           ("yarn_beta_fast", rp.get("beta_fast")), ("yarn_beta_slow", rp.get("beta_slow"))):
            if value is not None:
                kvs.append((f"{arch}.rope.scaling.{key}", FLOAT32, value))
    if "mrope_section" in rp:
        kvs.append((f"{arch}.rope.dimension_sections", ARRAY, (list(rp["mrope_section"]) + [0] * 4)[:4], I32))
    kvs += [(f"{arch}.rope.freq_base", FLOAT32, rp["rope_theta"]),
            (f"{arch}.attention.layer_norm_rms_epsilon", FLOAT32, hp["rms_norm_eps"])]
    n_experts = hp.get("num_local_experts", hp.get("num_experts"))
    if n_experts is not None:
        kvs += [(f"{arch}.expert_count", U32, n_experts), (f"{arch}.expert_used_count", U32, hp["num_experts_per_tok"])]
    if hp.get("head_dim") is not None:
        kvs += [(f"{arch}.attention.key_length", U32, head_dim), (f"{arch}.attention.value_length", U32, head_dim)]
    kvs.append(("general.file_type", U32, file_type))
    if arch == "gpt-oss":
        kvs += [(f"{arch}.attention.sliding_window", U32, hp["sliding_window"]),
                (f"{arch}.expert_feed_forward_length", U32, hp["intermediate_size"])]
    else:
        if hp.get("moe_intermediate_size") is not None:
            kvs.append((f"{arch}.expert_feed_forward_length", U32, hp["moe_intermediate_size"]))
        if hp.get("shared_expert_intermediate_size") is not None:
            kvs.append((f"{arch}.expert_shared_feed_forward_length", U32, hp["shared_expert_intermediate_size"]))
        kvs += [(f"{arch}.ssm.conv_kernel", U32, hp["linear_conv_kernel_dim"]),
                (f"{arch}.ssm.state_size", U32, hp["linear_key_head_dim"]),
                (f"{arch}.ssm.group_count", U32, hp["linear_num_key_heads"]),
                (f"{arch}.ssm.time_step_rank", U32, hp["linear_num_value_heads"]),
                (f"{arch}.ssm.inner_size", U32, hp["linear_value_head_dim"] * hp["linear_num_value_heads"]),
                (f"{arch}.full_attention_interval", U32,
                 hp.get("full_attention_interval", full_attention_interval(hp))),
                (f"{arch}.rope.dimension_count", U32, int(head_dim * hp.get("partial_rotary_factor", 0.25)))]
        if arch in ("qwen35", "qwen35moe") and "mrope_section" not in rp:
            kvs.append((f"{arch}.rope.dimension_sections", ARRAY, [11, 11, 10, 0], I32))
    kvs.append(("general.quantization_version", U32, QUANT_VERSION))
    return kvs


def write_hybrid_fixture(root, out_name, src):
    """One gpt-oss / qwen3next / qwen35(moe) fixture: the GGUF as convert --outtype q8_0 writes it, and its twin."""
    folder = os.path.join(root, out_name)
    if os.path.exists(folder):
        shutil.rmtree(folder)
    os.makedirs(os.path.join(folder, "dequantized"))
    config = json.load(open(os.path.join(root, src, "config.json")))
    tensors = read_safetensors_any(os.path.join(root, src, "model.safetensors"))
    gpt_oss = HYBRID_ARCH[config["model_type"]] == "gpt-oss"
    converted = gpt_oss_forward(tensors) if gpt_oss else hybrid_forward(config, tensors)
    gguf_tensors, decoded = [], {}
    for name, w in converted:
        if isinstance(w, tuple):
            tname, raw3 = w
            ne = [raw3.shape[2] // 17 * 32, raw3.shape[1], raw3.shape[0]]
            raw = raw3.tobytes()
        else:
            tname = types_convert_q8(name, w)
            ne, raw = list(reversed(w.shape)), encode(tname, w)
        gguf_tensors.append((name, ne, tname, raw))
        decoded[name] = decode(tname, raw).reshape(list(reversed(ne)))
    kvs = hybrid_kvs(config, out_name, HYBRID_FILE_TYPE)
    with open(os.path.join(folder, out_name + ".gguf"), "wb") as f:
        f.write(gguf_file(kvs, gguf_tensors))
    twin = gpt_oss_twin(config, decoded) if gpt_oss else hybrid_twin(config, decoded)
    write_safetensors(os.path.join(folder, "dequantized", "model.safetensors"),
                      {k: ("F32", v) for k, v in twin.items()})
    if gpt_oss:  # the dequantized model: the MXFP4 checkpoint's config without its quantization_config
        twin_config = {k: v for k, v in config.items() if k != "quantization_config"}
        with open(os.path.join(folder, "dequantized", "config.json"), "w") as f:
            json.dump(twin_config, f, indent=2)
            f.write("\n")
    else:
        shutil.copy(os.path.join(root, src, "config.json"), os.path.join(folder, "dequantized", "config.json"))
    shutil.copy(os.path.join(root, src, "generation_config.json"),
                os.path.join(folder, "dequantized", "generation_config.json"))
    return config, tensors


def same_bits(a, b):
    return a.shape == b.shape and np.array_equal(np.ascontiguousarray(a, dtype=F32).view(np.uint32),
                                                 np.ascontiguousarray(b, dtype=F32).view(np.uint32))


def verify_hybrid(root, name, src, config, source):
    """Re-read the GGUF, decode every tensor twice, undo convert's transforms: the twin, bit for bit; convert the twin
    again: the GGUF's values, bit for bit (every inverse exact on these values); then compare with the source."""
    folder = os.path.join(root, name)
    kvs, tensors = read_gguf(open(os.path.join(folder, name + ".gguf"), "rb").read())
    meta = {k: v for k, _, v in kvs}
    arch = HYBRID_ARCH[config["model_type"]]
    want = hybrid_kvs(config, name, HYBRID_FILE_TYPE)
    assert meta["general.architecture"] == arch and [k for k, _, _ in kvs] == [kv[0] for kv in want]
    for (key, vtype, value), kv in zip(kvs, want):
        got = pack_value(ARRAY, value[1], value[0]) if vtype == ARRAY else pack_value(vtype, value)
        assert vtype == kv[1] and got == pack_value(*kv[1:]), (key, value, kv)
    decoded, types = {}, {}
    for tname, ne, t, raw in tensors:
        decoded[tname] = decode_checked(t, raw, int(np.prod(ne))).reshape(list(reversed(ne)))
        types[tname] = t
    twin = read_safetensors(os.path.join(folder, "dequantized", "model.safetensors"))
    expect = gpt_oss_twin(config, decoded) if arch == "gpt-oss" else hybrid_twin(config, decoded)
    assert set(twin) == set(expect), set(twin) ^ set(expect)
    for n, w in twin.items():
        assert same_bits(w, expect[n]), n
    forward = dict(gpt_oss_forward(twin) if arch == "gpt-oss" else hybrid_forward(config, twin))
    assert set(forward) == set(decoded), set(forward) ^ set(decoded)
    for n, w in forward.items():
        assert same_bits(w, decoded[n]), f"{n}: converting the twin does not give the GGUF's values back"
    if arch == "gpt-oss":  # names and shapes of transformers' dequantized GptOss (tests/data/models/gpt_oss)
        dense = read_safetensors(os.path.join(root, "gpt_oss", "model.safetensors"))
        assert {n: w.shape for n, w in twin.items()} == {n: w.shape for n, w in dense.items()}
        for layer in range(config["num_hidden_layers"]):  # the experts against transformers' own MXFP4 rule
            p = f"model.layers.{layer}.mlp.experts."
            for proj in ("gate_up_proj", "down_proj"):
                ref = hf_mxfp4_dequant(source[p + proj + "_blocks"], source[p + proj + "_scales"]).transpose(0, 2, 1)
                assert np.array_equal(twin[p + proj], ref), p + proj  # == : HF's -0.0 is ggml's +0.0
        reference = {n: w for n, w in source.items() if not n.endswith(("_blocks", "_scales"))}
        for p in [n[:-len("_blocks")] for n in source if n.endswith("_blocks")]:
            reference[p] = hf_mxfp4_dequant(source[p + "_blocks"], source[p + "_scales"]).transpose(0, 2, 1)
    else:
        reference = {n: w for n, w in source.items() if "visual." not in n}
    assert set(twin) == set(reference), set(twin) ^ set(reference)
    max_err, worst, exact = 0.0, None, 0
    for n, w in twin.items():
        err = float(np.abs(w.astype(np.float64) - reference[n]).max())
        if err > max_err:
            max_err, worst = err, n
        exact += same_bits(w, reference[n])
        if n.endswith(("layernorm.weight", "norm.weight", "q_norm.weight", "k_norm.weight")) and \
                "linear_attn" not in n and arch != "gpt-oss":
            assert err <= 2.0 ** -24, (n, err)  # only w + 1's rounding
    if arch == "gpt-oss":
        assert json.load(open(os.path.join(folder, "dequantized", "config.json"))) == \
            {k: v for k, v in config.items() if k != "quantization_config"}
    else:
        assert json.load(open(os.path.join(folder, "dequantized", "config.json"))) == config
    sizes = {os.path.relpath(os.path.join(d, f), folder): os.path.getsize(os.path.join(d, f))
             for d, _, fs in os.walk(folder) for f in fs}
    counts = {}
    for t in types.values():
        counts[t] = counts.get(t, 0) + 1
    print(f"{name}: {len(tensors)} tensors {dict(sorted(counts.items()))}, folder {sum(sizes.values())} B "
          f"({', '.join(f'{k} {v}' for k, v in sorted(sizes.items()))}); twin == source bitwise for {exact} of "
          f"{len(twin)}, max |twin - {src}| {max_err:.3g} ({worst})")
    return kvs, tensors


# ---------------------------------------------------------------------------------------------------------------------
# Verification (from the files on disk)


def verify(root, name, config, source, split=False):
    folder = os.path.join(root, name)
    data = open(os.path.join(folder, name + ".gguf"), "rb").read()
    kvs, tensors = read_gguf(data)
    meta = {k: v for k, _, v in kvs}
    assert meta["general.architecture"] == ARCH[config["model_type"]]
    decoded, types = {}, {}
    for tname_name, ne, tname, raw in tensors:
        y = decode_checked(tname, raw, int(np.prod(ne)))
        decoded[tname_name] = y.reshape(list(reversed(ne)))
        types[tname_name] = tname
    twin = read_safetensors(os.path.join(folder, "dequantized", "model.safetensors"))
    expect = twin_tensors(config, decoded)
    assert set(twin) == set(expect), set(twin) ^ set(expect)
    source_names = {n for n in source if not (n == "lm_head.weight" and config.get("tie_word_embeddings"))}
    assert set(twin) == source_names, set(twin) ^ source_names
    max_err, worst = 0.0, None
    for n, w in twin.items():
        assert w.shape == source[n].shape and np.array_equal(w.view(np.uint32), expect[n].view(np.uint32)), n
        err = float(np.abs(w - source[n]).max())
        if err > max_err:
            max_err, worst = err, n
    assert json.load(open(os.path.join(folder, "dequantized", "config.json"))) == config
    if split:
        shard_names = sorted(f for f in os.listdir(folder) if f.startswith(name + "-") and f.endswith(".gguf"))
        assert len(shard_names) == 2, shard_names
        joined = []
        for i, shard in enumerate(shard_names):
            skvs, stensors = read_gguf(open(os.path.join(folder, shard), "rb").read())
            tail = [("split.no", U16, i), ("split.tensors.count", I32, len(tensors)), ("split.count", U16, 2)]
            assert skvs == (kvs if i == 0 else []) + tail, (shard, skvs[-3:])
            joined += stensors
        assert joined == tensors, "shards do not hold the whole file's tensors"
    sizes = {os.path.relpath(os.path.join(d, f), folder): os.path.getsize(os.path.join(d, f))
             for d, _, fs in os.walk(folder) for f in fs}
    counts = {}
    for t in types.values():
        counts[t] = counts.get(t, 0) + 1
    print(f"{name}: {len(tensors)} tensors {dict(sorted(counts.items()))}, folder {sum(sizes.values())} B "
          f"({', '.join(f'{k} {v}' for k, v in sorted(sizes.items()))}); max |twin - source| {max_err:.3g} ({worst})")
    return kvs, tensors


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", "tests", "data", "models"))
    parser.add_argument("--k-dims", choices=sorted(K_MODELS), default="small",
                        help="size of the widened K-quant models (see K_MODELS)")
    parser.add_argument("--no-verify", action="store_true", help="skip re-reading and decoding every file twice")
    parser.add_argument("--show-metadata", action="store_true", help="print every file's KV pairs and tensor table")
    args = parser.parse_args()
    self_check()
    sources = make_all(args.root, args.k_dims)
    if args.no_verify:
        return
    hybrid = dict((out, src) for src, out in HYBRID_FIXTURES)
    for name, (config, weights) in sources.items():
        if name in hybrid:
            kvs, tensors = verify_hybrid(args.root, name, hybrid[name], config, weights)
        else:
            kvs, tensors = verify(args.root, name, config, weights, split=(name == "llama_gguf_q8"))
        if args.show_metadata:
            for k, vtype, v in kvs:
                print(f"    {k} = {v!r}")
            for tname, ne, t, raw in tensors:
                print(f"    {tname:32s} {t:5s} ne={ne}")


if __name__ == "__main__":
    main()
