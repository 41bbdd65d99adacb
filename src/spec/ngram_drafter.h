// NgramDrafter: prompt-lookup drafting. The last n tokens of a sequence are looked up earlier in the same sequence
// (prompt and output), and the tokens that followed the most recent, longest match are the draft. No model, no
// state: strong where outputs quote their inputs (code edits, RAG answers, summaries).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "spec/drafter.h"

namespace rs::spec {

// The draft for `tokens`: up to max_tokens tokens following an earlier occurrence of the longest suffix of length n
// in [min_n, max_n] (one backward scan), preferring occurrences that offer a full draft, then recent ones. Empty when
// no suffix of min_n tokens occurs earlier.
std::vector<int32_t> ngram_draft(std::span<const int32_t> tokens, int32_t max_tokens, int32_t min_n, int32_t max_n);

class NgramDrafter final : public Drafter {
 public:
  NgramDrafter(int32_t min_n, int32_t max_n);
  void propose(std::span<DraftRequest> requests) override;

 private:
  int32_t min_n_, max_n_;
};

}  // namespace rs::spec
