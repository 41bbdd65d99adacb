// Added-token flags (lstrip, rstrip, single_word, normalized) against HF tokenizers 0.23.2.
#include "tokenizer/added_tokens.h"

#include <gtest/gtest.h>

#include "tokenizer/test_fixtures.h"

namespace rs::tokenizer {
namespace {

using Ids = std::vector<int32_t>;
using testing::load_fixture;

TEST(AddedTokens, LstripSwallowsWhitespaceOnTheLeft) {
  const Tokenizer tok = load_fixture("byte_level");
  EXPECT_EQ(tok.encode("x <lm> y", true), (Ids{120, 272, 32, 121}));
  EXPECT_EQ(tok.encode("x  <lm>", true), (Ids{120, 272}));
  EXPECT_EQ(tok.decode(Ids{120, 272, 32, 121}, false), "x<lm> y");
  EXPECT_EQ(tok.decode(Ids{120, 272, 32, 121}, true), "x y");
}

TEST(AddedTokens, RstripSwallowsWhitespaceOnTheRight) {
  const Tokenizer tok = load_fixture("byte_level");
  EXPECT_EQ(tok.encode("x <rm>  y", true), (Ids{120, 32, 273, 121}));
}

TEST(AddedTokens, SingleWordNeedsNonWordNeighbours) {
  const Tokenizer tok = load_fixture("byte_level");
  EXPECT_EQ(tok.encode("a<sw>b", true), (Ids{97, 60, 115, 119, 62, 98}));
  EXPECT_EQ(tok.encode("a <sw> b", true), (Ids{97, 32, 274, 32, 98}));
}

TEST(AddedTokens, NormalizedTokensMatchNormalizedText) {
  const Tokenizer tok = load_fixture("byte_level");  // Lowercase: "<Up>" matches as "<up>"
  EXPECT_EQ(tok.encode("<UP> and <up>", true), (Ids{275, 32, 97, 110, 100, 32, 275}));
}

TEST(AddedTokens, SplitIsLeftmostLongest) {
  Normalizer none = Normalizer::from_json(nullptr);
  AddedVocabulary vocab({{.id = 1, .content = "<a>", .normalized = false},
                         {.id = 2, .content = "<a><b>", .normalized = false},
                         {.id = 3, .content = "b>", .normalized = false}},
                        none);
  std::vector<Segment> segments;
  vocab.split("x<a><b>><a>b>", false, segments);
  std::vector<int32_t> ids;
  for (const Segment& segment : segments) ids.push_back(segment.id);
  EXPECT_EQ(ids, (Ids{-1, 2, -1, 1, 3}));
  EXPECT_EQ(vocab.token_to_id("<a><b>"), 2);
  EXPECT_EQ(vocab.find(3)->content, "b>");
  EXPECT_EQ(vocab.find(4), nullptr);
}

}  // namespace
}  // namespace rs::tokenizer
