// SentencePiece-style BPE (Llama 2 / Mistral / Gemma shape) on hand-made fixtures; expected ids
// and texts come from HF tokenizers 0.23.2 on the same files.
#include <gtest/gtest.h>

#include "tokenizer/test_fixtures.h"
#include "tokenizer/tokenizer.h"

namespace rs::tokenizer {
namespace {

using Ids = std::vector<int32_t>;
using testing::fixture_config;
using testing::fixture_json;
using testing::load_fixture;

TEST(SentencePiece, PrependReplaceByteFallback) {
  const Tokenizer tok = load_fixture("sentencepiece");
  EXPECT_EQ(tok.encode("Hello world", true), (Ids{1, 276, 281}));
  EXPECT_EQ(tok.encode("Hello world", false), (Ids{276, 281}));
  EXPECT_EQ(tok.encode("Hello \u4f60\u597d", true), (Ids{1, 276, 259, 271, 232, 168, 192}));
  EXPECT_EQ(tok.encode("<s>Hello", true), (Ids{1, 1, 276}));  // each section gets its own "▁"
  EXPECT_EQ(tok.encode(" the", true), (Ids{1, 259, 284}));
  EXPECT_EQ(tok.encode("Hello  world", true), (Ids{1, 276, 259, 281}));
  EXPECT_EQ(tok.encode("\u00e9", true), (Ids{1, 259, 198, 172}));
  EXPECT_EQ(tok.encode("a</s>b", true), (Ids{1, 259, 270, 2, 259, 101}));
  EXPECT_EQ(tok.bos_token(), "<s>");  // given as an AddedToken object in tokenizer_config.json
}

TEST(SentencePiece, DecodeStripsOneLeadingSpace) {
  const Tokenizer tok = load_fixture("sentencepiece");
  EXPECT_EQ(tok.decode(Ids{1, 276, 281}, false), "<s> Hello world");
  EXPECT_EQ(tok.decode(Ids{1, 276, 281}, true), "Hello world");
  EXPECT_EQ(tok.decode(Ids{1, 259, 284}, true), " the");
  EXPECT_EQ(tok.decode(Ids{1, 259, 270, 2, 259, 101}, false), "<s> a</s> b");
  EXPECT_EQ(tok.decode(Ids{1, 272, 275}, false), "<s>ll Hell");
  EXPECT_EQ(tok.decode(Ids{259, 259, 275}, false), "  Hell");
  EXPECT_EQ(tok.decode(Ids{0, 0, 272}, false), "<unk><unk>ll");
}

TEST(SentencePiece, ByteFallbackRunsDecodeWhole) {
  const Tokenizer tok = load_fixture("sentencepiece");
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(tok.decode(Ids{231, 192, 163}, false), "\u4f60");
  EXPECT_EQ(tok.decode(Ids{231, 192}, false), fffd + fffd);  // invalid run: one U+FFFD per byte
  EXPECT_EQ(tok.decode(Ids{231, 272, 163}, false), fffd + "ll" + fffd);
}

TEST(SentencePiece, MetaspacePrependFirstAndFusedUnk) {
  const Tokenizer tok = load_fixture("metaspace");
  EXPECT_EQ(tok.encode("Hello world", true), (Ids{1, 276, 281}));
  EXPECT_EQ(tok.encode("<s>Hello", true), (Ids{1, 1, 260, 274, 263}));  // not at the start
  EXPECT_EQ(tok.encode("Hello \u597d\u597dx", true), (Ids{1, 276, 259, 0}));
  EXPECT_EQ(tok.encode("\u597d", true), (Ids{1, 259, 0}));
  EXPECT_EQ(tok.encode("  the", true), (Ids{1, 259, 284}));
  EXPECT_EQ(tok.decode(Ids{1, 276, 281}, false), "<s> Hello world");
  EXPECT_EQ(tok.decode(Ids{1, 276, 259, 0}, true), "Hello ");
  EXPECT_EQ(tok.decode(Ids{259, 272}, false), "ll");  // the first token loses its "▁"
  EXPECT_EQ(tok.decode(Ids{272, 259, 275}, false), "ll  Hell");
}

TEST(SentencePiece, LlamaTokenizerFastRebuildsTheTemplate) {
  // transformers' LlamaTokenizerFast replaces the post-processor by [bos] $A [eos] from
  // add_bos_token / add_eos_token.
  nlohmann::json config = fixture_config("sentencepiece");
  config["tokenizer_class"] = "LlamaTokenizerFast";
  config["add_eos_token"] = true;
  const Tokenizer both = Tokenizer::from_json(fixture_json("sentencepiece"), config);
  EXPECT_EQ(both.encode("Hello", true), (Ids{1, 276, 2}));
  config["add_bos_token"] = false;
  const Tokenizer eos_only = Tokenizer::from_json(fixture_json("sentencepiece"), config);
  EXPECT_EQ(eos_only.encode("Hello", true), (Ids{276, 2}));
  EXPECT_EQ(eos_only.encode("Hello", false), (Ids{276}));
}

}  // namespace
}  // namespace rs::tokenizer
