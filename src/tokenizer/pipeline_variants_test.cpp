// Less common pipeline pieces (GPT-2 ByteLevel, Split behaviours and invert, Digits, NFKC/Strip/
// Replace normalizers, Metaspace "always", Gemma-style split, unfused unk) on patched fixtures;
// expected ids come from HF tokenizers 0.23.2 on the same JSON.
#include <gtest/gtest.h>

#include "tokenizer/test_fixtures.h"
#include "tokenizer/tokenizer.h"

namespace rs::tokenizer {
namespace {

using Ids = std::vector<int32_t>;
using nlohmann::json;

const json kByteLevelStep = {
    {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};

json split(const json& pattern, const char* behavior, bool invert) {
  return {{"type", "Split"}, {"pattern", pattern}, {"behavior", behavior}, {"invert", invert}};
}

Tokenizer patched(const std::string& fixture, const std::string& key, const json& value) {
  json tokenizer_json = testing::fixture_json(fixture);
  tokenizer_json[key] = value;
  return Tokenizer::from_json(tokenizer_json, json::object());
}

Tokenizer byte_level_with(const json& pre_tokenizer) { return patched("byte_level", "pre_tokenizer", pre_tokenizer); }

json sequence(const std::vector<json>& steps) { return {{"type", "Sequence"}, {"pretokenizers", steps}}; }

TEST(PipelineVariants, Gpt2ByteLevelWithRegexAndPrefixSpace) {
  json tokenizer_json = testing::fixture_json("byte_level");
  tokenizer_json["normalizer"] = nullptr;
  tokenizer_json["pre_tokenizer"] = {
      {"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  const Tokenizer tok = Tokenizer::from_json(tokenizer_json, json::object());
  const Ids ids = tok.encode("Hello  world's 12 ok?\n\n x", true);
  EXPECT_EQ(ids, (Ids{32,  72, 262, 111, 32, 32,  119, 111, 114, 108, 100, 39,
                      115, 32, 49,  50,  32, 111, 107, 63,  266, 32,  120}));
  EXPECT_EQ(tok.decode(ids, false), " Hello  world's 12 ok?\n\n x");
}

TEST(PipelineVariants, SplitBehaviours) {
  EXPECT_EQ(byte_level_with(sequence({split({{"Regex", "\\s+"}}, "MergedWithPrevious", false), kByteLevelStep}))
                .encode("a  b\tc\n d", true),
            (Ids{97, 265, 98, 9, 99, 10, 32, 100}));
  EXPECT_EQ(byte_level_with(sequence({split({{"String", " "}}, "MergedWithNext", false), kByteLevelStep}))
                .encode("a  b c", true),
            (Ids{97, 32, 32, 98, 32, 99}));
  EXPECT_EQ(byte_level_with(sequence({split({{"Regex", "[a-z]"}}, "Contiguous", false),
                                      {{"type", "Digits"}, {"individual_digits", true}},
                                      kByteLevelStep}))
                .encode("ab12 cd3", true),
            (Ids{97, 98, 49, 50, 32, 99, 100, 51}));
  EXPECT_EQ(byte_level_with(sequence({split({{"Regex", "\\p{P}+"}}, "Removed", false), kByteLevelStep}))
                .encode("a,b..c! d", true),
            (Ids{97, 98, 99, 32, 100}));
  EXPECT_EQ(byte_level_with(sequence({split({{"Regex", "\\w+"}}, "Isolated", true),
                                      {{"type", "Digits"}, {"individual_digits", false}},
                                      kByteLevelStep}))
                .encode("ab, cd 123", true),
            (Ids{97, 98, 44, 32, 99, 100, 32, 49, 50, 51}));
}

TEST(PipelineVariants, CompatibilityNormalizers) {
  const Tokenizer tok = patched("byte_level", "normalizer",
                                {{"type", "Sequence"},
                                 {"normalizers",
                                  {{{"type", "NFKC"}},
                                   {{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}},
                                   {{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", " "}},
                                   {{"type", "Lowercase"}}}}});
  EXPECT_EQ(tok.encode("  \uff21\uff22  \uff43  ", true), (Ids{97, 98, 32, 99}));
}

TEST(PipelineVariants, SentencePieceShapes) {
  json always = testing::fixture_json("sentencepiece");
  always["normalizer"] = nullptr;
  always["pre_tokenizer"] = {
      {"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "always"}, {"split", true}};
  EXPECT_EQ(Tokenizer::from_json(always, json::object()).encode("<s>Hello world", true), (Ids{1, 1, 276, 281}));

  json gemma = testing::fixture_json("sentencepiece");
  gemma["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}};
  gemma["pre_tokenizer"] = split({{"String", " "}}, "MergedWithPrevious", false);
  EXPECT_EQ(Tokenizer::from_json(gemma, json::object()).encode("Hello  world", true),
            (Ids{1, 260, 274, 263, 259, 281}));

  json unfused = testing::fixture_json("sentencepiece");
  unfused["model"]["byte_fallback"] = false;
  unfused["model"]["fuse_unk"] = false;
  const Tokenizer tok = Tokenizer::from_json(unfused, json::object());
  EXPECT_EQ(tok.encode("Hello \u597d\u597d", true), (Ids{1, 276, 259, 0, 0}));
  EXPECT_EQ(tok.decode(Ids{1, 276, 259, 0, 0}, false), "<s> Hello <unk><unk>");
}

}  // namespace
}  // namespace rs::tokenizer
