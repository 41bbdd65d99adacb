#include "engine/weight_plan.h"

#include <algorithm>
#include <system_error>

#include "loader/checkpoint.h"

namespace rs::engine {
namespace fs = std::filesystem;

ParameterCount count_parameters(const loader::ModelConfig& c) {
  ParameterCount n;
  const double hidden = c.hidden_size, vocab = c.vocab_size, hd = c.head_dim;
  n.other += vocab * hidden + hidden;                                      // embedding table, final norm
  if (!c.tie_word_embeddings && !c.embedding) n.linear += vocab * hidden;  // LM head
  for (int32_t layer = 0; layer < c.num_layers; ++layer) {
    n.other += 2 * hidden;  // the two norms
    if (c.layer_kinds.empty() || c.layer_kinds[layer] == loader::LayerKind::kAttention) {
      const double q_rows = c.num_heads * hd * (c.attn_output_gate ? 2 : 1);
      n.linear += hidden * (q_rows + 2 * c.num_kv_heads * hd) + c.num_heads * hd * hidden;
    } else {
      const loader::LinearAttentionConfig& g = c.linear;
      n.linear += hidden * (g.conv_channels() + g.value_dim() + 2.0 * g.num_value_heads) + g.value_dim() * hidden;
      n.other += static_cast<double>(g.conv_channels()) * g.conv_kernel + 2.0 * g.num_value_heads + g.value_head_dim;
    }
    if (c.is_moe_layer(layer)) {
      n.experts += static_cast<double>(c.num_experts) * 3 * hidden * c.moe_intermediate_size;
      n.other += static_cast<double>(c.num_experts) * hidden;  // router
      if (c.shared_expert_intermediate_size > 0)
        n.linear += 3 * hidden * c.shared_expert_intermediate_size + hidden;  // shared expert and its gate
    } else {
      n.linear += 3 * hidden * c.intermediate_size;
    }
  }
  return n;
}

size_t planned_weight_bytes(const fs::path& model_dir, const loader::ModelConfig& config, bool dummy) {
  const ParameterCount n = count_parameters(config);
  const double element = config.dtype == DType::kF32 ? 4.0 : 2.0;
  const loader::QuantizationConfig& q = config.quantization;
  const double linear = q.is_fp8() || q.fp8_on_load ? 1.0 : q.is_integer() ? q.bits / 8.0 : element;
  const double experts = config.quant_method == "mxfp4" ? 4.25 / 8 : linear;
  const auto estimate = static_cast<size_t>(n.linear * linear + n.experts * experts + n.other * element);
  if (dummy) return estimate;
  // The files the loader reads (a folder may also ship another format, or a consolidated copy), or its GGUF files.
  std::vector<fs::path> files = loader::weight_files(model_dir);
  std::error_code ec;
  if (files.empty())
    for (const auto& entry : fs::directory_iterator(model_dir, ec))
      if (entry.path().extension() == ".gguf") files.push_back(entry.path());
  size_t bytes = 0;
  for (const fs::path& file : files) {
    const auto size = fs::file_size(file, ec);  // follows the links of a hub cache or a GGUF folder view
    if (!ec) bytes += size;
  }
  // What loads can be less than what is stored: --quantization fp8 halves bf16 projections, an embedding model skips
  // the LM head. The smaller of the two keeps this a lower bound (a false refusal is worse than none).
  return std::min(bytes, estimate);
}

}  // namespace rs::engine
