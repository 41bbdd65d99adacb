// SpeculativeConfig: which drafter proposes tokens and when the scheduler verifies them (serve/generate flags).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace rs::spec {

enum class SpecAlgorithm : uint8_t { kNone, kNgram, kDraft, kEagle3, kDFlash };

// "none" | "ngram" | "draft" | "eagle3" | "dflash"; throws on anything else, naming the choices.
SpecAlgorithm parse_spec_algorithm(std::string_view name);
std::string_view spec_algorithm_name(SpecAlgorithm algorithm);

struct SpeculativeConfig {
  SpecAlgorithm algorithm = SpecAlgorithm::kNone;
  int32_t num_draft_tokens = 4;  // K: tokens proposed (and verified in one target pass) per sequence and step
  // Whether num_draft_tokens was given (--speculative-num-draft-tokens): DFlash drafts its block size - 1 tokens,
  // the default then, and any other given value is an error at start.
  bool num_draft_tokens_given = false;
  // A step verifies drafts only while at most this many sequences decode in it: beyond, decode is compute-bound
  // enough that re-reading the weights for K more rows per sequence no longer pays.
  int32_t max_batch = 16;
  // Per request: after `warmup_verifies` verify passes, drafting stops while the moving acceptance rate (accepted /
  // drafted tokens) is below this, and is tried again `retry_after` output tokens later (content changes: a reply
  // may start quoting its prompt). 0 = never stop.
  double min_accept_rate = 0.2;
  int32_t warmup_verifies = 8;
  int32_t retry_after = 64;
  // ngram (prompt lookup): the longest match of the last n tokens, n in [ngram_min, ngram_max], earlier in the
  // sequence proposes the tokens that followed it.
  int32_t ngram_min = 2;
  int32_t ngram_max = 5;
  // draft: a checkpoint with the target's vocabulary; eagle3: an EAGLE-3 head; dflash: a DFlash drafter
  std::string draft_model_dir;
  double draft_mem_fraction = 0.1;  // draft on a GPU: its KV pool leaves this share of device memory used
  double inject_reject_rate = 0;  // benchmarks: each draft token turned wrong with this probability (RejectionInjector)

  bool enabled() const { return algorithm != SpecAlgorithm::kNone; }
  bool uses_draft_model() const { return algorithm != SpecAlgorithm::kNone && algorithm != SpecAlgorithm::kNgram; }
  // Draft heads read the target's hidden states (the target captures them).
  bool uses_draft_head() const { return algorithm == SpecAlgorithm::kEagle3 || algorithm == SpecAlgorithm::kDFlash; }
};

}  // namespace rs::spec
