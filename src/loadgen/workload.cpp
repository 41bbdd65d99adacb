#include "loadgen/workload.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "base/error.h"

namespace rs::loadgen {
namespace {

// Common one-token words in most BPE vocabularies, so that a text prompt of N words is close to N tokens.
constexpr const char* kWords[] = {
    "the",   "of",     "and",   "to",    "in",    "is",     "you",     "that",   "it",     "he",    "was",   "for",
    "on",    "are",    "as",    "with",  "his",   "they",   "at",      "be",     "this",   "have",  "from",  "or",
    "one",   "had",    "by",    "word",  "but",   "not",    "what",    "all",    "were",   "we",    "when",  "your",
    "can",   "said",   "there", "use",   "an",    "each",   "which",   "she",    "do",     "how",   "their", "if",
    "will",  "up",     "other", "about", "out",   "many",   "then",    "them",   "these",  "so",    "some",  "her",
    "would", "make",   "like",  "him",   "into",  "time",   "has",     "look",   "two",    "more",  "write", "go",
    "see",   "number", "no",    "way",   "could", "people", "my",      "than",   "first",  "water", "been",  "call",
    "who",   "oil",    "its",   "now",   "find",  "long",   "down",    "day",    "did",    "get",   "come",  "made",
    "may",   "part",   "over",  "new",   "sound", "take",   "only",    "little", "work",   "know",  "place", "year",
    "live",  "me",     "back",  "give",  "most",  "very",   "after",   "thing",  "our",    "just",  "name",  "good",
    "man",   "think",  "say",   "great", "where", "help",   "through", "much",   "before", "line"};
constexpr int32_t kNumWords = static_cast<int32_t>(sizeof(kWords) / sizeof(kWords[0]));

struct Piece {
  std::vector<int32_t> ids;
  std::string text;
};

Piece random_piece(const WorkloadConfig& config, int32_t length, std::mt19937_64& rng) {
  Piece piece;
  if (config.format == PromptFormat::kTokenIds) {
    std::uniform_int_distribution<int32_t> token(0, config.vocab_size - 1);
    piece.ids.resize(length);
    for (int32_t& id : piece.ids) id = token(rng);
  } else {
    std::uniform_int_distribution<int32_t> word(0, kNumWords - 1);
    for (int32_t i = 0; i < length; ++i) {
      if (!piece.text.empty()) piece.text += ' ';
      piece.text += kWords[word(rng)];
    }
  }
  return piece;
}

}  // namespace

int32_t draw_length(int32_t len, double range_ratio, double uniform01) {
  const auto low = std::max<int32_t>(1, static_cast<int32_t>(std::lround(len * (1.0 - range_ratio))));
  if (low >= len) return std::max<int32_t>(1, len);
  return low + std::min<int32_t>(len - low, static_cast<int32_t>(uniform01 * (len - low + 1)));
}

std::vector<Prompt> make_prompts(const WorkloadConfig& config) {
  RS_CHECK(config.vocab_size > 0, "vocab size must be positive");
  RS_CHECK(config.range_ratio >= 0 && config.range_ratio <= 1, "range ratio must be in [0, 1]");
  std::mt19937_64 rng(config.seed);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  const bool shared = config.shared_prefix_len > 0 && config.num_prefixes > 0;
  std::vector<Piece> prefixes;
  if (shared)
    for (int32_t k = 0; k < config.num_prefixes; ++k)
      prefixes.push_back(random_piece(config, config.shared_prefix_len, rng));
  std::vector<Prompt> prompts(config.num_prompts);
  for (int32_t i = 0; i < config.num_prompts; ++i) {
    Prompt& p = prompts[i];
    const int32_t unique_len = draw_length(config.input_len, config.range_ratio, uniform(rng));
    const Piece unique = random_piece(config, unique_len, rng);
    p.output_len = draw_length(config.output_len, config.range_ratio, uniform(rng));
    if (shared) {
      p.prefix_index = i % config.num_prefixes;
      p.prefix_len = config.shared_prefix_len;
      const Piece& prefix = prefixes[p.prefix_index];
      p.token_ids = prefix.ids;
      p.text = prefix.text;
      if (!p.text.empty() && !unique.text.empty()) p.text += ' ';
    }
    p.token_ids.insert(p.token_ids.end(), unique.ids.begin(), unique.ids.end());
    p.text += unique.text;
    p.input_len = p.prefix_len + unique_len;
  }
  return prompts;
}

std::vector<double> poisson_arrivals(int32_t count, double rate, uint64_t seed) {
  RS_CHECK(rate > 0, "request rate must be positive");
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate);
  std::vector<double> times(count);
  double t = 0;
  for (double& time : times) time = t += gap(rng);
  return times;
}

}  // namespace rs::loadgen
