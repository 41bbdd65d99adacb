#include "spec/speculative_config.h"

#include "base/error.h"

namespace rs::spec {

SpecAlgorithm parse_spec_algorithm(std::string_view name) {
  if (name == "none" || name.empty()) return SpecAlgorithm::kNone;
  if (name == "ngram") return SpecAlgorithm::kNgram;
  if (name == "draft") return SpecAlgorithm::kDraft;
  if (name == "eagle3") return SpecAlgorithm::kEagle3;
  if (name == "dflash") return SpecAlgorithm::kDFlash;
  RS_FAIL("unknown speculative algorithm '{}' (none, ngram, draft, eagle3, dflash)", name);
}

std::string_view spec_algorithm_name(SpecAlgorithm algorithm) {
  switch (algorithm) {
    case SpecAlgorithm::kNone: return "none";
    case SpecAlgorithm::kNgram: return "ngram";
    case SpecAlgorithm::kDraft: return "draft";
    case SpecAlgorithm::kEagle3: return "eagle3";
    case SpecAlgorithm::kDFlash: return "dflash";
  }
  return "none";
}

}  // namespace rs::spec
