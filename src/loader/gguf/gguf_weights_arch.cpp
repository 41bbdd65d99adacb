// GGUF tensors whose Hugging Face form combines or re-lays several GGUF tensors.
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "loader/gguf/gguf_weights.h"

namespace rs::loader::gguf {
namespace {

constexpr size_t kMxfp4Block = 17;  // block_mxfp4: an E8M0 scale byte, then 16 bytes of E2M1 codes

// One ggml MXFP4 block as Hugging Face's (blocks, scale): ggml keeps element j in the low nibble of qs[j] and element
// j + 16 in its high nibble; Hugging Face packs elements 2t and 2t + 1 into byte t, low nibble first. The codes and the
// scale byte mean the same in both (ggml's table holds doubled E2M1 values over a halved E8M0 scale).
void mxfp4_block_to_hf(const uint8_t* block, uint8_t* hf_bytes, uint8_t* hf_scale) {
  uint8_t element[32];
  for (int j = 0; j < 16; ++j) {
    element[j] = block[1 + j] & 0xF;
    element[j + 16] = block[1 + j] >> 4;
  }
  for (int t = 0; t < 16; ++t) hf_bytes[t] = static_cast<uint8_t>(element[2 * t] | (element[2 * t + 1] << 4));
  *hf_scale = block[0];
}

}  // namespace

// ffn_gate_exps / ffn_up_exps [E, I, H] and ffn_down_exps [E, H, I] (MXFP4, convert_hf_to_gguf.py's split of
// gpt-oss's gate_up_proj) back to gpt-oss's experts.gate_up_proj_{blocks,scales} [E, 2I, H/32, (16)] with gate rows at
// even and up rows at odd positions, down_proj_{blocks,scales}, and the biases interleaved the same way.
void GgufWeights::add_gpt_oss_experts(int32_t layers) {
  for (int32_t layer = 0; layer < layers; ++layer) {
    const std::string g = "blk." + std::to_string(layer) + ".";
    if (!record(g + "ffn_gate_exps.weight")) continue;
    const TensorRecord& gate = require_record(g + "ffn_gate_exps.weight");
    const TensorRecord& up = require_record(g + "ffn_up_exps.weight");
    const TensorRecord& down = require_record(g + "ffn_down_exps.weight");
    for (const TensorRecord* t : {&gate, &up, &down})
      RS_CHECK(t->type == GgmlType::kMXFP4 && t->ne.size() == 3,
               "{}: gpt-oss expert tensor '{}' is {}: radixserve reads gpt-oss experts in MXFP4 (as released)",
               files_.front()->path().string(), t->name, type_name(t->type));
    RS_CHECK(gate.ne == up.ne && down.ne[0] == gate.ne[1] && down.ne[1] == gate.ne[0] && down.ne[2] == gate.ne[2],
             "{}: gpt-oss experts of layer {} have mismatched shapes", files_.front()->path().string(), layer);
    const int64_t hidden = gate.ne[0], inter = gate.ne[1], experts = gate.ne[2];
    const std::string p = "model.layers." + std::to_string(layer) + ".mlp.experts.";
    // Row r of expert e of an MXFP4 stack [E, rows, cols]: cols / 32 blocks.
    const auto row_blocks = [](const TensorRecord& t, int64_t e, int64_t r) {
      const int64_t cols = t.ne[0], rows = t.ne[1];
      return t.data + ((e * rows + r) * (cols / 32)) * kMxfp4Block;
    };
    const auto convert_rows = [row_blocks, experts](const TensorRecord& a, const TensorRecord* b, int64_t rows_out,
                                                    int64_t cols, uint8_t* blocks, uint8_t* scales) {
      // rows_out rows per expert; with b, even rows come from a and odd rows from b.
      const int64_t per_row = cols / 32;
      uint8_t scratch[16], scale;
      for (int64_t e = 0; e < experts; ++e)
        for (int64_t i = 0; i < rows_out; ++i) {
          const uint8_t* src = b ? row_blocks(i % 2 == 0 ? a : *b, e, i / 2) : row_blocks(a, e, i);
          const int64_t row = e * rows_out + i;
          for (int64_t k = 0; k < per_row; ++k) {
            mxfp4_block_to_hf(src + k * kMxfp4Block, blocks ? blocks + (row * per_row + k) * 16 : scratch,
                              scales ? scales + row * per_row + k : &scale);
          }
        }
    };
    add_built(p + "gate_up_proj_blocks", gate, DType::kU8, {experts, 2 * inter, hidden / 32, 16},
              [=, &gate, &up](uint8_t* out) { convert_rows(gate, &up, 2 * inter, hidden, out, nullptr); });
    add_built(p + "gate_up_proj_scales", gate, DType::kU8, {experts, 2 * inter, hidden / 32},
              [=, &gate, &up](uint8_t* out) { convert_rows(gate, &up, 2 * inter, hidden, nullptr, out); });
    add_built(p + "down_proj_blocks", down, DType::kU8, {experts, hidden, inter / 32, 16},
              [=, &down](uint8_t* out) { convert_rows(down, nullptr, hidden, inter, out, nullptr); });
    add_built(p + "down_proj_scales", down, DType::kU8, {experts, hidden, inter / 32},
              [=, &down](uint8_t* out) { convert_rows(down, nullptr, hidden, inter, nullptr, out); });
    // Biases [E, I] (F32) interleaved into [E, 2I]; down's [E, H] as stored.
    const TensorRecord& gate_bias = require_record(g + "ffn_gate_exps.bias");
    const TensorRecord& up_bias = require_record(g + "ffn_up_exps.bias");
    const TensorRecord& down_bias = require_record(g + "ffn_down_exps.bias");
    for (const TensorRecord* t : {&gate_bias, &up_bias, &down_bias})
      RS_CHECK(t->type == GgmlType::kF32, "{}: gpt-oss bias '{}' is {} (F32 expected)", files_.front()->path().string(),
               t->name, type_name(t->type));
    add_built(p + "gate_up_proj_bias", gate_bias, DType::kF32, {experts, 2 * inter},
              [=, &gate_bias, &up_bias](uint8_t* out) {
                auto* dst = reinterpret_cast<float*>(out);
                const auto* a = reinterpret_cast<const float*>(gate_bias.data);
                const auto* b = reinterpret_cast<const float*>(up_bias.data);
                for (int64_t e = 0; e < experts; ++e)
                  for (int64_t i = 0; i < inter; ++i) {
                    dst[e * 2 * inter + 2 * i] = a[e * inter + i];
                    dst[e * 2 * inter + 2 * i + 1] = b[e * inter + i];
                  }
              });
    add_built(p + "down_proj_bias", down_bias, DType::kF32, {experts, hidden},
              [=, &down_bias](uint8_t* out) { std::memcpy(out, down_bias.data, experts * hidden * sizeof(float)); });
  }
}

// Qwen3-Next / Qwen3.5 gated delta nets in the Hugging Face layout load_gated_delta_net reads (Qwen3.5's split
// projections for both): attn_qkv -> in_proj_qkv, attn_gate -> in_proj_z, Qwen3-Next's ssm_ba (b and a per key head)
// or Qwen3.5's ssm_beta / ssm_alpha -> in_proj_b / in_proj_a, ssm_conv1d -> conv1d, ssm_a (-exp(A_log)) -> A_log,
// ssm_dt.bias -> dt_bias, ssm_norm -> norm, ssm_out -> out_proj. convert_hf_to_gguf.py stores Qwen3.5's value heads
// tiled (position j*nk + g holds head g*r + j where nk key heads have r value heads each): put back in grouped order.
// The (1 + w) RMSNorms are stored with the 1 added, as mlx_lm stores them; the conv is presented as mlx_lm's
// [C, K, 1], which is how the model recognises that convention (decoder.cpp).
void GgufWeights::add_hybrid_qwen_layers(const std::string& arch, int32_t layers) {
  const nlohmann::json& meta = metadata();
  const auto key = [&](const char* name) {
    const auto it = meta.find(arch + "." + name);
    RS_CHECK(it != meta.end() && it->is_number_integer(), "{}: GGUF lacks the key '{}.{}'",
             files_.front()->path().string(), arch, name);
    return it->get<int64_t>();
  };
  const int64_t nk = key("ssm.group_count"), nv = key("ssm.time_step_rank"), hk = key("ssm.state_size");
  const int64_t kernel = key("ssm.conv_kernel"), inner = key("ssm.inner_size");
  // Bounded by the tensors before any order is built from them (the file's metadata is outside input).
  const TensorRecord* first = nullptr;
  for (int32_t layer = 0; layer < layers && !first; ++layer) first = record("blk." + std::to_string(layer) + ".ssm_a");
  if (!first) return;
  RS_CHECK(nk > 0 && nv > 0 && hk > 0 && first->ne[0] == nv && nv % nk == 0 && inner % nv == 0 && inner / nv > 0,
           "{}: ssm.* keys (group_count {}, time_step_rank {}, inner_size {}, state_size {}) do not fit ssm_a [{}]",
           files_.front()->path().string(), nk, nv, inner, hk, first->ne[0]);
  const int64_t hv = inner / nv, ratio = nv / nk;
  RS_CHECK(hk <= (int64_t{1} << 24) && hv <= (int64_t{1} << 24), "{}: ssm head sizes {} and {} are impossible",
           files_.front()->path().string(), hk, hv);
  const bool tiled = arch != "qwen3next" && nk != nv;
  // Hugging Face's value-head order over `width`-wide heads, after `offset` untouched leading entries.
  const auto value_order = [&](int64_t width, int64_t offset) -> std::shared_ptr<const std::vector<int64_t>> {
    if (!tiled) return nullptr;
    auto order = std::make_shared<std::vector<int64_t>>();
    for (int64_t i = 0; i < offset; ++i) order->push_back(i);
    for (int64_t g = 0; g < nk; ++g)
      for (int64_t j = 0; j < ratio; ++j)
        for (int64_t d = 0; d < width; ++d) order->push_back(offset + (j * nk + g) * width + d);
    return order;
  };
  // Each reordered tensor must hold the rows (or columns) the order names.
  const auto rows_are = [&](const TensorRecord& t, int64_t rows, bool columns = false) {
    const int64_t have = columns ? t.ne[0] : t.ne.size() == 1 ? t.ne[0] : t.ne[1];
    RS_CHECK(t.ne.size() <= 2 && have == rows, "{}: '{}' has {} {} where the ssm.* keys give {}",
             files_.front()->path().string(), t.name, have, columns ? "columns" : "rows", rows);
    return &t;
  };
  for (int32_t layer = 0; layer < layers; ++layer) {
    const std::string g = "blk." + std::to_string(layer) + ".";
    if (!record(g + "ssm_a")) continue;  // a full-attention layer
    RS_CHECK(!record(g + "ssm_in.weight"),
             "{}: layer {} stores the fused ssm_in of GGUF files converted before early 2026; re-convert the model "
             "with a current convert_hf_to_gguf.py",
             files_.front()->path().string(), layer);
    const std::string p = "model.layers." + std::to_string(layer) + ".linear_attn.";
    add_mapped(p + "in_proj_qkv.weight", *rows_are(require_record(g + "attn_qkv.weight"), 2 * nk * hk + nv * hv),
               value_order(hv, 2 * nk * hk));
    add_mapped(p + "in_proj_z.weight", *rows_are(require_record(g + "attn_gate.weight"), nv * hv), value_order(hv, 0));
    if (arch == "qwen3next") {
      // ssm_ba rows per key head g: b of its r value heads, then a.
      auto b_rows = std::make_shared<std::vector<int64_t>>(), a_rows = std::make_shared<std::vector<int64_t>>();
      for (int64_t k = 0; k < nk; ++k)
        for (int64_t j = 0; j < ratio; ++j) {
          b_rows->push_back(k * 2 * ratio + j);
          a_rows->push_back(k * 2 * ratio + ratio + j);
        }
      add_mapped(p + "in_proj_b.weight", *rows_are(require_record(g + "ssm_ba.weight"), 2 * nv), b_rows);
      add_mapped(p + "in_proj_a.weight", require_record(g + "ssm_ba.weight"), a_rows);
    } else {
      add_mapped(p + "in_proj_b.weight", *rows_are(require_record(g + "ssm_beta.weight"), nv), value_order(1, 0));
      add_mapped(p + "in_proj_a.weight", *rows_are(require_record(g + "ssm_alpha.weight"), nv), value_order(1, 0));
    }
    const TensorRecord& conv = require_record(g + "ssm_conv1d.weight");
    RS_CHECK(conv.ne.size() == 2 && conv.ne[0] == kernel && conv.ne[1] == 2 * nk * hk + nv * hv,
             "{}: '{}' is not [C, K]", files_.front()->path().string(), conv.name);
    add_mapped(p + "conv1d.weight", conv, value_order(hv, 2 * nk * hk), nullptr, {conv.ne[1], kernel, 1});
    add_mapped(p + "dt_bias", *rows_are(require_record(g + "ssm_dt.bias"), nv), value_order(1, 0));
    add_mapped(p + "norm.weight", require_record(g + "ssm_norm.weight"), nullptr);
    add_mapped(p + "out_proj.weight", *rows_are(require_record(g + "ssm_out.weight"), nv * hv, true), nullptr,
               value_order(hv, 0));
    // ssm_a = -exp(A_log) in f32: A_log = log(-a), in double and rounded once (no f32 A_log is guaranteed to give a
    // back through exp; the model uses exp(A_log) only, so this keeps it within an ulp of the file).
    const TensorRecord& a = require_record(g + "ssm_a");
    RS_CHECK(a.type == GgmlType::kF32 && a.ne.size() == 1 && a.ne[0] == nv, "{}: '{}' is not F32 [{}]",
             files_.front()->path().string(), a.name, nv);
    const auto order = value_order(1, 0);
    add_built(p + "A_log", a, DType::kF32, {nv}, [&a, order, nv](uint8_t* out) {
      const auto* src = reinterpret_cast<const float*>(a.data);
      auto* dst = reinterpret_cast<float*>(out);
      for (int64_t h = 0; h < nv; ++h)
        dst[h] = static_cast<float>(std::log(-static_cast<double>(src[order ? (*order)[h] : h])));
    });
  }
}

}  // namespace rs::loader::gguf
