// Every architecture against Hugging Face transformers (tools/make_goldens.py): last-position logits of each prompt,
// and 32 greedy tokens decoded through the paged KV cache, whole-prompt and chunked prefill.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "loader/safetensors.h"

namespace rs {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

constexpr float kLogitTolerance = 5e-4f;   // fp32 vs fp32: only summation order differs (seen: <= 5e-5)
constexpr float kAmbiguousMargin = 1e-3f;  // top-2 gap under which a greedy divergence is tolerated

fs::path fixture(const std::string& name) { return fs::path(RS_SOURCE_DIR) / "tests/data/models" / name; }

json golden(const fs::path& dir) {
  std::ifstream in(dir / "golden.json");
  return json::parse(in);
}

// Drives one sequence through the engine: prefill in chunks of `chunk` tokens, then greedy decode.
class SequenceRunner {
 public:
  explicit SequenceRunner(engine::Engine& engine) : engine_(engine) {
    const auto& pool = engine.kv_pool();
    max_pages_ = static_cast<int32_t>(engine.context_length() / pool.page_size() + 1);
  }

  // Feeds tokens at positions [pos_, pos_ + n); returns the logits of the last one.
  std::vector<float> feed(std::span<const int32_t> ids) {
    engine::ForwardBatch batch;
    batch.token_ids.assign(ids.begin(), ids.end());
    for (size_t i = 0; i < ids.size(); ++i) batch.positions.push_back(pos_ + static_cast<int32_t>(i));
    batch.seq_token_start = {0, static_cast<int32_t>(ids.size())};
    pos_ += static_cast<int32_t>(ids.size());
    batch.seq_kv_len = {pos_};
    batch.max_pages = max_pages_;
    const int32_t page_size = engine_.kv_pool().page_size();
    const int32_t first_new_page = (pos_ - static_cast<int32_t>(ids.size())) / page_size;
    for (int g = 0; g < engine_.kv_pool().num_groups(); ++g) {
      // Full groups: page p at slot p. Window groups: a ring of the group's pages, and pages that no token of this
      // step can see are left absent (-1), so any read outside the window would fault.
      const kv::KvGroup& group = engine_.kv_pool().group(g);
      std::vector<int32_t> table(max_pages_, -1);
      const int32_t used = (pos_ + page_size - 1) / page_size;
      for (int32_t p = 0; p < used; ++p) {
        const bool visible = group.window == 0 || p >= first_new_page - (group.window + page_size - 1) / page_size;
        if (visible) table[p] = group.window == 0 ? p : static_cast<int32_t>(p % group.num_pages);
      }
      batch.page_tables.push_back(table);
    }
    batch.logit_rows = {static_cast<int32_t>(ids.size()) - 1};
    return engine_.forward(batch, /*keep_logits=*/true).logits;
  }

 private:
  engine::Engine& engine_;
  int32_t pos_ = 0;
  int32_t max_pages_ = 0;
};

int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

engine::EngineConfig test_config() {
  engine::EngineConfig config;
  config.num_threads = 2;
  config.kv_cache_gb = 0.02;
  config.max_running_requests = 2;
  config.context_length = 1024;
  config.max_step_tokens = 512;
  return config;
}

struct CaseResult {
  float max_logit_diff = 0;
  int greedy_matched = 0;
  int ambiguous_divergences = 0;
};

CaseResult run_case(engine::Engine& engine, const json& c, int chunk) {
  const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
  const auto expected_logits = c["last_logits"].get<std::vector<float>>();
  const auto expected = c["greedy_ids"].get<std::vector<int32_t>>();
  const auto margins = c["greedy_margins"].get<std::vector<float>>();
  SequenceRunner runner(engine);
  std::vector<float> logits;
  for (size_t begin = 0; begin < prompt.size(); begin += chunk) {
    const size_t end = std::min(prompt.size(), begin + chunk);
    logits = runner.feed(std::span(prompt).subspan(begin, end - begin));
  }
  CaseResult result;
  EXPECT_EQ(logits.size(), expected_logits.size());
  for (size_t i = 0; i < logits.size(); ++i)
    result.max_logit_diff = std::max(result.max_logit_diff, std::abs(logits[i] - expected_logits[i]));
  for (size_t step = 0; step < expected.size(); ++step) {
    const int32_t token = argmax(logits);
    if (token != expected[step]) {
      // A near-tie in the reference may legitimately flip; anything else is a failure.
      EXPECT_LT(margins[step], kAmbiguousMargin) << "greedy token " << step << ": got " << token << ", HF "
                                                 << expected[step] << " (margin " << margins[step] << ")";
      if (margins[step] < kAmbiguousMargin) ++result.ambiguous_divergences;
      break;
    }
    ++result.greedy_matched;
    if (step + 1 < expected.size()) logits = runner.feed(std::span(&expected[step], 1));
  }
  return result;
}

class GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, MatchesTransformers) {
  const fs::path dir = fixture(GetParam());
  const json ref = golden(dir);
  engine::Engine engine(dir, test_config());
  for (int chunk : {1 << 20, 7}) {
    for (const auto& c : ref["cases"]) {
      CaseResult r = run_case(engine, c, chunk);
      std::printf("[%s] prompt %zu tokens, chunk %d: max |logit diff| %.2e, greedy %d/%zu identical%s\n",
                  GetParam().c_str(), c["prompt_ids"].size(), std::min<int>(chunk, 9999), r.max_logit_diff,
                  r.greedy_matched, c["greedy_ids"].size(),
                  r.ambiguous_divergences ? " (then a near-tie divergence, tolerated)" : "");
      EXPECT_LT(r.max_logit_diff, kLogitTolerance);
      EXPECT_GE(r.greedy_matched + (r.ambiguous_divergences ? 32 : 0), 24);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, GoldenTest,
                         ::testing::Values("llama", "llama_bf16", "qwen3", "qwen3_moe", "gpt_oss", "gpt_oss_mxfp4"));

// The gpt-oss goldens must exercise the window and the sinks: without either, our logits move far from HF's.
fs::path copy_fixture(const std::string& name, const std::string& tag) {
  fs::path dst = fs::temp_directory_path() / ("rs_golden_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(dst);
  fs::copy(fixture(name), dst, fs::copy_options::recursive);
  return dst;
}

float last_logit_diff(const fs::path& dir, const json& ref) {
  engine::Engine engine(dir, test_config());
  const auto& c = ref["cases"][0];
  SequenceRunner runner(engine);
  auto logits = runner.feed(c["prompt_ids"].get<std::vector<int32_t>>());
  const auto expected = c["last_logits"].get<std::vector<float>>();
  float diff = 0;
  for (size_t i = 0; i < logits.size(); ++i) diff = std::max(diff, std::abs(logits[i] - expected[i]));
  return diff;
}

TEST(GoldenGptOss, WindowAndSinksAreExercised) {
  for (const std::string name : {"gpt_oss", "gpt_oss_mxfp4"}) {
    const json ref = golden(fixture(name));
    ASSERT_GT(ref["cases"][0]["prompt_ids"].size(), 2 * 32u) << "prompt must exceed the window";
    // No window: every layer full attention.
    fs::path no_window = copy_fixture(name, "nowindow");
    json config = json::parse(std::ifstream(no_window / "config.json"));
    config["layer_types"] = json::array();
    for (int i = 0; i < config["num_hidden_layers"].get<int>(); ++i) config["layer_types"].push_back("full_attention");
    std::ofstream(no_window / "config.json") << config.dump();
    EXPECT_GT(last_logit_diff(no_window, ref), 50 * kLogitTolerance) << name;
    // No sinks: overwrite every sinks tensor with a very negative logit (exp -> 0).
    fs::path no_sinks = copy_fixture(name, "nosinks");
    {
      loader::SafetensorsFile file(no_sinks / "model.safetensors");
      std::fstream out(no_sinks / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
      for (const auto& [tensor, entry] : file.entries()) {
        if (tensor.find("sinks") == std::string::npos) continue;
        out.seekp(static_cast<std::streamoff>(entry.offset));
        const size_t count = entry.bytes / dtype_size(entry.dtype);
        for (size_t i = 0; i < count; ++i) {
          if (entry.dtype == DType::kF32) {
            const float v = -1e30f;
            out.write(reinterpret_cast<const char*>(&v), 4);
          } else {
            const uint16_t v = f32_to_bf16(-1e30f);
            out.write(reinterpret_cast<const char*>(&v), 2);
          }
        }
      }
    }
    EXPECT_GT(last_logit_diff(no_sinks, ref), 10 * kLogitTolerance) << name;
    fs::remove_all(no_window);
    fs::remove_all(no_sinks);
  }
}

TEST(Golden, UnknownArchitectureListsSupportedOnes) {
  fs::path dir = copy_fixture("llama", "unknown");
  json config = json::parse(std::ifstream(dir / "config.json"));
  config["architectures"] = {"MambaForCausalLM"};
  std::ofstream(dir / "config.json") << config.dump();
  try {
    engine::Engine engine(dir, test_config());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown architecture 'MambaForCausalLM'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("GptOssForCausalLM"), std::string::npos);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace rs
