// Factories of the supported architectures, one per file; registry.cpp maps HF `architectures` names to them.
#pragma once

#include <memory>

#include "model/model.h"

namespace rs::model {

std::unique_ptr<Model> make_llama(const loader::ModelConfig& config);
std::unique_ptr<Model> make_qwen3(const loader::ModelConfig& config);
std::unique_ptr<Model> make_qwen3_moe(const loader::ModelConfig& config);
std::unique_ptr<Model> make_gpt_oss(const loader::ModelConfig& config);

}  // namespace rs::model
