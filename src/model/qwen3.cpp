// Qwen3 dense (Qwen3ForCausalLM): Llama block plus per-head RMSNorm on q and k before RoPE; explicit head_dim.
#include "model/architectures.h"
#include "model/decoder.h"

namespace rs::model {

std::unique_ptr<Model> make_qwen3(const loader::ModelConfig& config) {
  return std::make_unique<DecoderModel>(config, DecoderOptions{.attention = {.qk_norm = true}});
}

}  // namespace rs::model
