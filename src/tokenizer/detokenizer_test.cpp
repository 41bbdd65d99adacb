// Streaming decode: chunks never split a character and always concatenate to decode().
#include "tokenizer/detokenizer.h"

#include <gtest/gtest.h>

#include <random>

#include "base/utf8.h"
#include "tokenizer/test_fixtures.h"
#include "tokenizer/tokenizer.h"

namespace rs::tokenizer {
namespace {

using Ids = std::vector<int32_t>;
using testing::fixture_config;
using testing::fixture_json;
using testing::load_fixture;

std::vector<std::string> chunks_of(const Tokenizer& tok, const Ids& ids, bool skip) {
  Detokenizer detokenizer(tok, skip);
  std::vector<std::string> chunks;
  for (const int32_t id : ids) chunks.push_back(detokenizer.push(id));
  chunks.push_back(detokenizer.flush());
  return chunks;
}

TEST(Detokenizer, ByteLevelHoldsPartialCharacters) {
  const Tokenizer tok = load_fixture("byte_level");
  // "你好" = [E4 BD] [A0] [E5] [A5] [BD]
  EXPECT_EQ(chunks_of(tok, Ids{268, 160, 229, 165, 189}, false),
            (std::vector<std::string>{"", "\u4f60", "", "", "\u597d", ""}));
  // A truncated character at the end comes out of flush() as U+FFFD, as decode() gives it.
  EXPECT_EQ(chunks_of(tok, Ids{104, 268}, false), (std::vector<std::string>{"h", "", "\xEF\xBF\xBD"}));
}

TEST(Detokenizer, SentencePieceLeadingSpaceOnlyOnce) {
  const Tokenizer tok = load_fixture("sentencepiece");
  EXPECT_EQ(chunks_of(tok, Ids{1, 276, 281}, true), (std::vector<std::string>{"", "Hello", " world", ""}));
  EXPECT_EQ(chunks_of(tok, Ids{1, 276, 281}, false), (std::vector<std::string>{"<s>", " Hello", " world", ""}));
  // A byte-fallback run is final only when a non-byte token follows (HF decodes runs whole).
  EXPECT_EQ(chunks_of(tok, Ids{276, 231, 192, 163, 281}, false),
            (std::vector<std::string>{"Hello", "", "", "", "\u4f60 world", ""}));
  EXPECT_EQ(chunks_of(tok, Ids{231, 192}, false), (std::vector<std::string>{"", "", "\xEF\xBF\xBD\xEF\xBF\xBD"}));
}

// Decoder variants: the fixtures plus decoders whose start/end handling is sequence-wide.
std::vector<std::pair<std::string, Tokenizer>> variants() {
  std::vector<std::pair<std::string, Tokenizer>> out;
  for (const std::string name : {"byte_level", "sentencepiece", "metaspace"}) {
    out.emplace_back(name, load_fixture(name));
  }
  const auto patched = [&](const std::string& label, const nlohmann::json& decoder) {
    nlohmann::json json = fixture_json("sentencepiece");
    json["decoder"] = decoder;
    out.emplace_back(label, Tokenizer::from_json(json, fixture_config("sentencepiece")));
  };
  patched("strip both ends", {{"type", "Sequence"},
                              {"decoders",
                               {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                                {{"type", "ByteFallback"}},
                                {{"type", "Fuse"}},
                                {{"type", "Strip"}, {"content", " "}, {"start", 2}, {"stop", 1}}}}});
  patched("no decoder", nullptr);
  patched("metaspace after fuse",
          {{"type", "Sequence"},
           {"decoders",
            {{{"type", "ByteFallback"}},
             {{"type", "Fuse"}},
             {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "always"}}}}});
  patched("replace after fuse", {{"type", "Sequence"},
                                 {"decoders",
                                  {{{"type", "Fuse"}},
                                   {{"type", "Replace"}, {"pattern", {{"String", "\u2581\u2581"}}}, {"content", "_"}},
                                   {{"type", "ByteFallback"}}}}});
  patched("emptying replace before fuse",
          {{"type", "Sequence"},
           {"decoders",
            {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", ""}},
             {{"type", "Fuse"}},
             {{"type", "Strip"}, {"content", "l"}, {"start", 2}, {"stop", 1}},
             {{"type", "ByteFallback"}}}}});
  return out;
}

TEST(Detokenizer, RandomStreamsConcatenateToDecode) {
  std::mt19937 rng(1234);
  for (const auto& [label, tok] : variants()) {
    std::uniform_int_distribution<int32_t> any_id(-2, tok.vocab_size() + 2);
    std::uniform_int_distribution<int32_t> small_id(0, 12);  // specials and byte tokens, often
    std::uniform_int_distribution<int> length(1, 30);
    for (int trial = 0; trial < 400; ++trial) {
      Ids ids(length(rng));
      for (int32_t& id : ids) id = rng() % 3 == 0 ? small_id(rng) * 20 % tok.vocab_size() : any_id(rng);
      for (const bool skip : {false, true}) {
        std::string streamed;
        for (const std::string& chunk : chunks_of(tok, ids, skip)) {
          EXPECT_EQ(utf8::first_invalid(chunk), std::string_view::npos) << label;
          streamed += chunk;
        }
        ASSERT_EQ(streamed, tok.decode(ids, skip)) << label << " ids " << nlohmann::json(ids).dump();
      }
    }
  }
}

}  // namespace
}  // namespace rs::tokenizer
