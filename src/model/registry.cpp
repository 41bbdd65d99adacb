// The one table of supported architectures: HF `architectures` string -> factory. Adding a model = one file + one row.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "model/architectures.h"

namespace rs::model {
namespace {

struct Registration {
  const char* architecture;
  std::unique_ptr<Model> (*factory)(const loader::ModelConfig&);
};

constexpr Registration kArchitectures[] = {
    {"LlamaForCausalLM", make_llama},
    {"Qwen3ForCausalLM", make_qwen3},
    {"Qwen3MoeForCausalLM", make_qwen3_moe},
    {"GptOssForCausalLM", make_gpt_oss},
    {"Qwen3NextForCausalLM", make_qwen3_next},
    {"Qwen3_5ForCausalLM", make_qwen3_next},
    {"Qwen3_5ForConditionalGeneration", make_qwen3_next},  // text part only: config under text_config
    {"Qwen3_5MoeForCausalLM", make_qwen3_next},
    {"Qwen3_5MoeForConditionalGeneration", make_qwen3_next},
    {"LlamaForCausalLMEagle3", make_eagle3},  // a draft head for speculative decoding only
    {"DFlashDraftModel", make_dflash},        // likewise
    // Base models without an LM head: embedding checkpoints (ModelConfig::embedding)
    {"Qwen3Model", make_qwen3},
    {"LlamaModel", make_llama},
};

}  // namespace

std::vector<std::string> supported_architectures() {
  std::vector<std::string> names;
  for (const auto& entry : kArchitectures) names.emplace_back(entry.architecture);
  return names;
}

std::unique_ptr<Model> create_model(const loader::ModelConfig& config) {
  for (const auto& entry : kArchitectures)
    if (config.architecture == entry.architecture) return entry.factory(config);
  RS_FAIL("unknown architecture '{}' in config.json (supported: {})", config.architecture,
          fmt::join(supported_architectures(), ", "));
}

}  // namespace rs::model
