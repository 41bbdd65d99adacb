// Every architecture against Hugging Face transformers (tools/make_goldens.py): last-position logits of each prompt,
// and 32 greedy tokens, run as `serve` runs them (serving::Driver: the scheduler, the KV manager and the radix cache):
// whole prompts, 7-token chunks, and every case at once beside the others, then again from the prefix cache.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "loader/checkpoint.h"
#include "serving/driver.h"

namespace rs {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

constexpr float kLogitTolerance = 5e-4f;  // fp32 vs fp32: only summation order differs (seen: <= 5e-5)
// A bf16 KV cache runs attention as transformers' bf16 does: q, K, V and the probabilities rounded to 8 significant
// bits, f32 sums. Logits (|x| up to ~16 in the fixtures) move by up to ~1.5% (seen: <= 0.11), and a greedy step whose
// reference top-2 margin is below kBf16KvAmbiguousMargin may flip. Exact-f32 kernels stay pinned by the goldens above;
// the bf16 kernel's masks and sinks by the kernel tests.
constexpr float kBf16KvLogitTolerance = 2.5e-1f;
constexpr float kBf16KvAmbiguousMargin = 1e-1f;
constexpr float kAmbiguousMargin = 1e-3f;  // top-2 gap under which a greedy divergence is tolerated
// An fp8 (e4m3) KV cache keeps 4 significant bits of K and V (rounding errors up to 2^-4 relative, 32x bf16's), and
// these random-weight fixtures amplify them: logits move by up to ~1.5 (seen: <= 1.47, the bf16 cache <= 0.11; the
// same with scales of 1/16, so it is precision, not range). Greedy steps whose reference margin is below
// kFp8KvAmbiguousMargin may flip. That the fp8 path is exactly attention over the dequantized cache is pinned by the
// kernel tests (CPU: against naive attention on code x scale; CUDA: against the CPU).
constexpr float kFp8KvLogitTolerance = 2.5f;
constexpr float kFp8KvAmbiguousMargin = 2.0f;

fs::path fixture(const std::string& name) { return fs::path(RS_SOURCE_DIR) / "tests/data/models" / name; }

json golden(const fs::path& dir) {
  std::ifstream in(dir / "golden.json");
  return json::parse(in);
}

const engine::SamplingParams kGreedy{.temperature = 0.0f};

int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// RS_TEST_BACKEND=cuda runs the goldens on the GPU (tools/device_test_cuda.sh); CPU otherwise.
engine::EngineConfig test_config() {
  engine::EngineConfig config;
  if (const char* backend = std::getenv("RS_TEST_BACKEND")) config.backend = backend;
  config.num_threads = 2;
  config.exact_f32 = true;
  config.kv_cache_gb = 0.02;
  config.context_length = 1024;
  return config;
}

// `serve`'s scheduler stepped on this thread, prompts prefilled `chunk` tokens at a time, up to `running` requests
// in one batch; every sampled row's logits kept.
std::unique_ptr<serving::Driver> make_driver(const fs::path& dir, const engine::EngineConfig& config, int chunk,
                                             int running = 2) {
  sched::SchedulerConfig scheduler;
  scheduler.max_running_requests = running;
  scheduler.chunked_prefill_size = std::min(chunk, 512);
  scheduler.max_prefill_tokens = 512;
  return std::make_unique<serving::Driver>(dir.string(), config, scheduler,
                                           serving::DriverOptions{.keep_logits = true});
}

struct CaseResult {
  float max_logit_diff = 0;
  int greedy_matched = 0;
  int ambiguous_divergences = 0;
};

// A case's greedy request, compared with transformers: the logits of the last prompt position, then each token while
// they agree (the first divergence ends the comparison: it must come at a reference near-tie).
CaseResult compare_case(const serving::Completion& got, const json& c, float ambiguous_margin) {
  const auto expected_logits = c["last_logits"].get<std::vector<float>>();
  const auto expected = c["greedy_ids"].get<std::vector<int32_t>>();
  const auto margins = c["greedy_margins"].get<std::vector<float>>();
  CaseResult result;
  EXPECT_EQ(got.finish_reason, sched::FinishReason::kLength) << got.error;
  EXPECT_EQ(got.tokens.size(), expected.size());
  EXPECT_EQ(got.logits.size(), got.tokens.size());
  if (got.logits.empty()) return result;
  EXPECT_EQ(got.logits[0].size(), expected_logits.size());
  for (size_t i = 0; i < std::min(got.logits[0].size(), expected_logits.size()); ++i)
    result.max_logit_diff = std::max(result.max_logit_diff, std::abs(got.logits[0][i] - expected_logits[i]));
  for (size_t step = 0; step < std::min({expected.size(), got.tokens.size(), got.logits.size()}); ++step) {
    const int32_t token = got.tokens[step];
    EXPECT_EQ(token, argmax(got.logits[step])) << "greedy sampling picked another token than its logits' maximum";
    if (token != expected[step]) {
      // A near-tie in the reference may legitimately flip; anything else is a failure.
      EXPECT_LT(margins[step], ambiguous_margin) << "greedy token " << step << ": got " << token << ", HF "
                                                 << expected[step] << " (margin " << margins[step] << ")";
      if (margins[step] < ambiguous_margin) ++result.ambiguous_divergences;
      break;
    }
    ++result.greedy_matched;
  }
  return result;
}

// The case alone in the driver.
CaseResult run_case(serving::Driver& driver, const json& c, float ambiguous_margin = kAmbiguousMargin) {
  const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
  const int32_t steps = static_cast<int32_t>(c["greedy_ids"].size());
  return compare_case(driver.generate(prompt, kGreedy, steps), c, ambiguous_margin);
}

void report(const std::string& what, const json& c, const CaseResult& r) {
  std::printf("[%s] prompt %zu tokens: max |logit diff| %.2e, greedy %d/%zu identical%s\n", what.c_str(),
              c["prompt_ids"].size(), r.max_logit_diff, r.greedy_matched, c["greedy_ids"].size(),
              r.ambiguous_divergences ? " (then a near-tie divergence, tolerated)" : "");
}

class GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, MatchesTransformers) {
  const fs::path dir = fixture(GetParam());
  if (!fs::exists(dir / "golden.json"))  // the hybrid fixtures come from tools/make_goldens_hybrid.py (GPU machine)
    GTEST_SKIP() << GetParam() << ": no fixture yet; generate it with tools/make_goldens_hybrid.py";
  const json ref = golden(dir);
  const auto check = [&](const CaseResult& r) {
    EXPECT_LT(r.max_logit_diff, kLogitTolerance);
    EXPECT_GE(r.greedy_matched + (r.ambiguous_divergences ? 32 : 0), 24);
  };
  // One request at a time: the whole prompt in one step, then in 7-token chunks.
  for (int chunk : {512, 7}) {
    auto driver = make_driver(dir, test_config(), chunk);
    for (const auto& c : ref["cases"]) {
      const CaseResult r = run_case(*driver, c);
      report(fmt::format("{}, {}", GetParam(), chunk == 7 ? "chunks of 7" : "whole prompt"), c, r);
      check(r);
    }
  }
  // Every case twice at once (chunks of 7 beside the others' decode tokens), then every case again: the second round
  // prefills only what the radix cache does not hold.
  const size_t cases = ref["cases"].size();
  engine::EngineConfig config = test_config();
  // Hybrid models: room for every request's prompt snapshot beside the running states (the least recently used
  // snapshot goes first when slots run short, and the test wants every prompt's).
  config.num_state_slots = static_cast<int32_t>(8 * cases);
  auto driver = make_driver(dir, config, 7, static_cast<int>(2 * cases));
  for (const char* round : {"batched", "from the prefix cache"}) {
    std::vector<size_t> ids;
    for (int copy = 0; copy < (round[0] == 'b' ? 2 : 1); ++copy)
      for (const auto& c : ref["cases"])
        ids.push_back(driver->submit(c["prompt_ids"].get<std::vector<int32_t>>(), kGreedy,
                                     static_cast<int32_t>(c["greedy_ids"].size())));
    driver->run();
    for (size_t i = 0; i < ids.size(); ++i) {
      const json& c = ref["cases"][i % cases];
      const serving::Completion& got = driver->result(ids[i]);
      const CaseResult r = compare_case(got, c, kAmbiguousMargin);
      report(fmt::format("{}, {} ({} cached tokens)", GetParam(), round, got.cached_tokens), c, r);
      check(r);
      if (round[0] == 'f') {
        EXPECT_GT(got.cached_tokens, 0) << "the second round reuses the first's prompt pages";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, GoldenTest,
                         ::testing::Values("llama", "llama_bf16", "qwen3", "qwen3_moe", "gpt_oss", "gpt_oss_mxfp4",
                                           "qwen3_next", "qwen3_5", "qwen3_5_moe"));

// The gpt-oss goldens must exercise the window and the sinks: without either, our logits move far from HF's.
fs::path copy_fixture(const std::string& name, const std::string& tag) {
  fs::path dst = fs::temp_directory_path() / ("rs_golden_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(dst);
  fs::copy(fixture(name), dst, fs::copy_options::recursive);
  return dst;
}

float last_logit_diff(const fs::path& dir, const json& ref) {
  const auto& c = ref["cases"][0];
  const std::vector<float> logits = make_driver(dir, test_config(), 512)
                                        ->generate(c["prompt_ids"].get<std::vector<int32_t>>(), kGreedy, 1)
                                        .logits.at(0);
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
      loader::CheckpointFile file(no_sinks / "model.safetensors");
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

// A bf16 KV cache (attention in bf16 products, the rest exact f32) stays close to transformers' fp32 logits, and greedy
// continuations still follow transformers' (near-ties aside).
TEST(GoldenBf16KvCache, StaysCloseToTransformers) {
  for (const std::string name : {"qwen3", "gpt_oss"}) {
    const fs::path dir = fixture(name);
    const json ref = golden(dir);
    engine::EngineConfig config = test_config();
    config.kv_cache_dtype = engine::KvCacheDtype::kBf16;
    auto driver = make_driver(dir, config, 7);
    ASSERT_EQ(driver->engine().kv_pool().config().dtype, DType::kBF16);
    for (const auto& c : ref["cases"]) {
      const CaseResult r = run_case(*driver, c, kBf16KvAmbiguousMargin);
      report(name + ", bf16 KV", c, r);
      EXPECT_LT(r.max_logit_diff, kBf16KvLogitTolerance) << name;
    }
  }
}

// An fp8 KV cache (per-tensor scale 1, as without checkpoint scales): the logits against transformers' fp32 ones and
// against the bf16 cache's, and greedy continuations that follow transformers' but for near-ties.
TEST(GoldenFp8KvCache, StaysCloseToTransformersAndToTheBf16Cache) {
  for (const std::string name : {"qwen3", "gpt_oss", "llama"}) {
    const fs::path dir = fixture(name);
    const json ref = golden(dir);
    engine::EngineConfig config = test_config();
    config.kv_cache_dtype = engine::KvCacheDtype::kFp8E4M3;
    auto fp8 = make_driver(dir, config, 7);
    ASSERT_EQ(fp8->engine().kv_pool().config().dtype, DType::kF8E4M3);
    config.kv_cache_dtype = engine::KvCacheDtype::kBf16;
    auto bf16 = make_driver(dir, config, 7);
    for (const auto& c : ref["cases"]) {
      const CaseResult r = run_case(*fp8, c, kFp8KvAmbiguousMargin);
      const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
      const std::vector<float> fp8_logits = fp8->generate(prompt, kGreedy, 1).logits.at(0);
      const std::vector<float> bf16_logits = bf16->generate(prompt, kGreedy, 1).logits.at(0);
      ASSERT_EQ(fp8_logits.size(), bf16_logits.size());
      float vs_bf16 = 0.0f;
      for (size_t i = 0; i < fp8_logits.size(); ++i)
        vs_bf16 = std::max(vs_bf16, std::abs(fp8_logits[i] - bf16_logits[i]));
      std::printf(
          "[%s, fp8 KV] prompt %zu tokens: max |logit diff| %.2e vs transformers, %.2e vs the bf16 cache, "
          "greedy %d/%zu identical%s\n",
          name.c_str(), prompt.size(), r.max_logit_diff, vs_bf16, r.greedy_matched, c["greedy_ids"].size(),
          r.ambiguous_divergences ? " (then a near-tie divergence, tolerated)" : "");
      EXPECT_LT(r.max_logit_diff, kFp8KvLogitTolerance) << name;
      EXPECT_LT(vs_bf16, kFp8KvLogitTolerance) << name;
    }
  }
}

// Writes F32 scalars as one safetensors file (header length, JSON header, little-endian data).
void write_scalars(const fs::path& path, const std::vector<std::pair<std::string, float>>& values) {
  json header = json::object();
  std::string data;
  for (const auto& [name, value] : values) {
    header[name] = {{"dtype", "F32"}, {"shape", json::array()}, {"data_offsets", {data.size(), data.size() + 4}}};
    data.append(reinterpret_cast<const char*>(&value), 4);
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t length = text.size();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&length), 8);
  out << text << data;
}

// A checkpoint's k_scale / v_scale (compressed-tensors names on some layers, ModelOpt's on others) become the fp8
// cache's per-layer scales; a checkpoint giving only one of the two is refused with the tensor's name.
TEST(GoldenFp8KvCache, UsesTheCheckpointsScales) {
  const fs::path dir = copy_fixture("qwen3", "kvscales");
  fs::rename(dir / "model.safetensors", dir / "model-00001-of-00002.safetensors");
  const int layers = json::parse(std::ifstream(dir / "config.json"))["num_hidden_layers"].get<int>();
  std::vector<std::pair<std::string, float>> scales;
  for (int layer = 0; layer < layers; ++layer) {
    const std::string p = "model.layers." + std::to_string(layer) + ".self_attn.";
    const float k = 0.05f * static_cast<float>(layer + 1), v = 0.02f * static_cast<float>(layer + 1);
    if (layer % 2 == 0) {
      scales.insert(scales.end(), {{p + "k_scale", k}, {p + "v_scale", v}});
    } else {
      scales.insert(scales.end(), {{p + "k_proj.k_scale", k}, {p + "v_proj.v_scale", v}});
    }
  }
  write_scalars(dir / "model-00002-of-00002.safetensors", scales);
  engine::EngineConfig config = test_config();
  config.kv_cache_dtype = engine::KvCacheDtype::kFp8E4M3;
  {
    auto driver = make_driver(dir, config, 7);
    for (int layer = 0; layer < layers; ++layer) {
      EXPECT_FLOAT_EQ(driver->engine().kv_pool().cache(layer).k_scale, 0.05f * static_cast<float>(layer + 1));
      EXPECT_FLOAT_EQ(driver->engine().kv_pool().cache(layer).v_scale, 0.02f * static_cast<float>(layer + 1));
    }
    const json ref = golden(fixture("qwen3"));
    const CaseResult r = run_case(*driver, ref["cases"][0], kFp8KvAmbiguousMargin);
    std::printf("[qwen3, fp8 KV, checkpoint scales] max |logit diff| %.2e vs transformers, greedy %d identical\n",
                r.max_logit_diff, r.greedy_matched);
    EXPECT_LT(r.max_logit_diff, kFp8KvLogitTolerance);
  }
  scales.pop_back();  // the last layer's v scale goes missing
  write_scalars(dir / "model-00002-of-00002.safetensors", scales);
  try {
    engine::Engine engine(dir, config);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gives a k scale but no v scale"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

// Embeddings (tools/make_embedding_fixture.py): the qwen3 fixture laid out as Qwen3-Embedding ships (a
// sentence-transformers folder: last-token pooling, normalised; tensors without the "model." prefix, no LM head),
// against transformers' final-normed hidden state solved from its golden logits. The same through --task embed on
// the generative fixture, batched, and from the prefix cache; generation and embedding requests are refused by the
// other kind of model.
constexpr float kEmbeddingTolerance = 1e-4f;  // unit vectors; f32 vs f32 (seen: ~1e-6)

std::unique_ptr<sched::Request> embed_request(const json& c) {
  auto request = std::make_unique<sched::Request>();
  request->prompt_ids = c["prompt_ids"].get<std::vector<int32_t>>();
  request->embed = true;
  return request;
}

float embedding_diff(const std::vector<float>& got, const json& c) {
  const auto want = c["embedding"].get<std::vector<float>>();
  EXPECT_EQ(got.size(), want.size());
  float diff = got.size() == want.size() ? 0.0f : 1.0f;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) diff = std::max(diff, std::abs(got[i] - want[i]));
  return diff;
}

TEST(GoldenEmbedding, LastTokenPoolingMatchesTransformers) {
  const json ref = json::parse(std::ifstream(fixture("qwen3_embedding") / "reference.json"));
  engine::EngineConfig as_generator = test_config();
  as_generator.task = "embed";
  for (const auto& [dir, config, what] :
       {std::tuple{fixture("qwen3_embedding"), test_config(), "sentence-transformers folder"},
        std::tuple{fixture("qwen3"), as_generator, "--task embed on the generative fixture"}}) {
    auto driver = make_driver(dir, config, 7, 4);
    ASSERT_TRUE(driver->engine().model_config().embedding) << what;
    for (const char* round : {"one at a time", "batched", "from the prefix cache"}) {
      std::vector<size_t> ids;
      for (const auto& c : ref["cases"]) {
        ids.push_back(driver->submit(embed_request(c)));
        if (round[0] == 'o') driver->run();
      }
      driver->run();
      for (size_t i = 0; i < ids.size(); ++i) {
        const serving::Completion& got = driver->result(ids[i]);
        EXPECT_EQ(got.finish_reason, sched::FinishReason::kStop) << got.error;
        EXPECT_TRUE(got.tokens.empty());
        const float diff = embedding_diff(got.embedding, ref["cases"][i]);
        std::printf("[qwen3 embedding, %s, %s] prompt %zu tokens (%d cached): max |diff| %.2e\n", what, round,
                    ref["cases"][i]["prompt_ids"].size(), got.cached_tokens, diff);
        EXPECT_LT(diff, kEmbeddingTolerance) << what << ", " << round;
        if (round[0] == 'f') {
          EXPECT_GT(got.cached_tokens, 0);
        }
      }
    }
    // A generation request is refused with the reason; the driver goes on.
    const serving::Completion& refused = driver->generate({5, 6, 7}, kGreedy, 4);
    EXPECT_EQ(refused.finish_reason, sched::FinishReason::kError);
    EXPECT_NE(refused.error.find("serves embeddings only"), std::string::npos) << refused.error;
  }
  // A generative model refuses embedding requests.
  auto generator = make_driver(fixture("qwen3"), test_config(), 512);
  EXPECT_FALSE(generator->engine().model_config().embedding);
  const size_t id = generator->submit(embed_request(ref["cases"][0]));
  generator->run();
  EXPECT_EQ(generator->result(id).finish_reason, sched::FinishReason::kError);
  EXPECT_NE(generator->result(id).error.find("--task embed"), std::string::npos) << generator->result(id).error;
}

// A base-model architecture (Qwen3Model) is an embedding model too; --task generate on it needs an LM head.
TEST(GoldenEmbedding, BaseModelArchitectureIsDetected) {
  const fs::path dir = fs::temp_directory_path() / ("rs_golden_basemodel_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(fixture("qwen3_embedding") / "model.safetensors", dir / "model.safetensors");
  json config = json::parse(std::ifstream(fixture("qwen3_embedding") / "config.json"));
  config["architectures"] = {"Qwen3Model"};
  std::ofstream(dir / "config.json") << config.dump();
  const json ref = json::parse(std::ifstream(fixture("qwen3_embedding") / "reference.json"));
  {
    auto driver = make_driver(dir, test_config(), 512);
    ASSERT_TRUE(driver->engine().model_config().embedding);
    const size_t id = driver->submit(embed_request(ref["cases"][1]));
    driver->run();
    EXPECT_LT(embedding_diff(driver->result(id).embedding, ref["cases"][1]), kEmbeddingTolerance);
  }
  engine::EngineConfig generate = test_config();
  generate.task = "generate";
  try {
    engine::Engine engine(dir, generate);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--task embed"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(GoldenBf16KvCache, AutoFollowsTheWeightsUnlessExact) {
  using engine::KvCacheDtype;
  auto dtype_of = [](const std::string& fixture_name, bool exact, KvCacheDtype kv) {
    engine::EngineConfig config = test_config();
    config.exact_f32 = exact;
    config.kv_cache_dtype = kv;
    engine::Engine engine(fixture(fixture_name), config);
    return engine.kv_pool().config().dtype;
  };
  EXPECT_EQ(dtype_of("llama_bf16", false, KvCacheDtype::kAuto), DType::kBF16);
  EXPECT_EQ(dtype_of("llama_bf16", true, KvCacheDtype::kAuto), DType::kF32);  // exact mode keeps reference numerics
  EXPECT_EQ(dtype_of("llama", false, KvCacheDtype::kAuto), DType::kF32);      // f32 checkpoint
  EXPECT_EQ(dtype_of("llama", true, KvCacheDtype::kBf16), DType::kBF16);      // explicit choice wins
  EXPECT_EQ(dtype_of("llama_bf16", false, KvCacheDtype::kF32), DType::kF32);
  EXPECT_EQ(dtype_of("llama", true, KvCacheDtype::kFp8E4M3), DType::kF8E4M3);
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

namespace rs {
namespace {

// The bundled demo model (models/radixserve-demo) against its transformers greedy continuations, in exact f32 mode
// and in the default bf16-GEMM mode (where only a near-tie may flip a token).
struct DemoResult {
  int identical_prompts = 0;
  int prompts = 0;
};

DemoResult run_demo(bool exact) {
  const fs::path dir = fs::path(RS_SOURCE_DIR) / "models/radixserve-demo";
  const json ref = json::parse(std::ifstream(dir / "reference_greedy.json"));
  engine::EngineConfig config = test_config();
  config.exact_f32 = exact;
  auto driver = make_driver(dir, config, 512);
  const auto eos = ref["eos_token_id"].get<std::vector<int32_t>>();
  DemoResult result;
  for (const auto& p : ref["prompts"]) {
    const auto prompt = p["prompt_ids"].get<std::vector<int32_t>>();
    const auto expected = p["completion_ids"].get<std::vector<int32_t>>();
    const auto margins = p["top1_top2_margin"].get<std::vector<float>>();
    // The reference stops at an end-of-sequence token (which it includes), as the request does.
    const serving::Completion& got = driver->generate(prompt, kGreedy, static_cast<int32_t>(expected.size()), eos);
    size_t matched = 0;
    for (; matched < std::min(expected.size(), got.tokens.size()); ++matched) {
      if (got.tokens[matched] != expected[matched]) {
        // bf16 activations may flip a near-tie; exact mode may not flip anything but a sub-1e-3 tie.
        EXPECT_LT(margins[matched], exact ? kAmbiguousMargin : 0.05f)
            << p["name"] << " step " << matched << ": got " << got.tokens[matched] << ", HF " << expected[matched];
        break;
      }
    }
    std::printf("[demo %s] %s: %zu/%zu greedy tokens identical\n", exact ? "f32" : "bf16",
                p["name"].get<std::string>().c_str(), matched, expected.size());
    result.identical_prompts += matched == expected.size();
    ++result.prompts;
  }
  return result;
}

TEST(GoldenDemoModel, GreedyMatchesTransformersExactF32) {
  DemoResult r = run_demo(/*exact=*/true);
  EXPECT_EQ(r.identical_prompts, r.prompts);
}

TEST(GoldenDemoModel, GreedyMatchesTransformersBf16Gemm) {
  DemoResult r = run_demo(/*exact=*/false);
  EXPECT_GE(r.identical_prompts, r.prompts - 1);
}

}  // namespace
}  // namespace rs
