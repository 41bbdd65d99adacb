// Tokenizer on the byte-level fixture: expected ids come from HF tokenizers 0.23.2 on the same file.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "base/error.h"
#include "tokenizer/test_fixtures.h"

namespace rs::tokenizer {
namespace {

using Ids = std::vector<int32_t>;
using testing::fixture_config;
using testing::fixture_json;
using testing::load_fixture;

TEST(Tokenizer, ByteLevelMatchesHf) {
  const Tokenizer tok = load_fixture("byte_level");
  EXPECT_EQ(tok.encode("hello the", true), (Ids{257, 261, 111, 258}));
  EXPECT_EQ(tok.encode("Hello THE", true), (Ids{257, 261, 111, 258}));  // NFC + Lowercase
  EXPECT_EQ(tok.encode("aaaaaaa", true), (Ids{260, 259, 97}));
  EXPECT_EQ(tok.encode("e\u0301", true), (Ids{195, 169}));  // NFC composes to U+00E9
  EXPECT_EQ(tok.encode("\n\n\n   x", true), (Ids{266, 10, 265, 32, 120}));
  EXPECT_EQ(tok.encode("\u4f60\u597d", true), (Ids{268, 160, 229, 165, 189}));
  EXPECT_EQ(tok.encode(" world", true), (Ids{32, 119, 111, 114, 108, 100}));
  EXPECT_EQ(tok.encode("  hello", true), (Ids{32, 32, 257, 261, 111}));
  EXPECT_TRUE(tok.encode("", true).empty());
}

TEST(Tokenizer, SpecialTokensInTextBecomeControlTokens) {
  const Tokenizer tok = load_fixture("byte_level");
  EXPECT_EQ(tok.encode("hi<|im_end|>there", true), (Ids{104, 105, 270, 116, 257, 114, 101}));
  EXPECT_EQ(tok.decode(Ids{104, 105, 270, 116, 257, 114, 101}, false), "hi<|im_end|>there");
  EXPECT_EQ(tok.decode(Ids{104, 105, 270, 116, 257, 114, 101}, true), "hithere");
  EXPECT_TRUE(tok.is_special(270));
  EXPECT_FALSE(tok.is_special(271));  // <think> is added but not special
  EXPECT_EQ(tok.token_to_id("<think>"), 271);
  EXPECT_EQ(tok.id_to_token(258), "\u0120the");
  EXPECT_EQ(tok.id_to_token(270), "<|im_end|>");
  EXPECT_EQ(tok.id_to_token(99999), "");
  EXPECT_EQ(tok.vocab_size(), 276);
  EXPECT_EQ(tok.eos_token(), "<|im_end|>");
  EXPECT_FALSE(tok.bos_token().has_value());
  EXPECT_EQ(tok.tokenizer_config().at("tokenizer_class"), "Qwen2Tokenizer");
}

TEST(Tokenizer, IgnoreMergesTakesWholePieceFromVocab) {
  nlohmann::json json = fixture_json("byte_level");
  json["model"]["ignore_merges"] = true;
  const Tokenizer tok = Tokenizer::from_json(json, fixture_config("byte_level"));
  EXPECT_EQ(tok.encode(" world", false), (Ids{269}));  // "Ġworld" has no merge path
  EXPECT_EQ(tok.encode("hello the", false), (Ids{264, 258}));
  EXPECT_EQ(tok.decode(Ids{269}, false), " world");
}

TEST(Tokenizer, DecodeIsLossyAndDropsUnknownIds) {
  const Tokenizer tok = load_fixture("byte_level");
  EXPECT_EQ(tok.decode(Ids{268}, false), "\xEF\xBF\xBD");  // first two bytes of a CJK char
  EXPECT_EQ(tok.decode(Ids{104, -1, 5000, 105}, false), "hi");
}

TEST(Tokenizer, TokenBytesAreTheRawBytesBeforeUtf8Repair) {
  const Tokenizer tok = load_fixture("byte_level");
  EXPECT_EQ(tok.token_bytes(268), "\xE4\xBD");  // decodes alone as U+FFFD
  EXPECT_EQ(tok.token_bytes(258), " the");
  EXPECT_EQ(tok.token_bytes(270), "<|im_end|>");  // special
  EXPECT_EQ(tok.token_bytes(271), "<think>");     // added
  EXPECT_EQ(tok.token_bytes(5000), "");
  const Tokenizer sp = load_fixture("sentencepiece");
  EXPECT_EQ(sp.token_bytes(231), "\xE4");  // <0xE4>
  EXPECT_EQ(sp.token_bytes(281), " world");
}

TEST(Tokenizer, RejectsInvalidUtf8Input) {
  const Tokenizer tok = load_fixture("byte_level");
  EXPECT_THROW(tok.encode("ab\xFF", true), rs::Error);
}

TEST(Tokenizer, UnsupportedFeaturesFailAtLoadNamingThem) {
  const auto expect_error = [](const char* pointer, const nlohmann::json& value, const char* words) {
    nlohmann::json json = fixture_json("byte_level");
    json[nlohmann::json::json_pointer(pointer)] = value;
    try {
      (void)Tokenizer::from_json(json, nlohmann::json::object());
      ADD_FAILURE() << "loaded a tokenizer with " << pointer << " = " << value.dump();
    } catch (const rs::Error& error) {
      EXPECT_NE(std::string(error.what()).find(words), std::string::npos) << error.what();
    }
  };
  expect_error("/model/type", "WordPiece", "model type 'WordPiece'");
  expect_error("/model/dropout", 0.1, "BPE dropout");
  expect_error("/normalizer", {{"type", "BertNormalizer"}}, "normalizer type 'BertNormalizer'");
  expect_error("/normalizer", {{"type", "Precompiled"}, {"precompiled_charsmap", "AA=="}},
               "normalizer type 'Precompiled'");
  expect_error("/pre_tokenizer", {{"type", "Whitespace"}}, "pre_tokenizer type 'Whitespace'");
  expect_error("/post_processor", {{"type", "RobertaProcessing"}}, "post_processor type 'RobertaProcessing'");
  expect_error("/decoder", {{"type", "WordPiece"}}, "decoder type 'WordPiece'");
  expect_error("/added_tokens/1/id", 300, "would give it id 271");
  expect_error("/model/merges/0", "Ġ zz", "not in the vocab");
}

TEST(Tokenizer, LongRunsStayLinear) {
  // Guards against quadratic BPE or regex behaviour (a quadratic merge takes minutes here).
  const Tokenizer tok = load_fixture("byte_level");
  for (const std::string unit : {"a", " ", "\n", "7", "!", "\u00e9", "\u4f60"}) {
    std::string text;
    for (int i = 0; i < 100000; ++i) text += unit;
    const auto start = std::chrono::steady_clock::now();
    const Ids ids = tok.encode(text, false);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, 5.0) << "100k x '" << unit << "'";
    EXPECT_EQ(tok.decode(ids, false), text);
  }
  std::string run(100000, 'a');
  EXPECT_EQ(tok.encode(run, false).size(), 25000u);  // aaaa x 25000
}

TEST(Tokenizer, ConcurrentEncodeMatchesSerial) {
  const Tokenizer tok = load_fixture("byte_level");
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i) texts.push_back("hello the " + std::to_string(i * 7919) + " aaaa\n\u4f60");
  std::vector<Ids> serial;
  for (const auto& text : texts) serial.push_back(tok.encode(text, true));
  std::vector<std::thread> threads;
  std::atomic<int> mismatches = 0;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int round = 0; round < 20; ++round) {
        for (std::size_t i = 0; i < texts.size(); ++i) {
          if (tok.encode(texts[i], true) != serial[i]) ++mismatches;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace rs::tokenizer
