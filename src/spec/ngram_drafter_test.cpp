#include "spec/ngram_drafter.h"

#include <gtest/gtest.h>

namespace rs::spec {
namespace {

using Ids = std::vector<int32_t>;

TEST(NgramDraft, ProposesWhatFollowedTheLongestMostRecentMatch) {
  // "5 6 7" occurred at the start followed by 8 9 10; the suffix 6 7 matches it (n = 2), and 7 alone also matched
  // later (n = 1, followed by 99): the longer match wins.
  const Ids tokens = {5, 6, 7, 8, 9, 10, 7, 99, 1, 6, 7};
  EXPECT_EQ(ngram_draft(tokens, 3, 1, 4), (Ids{8, 9, 10}));
  EXPECT_EQ(ngram_draft(tokens, 10, 1, 4), (Ids{8, 9, 10, 7, 99, 1, 6, 7}));  // stops at the sequence's end
  EXPECT_EQ(ngram_draft(tokens, 2, 3, 4), Ids{});                             // no 3-token match
}

TEST(NgramDraft, AmongEquallyLongMatchesTheNewestWins) {
  const Ids tokens = {1, 2, 30, 1, 2, 40, 1, 2};
  EXPECT_EQ(ngram_draft(tokens, 1, 2, 2), Ids{40});
}

TEST(NgramDraft, InsideARunAFullDraftComesFromFurtherBack) {
  const Ids tokens = {9, 7, 7, 7, 7, 7, 7};
  EXPECT_EQ(ngram_draft(tokens, 3, 2, 3), (Ids{7, 7, 7}));
  // Between equally long matches a full draft beats recency; a longer match beats both.
  EXPECT_EQ(ngram_draft(Ids{1, 2, 3, 4, 5, 6, 0, 2, 3, 8, 2, 3}, 4, 1, 3), (Ids{4, 5, 6, 0}));
  EXPECT_EQ(ngram_draft(Ids{1, 2, 3, 4, 5, 6, 7, 8, 2, 3, 8, 2, 3}, 4, 1, 3), (Ids{8, 2, 3}));
}

TEST(NgramDraft, ARepeatingSequenceDraftsItsContinuation) {
  Ids tokens;
  for (int rep = 0; rep < 3; ++rep)
    for (int32_t t = 100; t < 110; ++t) tokens.push_back(t);
  tokens.push_back(100);
  tokens.push_back(101);
  EXPECT_EQ(ngram_draft(tokens, 4, 2, 5), (Ids{102, 103, 104, 105}));
}

TEST(NgramDraft, NothingForShortOrUnmatchedSequences) {
  EXPECT_EQ(ngram_draft(Ids{}, 4, 1, 3), Ids{});
  EXPECT_EQ(ngram_draft(Ids{7}, 4, 1, 3), Ids{});
  EXPECT_EQ(ngram_draft(Ids{1, 2, 3, 4}, 4, 1, 3), Ids{});
  EXPECT_EQ(ngram_draft(Ids{1, 1}, 0, 1, 3), Ids{});
  EXPECT_EQ(ngram_draft(Ids{1, 1}, 4, 1, 3), Ids{1});  // the match may run into the suffix itself
}

TEST(NgramDrafter, FillsEveryRequestAndRejectsBadSizes) {
  NgramDrafter drafter(2, 3);
  const Ids a = {1, 2, 3, 1, 2}, b = {4, 5, 6};
  std::vector<DraftRequest> requests = {{.id = 1, .tokens = a, .max_tokens = 2},
                                        {.id = 2, .tokens = b, .max_tokens = 2, .draft = {9}}};
  drafter.propose(requests);
  EXPECT_EQ(requests[0].draft, (Ids{3, 1}));
  EXPECT_EQ(requests[1].draft, Ids{});
  EXPECT_THROW(NgramDrafter(0, 2), std::exception);
  EXPECT_THROW(NgramDrafter(3, 2), std::exception);
}

}  // namespace
}  // namespace rs::spec
