#include "spec/ngram_drafter.h"

#include <algorithm>

#include "base/error.h"

namespace rs::spec {

std::vector<int32_t> ngram_draft(std::span<const int32_t> tokens, int32_t max_tokens, int32_t min_n, int32_t max_n) {
  const int64_t length = static_cast<int64_t>(tokens.size());
  if (max_tokens <= 0 || length < min_n + 1) return {};
  const int32_t last = tokens[length - 1];
  int64_t best_end = -1;  // index of the matched occurrence's last token
  int32_t best_n = 0;
  int64_t best_follow = 0;  // draft tokens that occurrence offers
  // Candidates end at i <= length - 2, so at least one token follows each. Longer matches win; among equally long
  // ones, the one offering a full draft, then the most recent (local repetition predicts best). Inside a run of one
  // token the newest match is followed by a single token, so a full draft must come from further back.
  for (int64_t i = length - 2; i >= 0; --i) {
    if (tokens[i] != last) continue;
    int32_t n = 1;
    while (n < max_n && i - n >= 0 && tokens[i - n] == tokens[length - 1 - n]) ++n;
    const int64_t follow = std::min<int64_t>(length - 1 - i, max_tokens);
    if (n < min_n || n < best_n || (n == best_n && follow <= best_follow)) continue;
    best_n = n;
    best_end = i;
    best_follow = follow;
    if (best_n == max_n && best_follow == max_tokens) break;
  }
  if (best_end < 0) return {};
  const int64_t begin = best_end + 1;
  const int64_t end = std::min<int64_t>(length, begin + max_tokens);
  return {tokens.begin() + begin, tokens.begin() + end};
}

NgramDrafter::NgramDrafter(int32_t min_n, int32_t max_n) : min_n_(min_n), max_n_(max_n) {
  RS_CHECK(min_n_ >= 1 && max_n_ >= min_n_, "n-gram sizes must satisfy 1 <= min ({}) <= max ({})", min_n_, max_n_);
}

void NgramDrafter::propose(std::span<DraftRequest> requests) {
  for (DraftRequest& request : requests)
    request.draft = ngram_draft(request.tokens, request.max_tokens, min_n_, max_n_);
}

}  // namespace rs::spec
