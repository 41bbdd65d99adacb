// Llama 3 / 3.1 / 3.2 (LlamaForCausalLM): the plain decoder; llama3 RoPE scaling comes from config.json.
#include "model/architectures.h"
#include "model/decoder.h"

namespace rs::model {

std::unique_ptr<Model> make_llama(const loader::ModelConfig& config) {
  RS_CHECK(config.num_experts == 0, "LlamaForCausalLM with experts is not supported");
  return std::make_unique<DecoderModel>(config, DecoderOptions{});
}

}  // namespace rs::model
