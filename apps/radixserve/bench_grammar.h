// BatchGrammar: structured output for `bench one-batch`. Every sequence of a static batch follows one grammar, compiled
// and enforced as a served request's is (server::compile_output_constraint, one GrammarMatcher per sequence, masks
// filled on the CPU as Scheduler::fill_token_bitmasks does and applied by the engine), plus the report of its cost.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "apps/radixserve/batch_bench.h"
#include "grammar/matcher.h"
#include "server/structured_output.h"
#include "tokenizer/tokenizer.h"

namespace rs::app {

class BatchGrammar {
 public:
  // Compiles `constraint` (kJsonSchema or kRegex) for `tokenizer`'s vocabulary; masks span `vocab_size` ids (the
  // model's logit rows). `stop_ids` (the model's EOS) are allowed once an output is complete. Throws rs::Error for an
  // invalid constraint or a tokenizer with more ids than the model has rows.
  BatchGrammar(const server::OutputConstraint& constraint, tokenizer::Tokenizer tokenizer, int32_t vocab_size,
               std::vector<int32_t> stop_ids);

  double compile_seconds() const { return compile_seconds_; }

  // Fresh matchers for `batch_size` sequences; the compiled grammar and its mask cache are kept, as the server's
  // compiler cache keeps them across requests with the same schema.
  void reset(int32_t batch_size);
  // The sequence is still constrained: its output is not complete yet.
  bool active(int32_t seq) const { return !complete_[seq]; }
  // The mask of the sequence's next token (active sequences only); valid until the next call for that sequence.
  std::span<const uint32_t> fill_mask(int32_t seq);
  std::span<const uint32_t> mask(int32_t seq) const { return masks_[seq]; }
  // Feeds an active sequence's sampled token: a stop token, or a token after which the grammar allows nothing more,
  // completes the output (later tokens run unconstrained and are not kept). Throws rs::Error when the grammar refuses
  // the token: the mask did not hold.
  void accept(int32_t seq, int32_t token);

  // The report of a batch: its outputs (text, complete or not) and counts.
  nlohmann::json outputs_json() const;
  int32_t num_complete() const;

 private:
  tokenizer::Tokenizer tokenizer_;
  int32_t vocab_size_;
  std::vector<int32_t> stop_ids_;
  std::shared_ptr<const grammar::CompiledGrammar> compiled_;
  double compile_seconds_ = 0;
  std::vector<std::unique_ptr<grammar::GrammarMatcher>> matchers_;  // [batch]
  std::vector<std::vector<uint32_t>> masks_;                        // [batch][bitmask_words(vocab_size)]
  std::vector<std::vector<int32_t>> output_ids_;                    // [batch] accepted tokens (no stop token)
  std::vector<uint8_t> complete_;                                   // [batch]
};

// The cost of the grammar at one batch size: the plain run's and the constrained run's decode steps compared over the
// constrained run's steps where every sequence was still constrained. A JSON object (medians in ms, fractions of the
// plain step), with the outputs.
nlohmann::json grammar_result(const BatchTimings& plain, const BatchTimings& constrained, const BatchGrammar& grammar);

// One line of the grammar table for `result` (grammar_result); grammar_table_header() names its columns.
std::string grammar_table_header();
std::string grammar_table_row(int32_t batch, const nlohmann::json& result);

}  // namespace rs::app
