// Factories of the supported architectures, one per file; registry.cpp maps HF `architectures` names to them.
#pragma once

#include <memory>

#include "model/model.h"

namespace rs::model {

std::unique_ptr<Model> make_llama(const loader::ModelConfig& config);
std::unique_ptr<Model> make_qwen3(const loader::ModelConfig& config);
std::unique_ptr<Model> make_qwen3_moe(const loader::ModelConfig& config);
std::unique_ptr<Model> make_gpt_oss(const loader::ModelConfig& config);
// Qwen3-Next, Qwen3.5 and Qwen3.5-MoE (hybrid gated-delta-net / gated-attention decoders).
std::unique_ptr<Model> make_qwen3_next(const loader::ModelConfig& config);
// EAGLE-3 draft heads (LlamaForCausalLMEagle3): run by a drafter beside a target that captures its hidden states.
std::unique_ptr<Model> make_eagle3(const loader::ModelConfig& config);
// DFlash block-diffusion drafters (DFlashDraftModel): likewise, reading the target's embedding table and LM head.
std::unique_ptr<Model> make_dflash(const loader::ModelConfig& config);

}  // namespace rs::model
