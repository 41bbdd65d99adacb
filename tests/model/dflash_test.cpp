// The DFlash drafter's forward (model/dflash.cpp) against a plain-Python reference of z-lab's (tools/
// make_dflash_fixture.py reference: tests/data/dflash/reference): two steps over two sequences, the first catching up
// on 5 and 3 context rows, the second on 2 and none, each followed by its block [last token, 3 masks]; the logits of
// every mask row must match. The second step reads the first's context K/V from the cache, and its rows overwrite the
// first block's. RS_TEST_BACKEND=cuda runs it on the GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "engine/step_builder.h"
#include "loader/weight_source.h"
#include "memory/sequence_memory.h"
#include "model/model.h"

namespace rs {
namespace {

namespace fs = std::filesystem;

fs::path reference_dir() { return fs::path(RS_SOURCE_DIR) / "tests/data/dflash/reference"; }

engine::EngineConfig config() {
  engine::EngineConfig config;
  config.exact_f32 = true;
  config.page_size = 4;
  config.context_length = 64;
  config.max_running_requests = 2;
  config.max_step_tokens = 64;
  if (const char* backend = std::getenv("RS_TEST_BACKEND")) config.backend = backend;
  return config;
}

// A host tensor on the engine's device (a copy there, kept by `keep`).
Tensor on_device(Backend& backend, const Tensor& host, std::vector<Buffer>& keep) {
  if (backend.device().is_cpu()) return host;
  return backend.upload_weight(host, keep);
}

TEST(DFlash, LogitsMatchTheReferenceForward) {
  engine::Engine engine(reference_dir(), config());
  const loader::ModelConfig& model = engine.model_config();
  ASSERT_TRUE(model.is_dflash());
  const int64_t vocab = model.vocab_size, hidden = model.hidden_size;
  const int64_t taps = static_cast<int64_t>(model.dflash.target_layer_ids.size()) * hidden;
  loader::WeightSource expected = loader::WeightSource::checkpoint(reference_dir() / "expected");
  Backend& backend = engine.backend();
  std::vector<Buffer> keep;
  const Tensor embed = on_device(backend, expected.require("embed", {vocab, hidden}, DType::kF32), keep);
  const Tensor features = on_device(backend, expected.require("features", {24, taps}, DType::kF32), keep);
  LinearWeight head{LinearWeight::Format::kDense, on_device(backend, expected.require("head", {vocab, hidden}), keep),
                    Tensor(), vocab, hidden};
  backend.prepare_linear(head, keep);
  model::DraftHead* draft = engine.model().draft_head();
  ASSERT_NE(draft, nullptr);
  draft->bind_target(model::SharedWeights{embed, &head}, features);

  std::ifstream file(reference_dir() / "reference.json");
  const nlohmann::json steps = nlohmann::json::parse(file)["steps"];
  memory::MemoryManager memory(engine.kv_pool().config(), memory::MemoryConfig{.prefix_cache = false});
  std::map<std::string, memory::SequenceMemory> sequences;
  const int32_t block = model.dflash.block_size;
  for (size_t s = 0; s < steps.size(); ++s) {
    engine::StepBuilder step(memory.num_groups());
    std::vector<std::vector<int32_t>> inputs;
    inputs.reserve(steps[s].size());
    for (const auto& entry : steps[s]) {
      std::vector<int32_t>& tokens = inputs.emplace_back(entry["context_tokens"].get<std::vector<int32_t>>());
      const auto block_tokens = entry["block_tokens"].get<std::vector<int32_t>>();
      tokens.insert(tokens.end(), block_tokens.begin(), block_tokens.end());
      const int64_t begin = entry["begin"].get<int64_t>();
      const int64_t end = begin + static_cast<int64_t>(tokens.size());
      memory::SequenceMemory& seq = sequences[entry["sequence"].get<std::string>()];
      ASSERT_EQ(memory.reserve(seq, begin, end), end);
      const int32_t first = step.add_sequence(tokens, begin, seq.kv.pages);
      const auto rows = entry["feature_rows"].get<std::vector<int32_t>>();
      for (size_t t = 0; t < rows.size(); ++t) {
        step.batch().feature_rows.push_back(rows[t]);
        step.batch().feature_tokens.push_back(first + static_cast<int32_t>(t));
      }
      for (int32_t b = 1; b < block; ++b)
        step.batch().logit_rows.push_back(first + static_cast<int32_t>(rows.size()) + b);
    }
    const size_t logit_rows = step.batch().logit_rows.size();
    const engine::StepOutput output = engine.forward(step.finish(), /*keep_logits=*/true);
    ASSERT_EQ(output.logits.size(), logit_rows * vocab) << "step " << s;
    size_t row = 0;
    for (const auto& entry : steps[s]) {
      const std::string name = "logits." + std::to_string(s) + "." + entry["sequence"].get<std::string>();
      const Tensor want = expected.require(name, {block - 1, vocab}, DType::kF32);
      const float* w = want.data_as<float>();
      float worst = 0.0f, scale = 0.0f;
      for (int64_t i = 0; i < (block - 1) * vocab; ++i) {
        worst = std::max(worst, std::abs(output.logits[row * vocab + i] - w[i]));
        scale = std::max(scale, std::abs(w[i]));
      }
      EXPECT_LT(worst, 2e-4f * scale) << name << ": max |diff| " << worst << " of logits up to " << scale;
      row += block - 1;
    }
  }
}

}  // namespace
}  // namespace rs
