// BatchGrammar (bench_grammar.h): a served request's grammar path, once per sequence of a static batch.
#include "apps/radixserve/bench_grammar.h"

#include <fmt/format.h>
#include <algorithm>
#include <variant>

#include "apps/radixserve/bench_util.h"
#include "base/clock.h"
#include "base/error.h"

namespace rs::app {

BatchGrammar::BatchGrammar(const server::OutputConstraint& constraint, tokenizer::Tokenizer tokenizer,
                           int32_t vocab_size, std::vector<int32_t> stop_ids)
    : tokenizer_(std::move(tokenizer)), vocab_size_(vocab_size), stop_ids_(std::move(stop_ids)) {
  RS_CHECK(tokenizer_.vocab_size() <= vocab_size_, "the tokenizer has {} ids, more than the model's {} logits",
           tokenizer_.vocab_size(), vocab_size_);
  // As serve does: one compiler per tokenizer, built once; the compile is what a request with a new schema pays.
  grammar::GrammarCompiler compiler(grammar::TokenVocab::from_tokenizer(tokenizer_));
  const auto start = Clock::now();
  auto compiled = server::compile_output_constraint(constraint, compiler);
  if (const auto* error = std::get_if<server::ApiError>(&compiled)) RS_CHECK(false, "{}", error->message);
  compiled_ = std::get<0>(std::move(compiled));
  compile_seconds_ = seconds_since(start);
}

void BatchGrammar::reset(int32_t batch_size) {
  matchers_.clear();
  for (int32_t s = 0; s < batch_size; ++s) matchers_.push_back(std::make_unique<grammar::GrammarMatcher>(compiled_));
  masks_.assign(batch_size, std::vector<uint32_t>(grammar::bitmask_words(vocab_size_)));
  output_ids_.assign(batch_size, {});
  complete_.assign(batch_size, 0);
}

std::span<const uint32_t> BatchGrammar::fill_mask(int32_t seq) {
  matchers_[seq]->fill_next_token_bitmask(masks_[seq], stop_ids_);
  return masks_[seq];
}

void BatchGrammar::accept(int32_t seq, int32_t token) {
  if (std::find(stop_ids_.begin(), stop_ids_.end(), token) != stop_ids_.end()) {
    RS_CHECK(matchers_[seq]->can_finish(), "sequence {} sampled stop token {} before its output was complete", seq,
             token);
    complete_[seq] = 1;
    return;
  }
  RS_CHECK(matchers_[seq]->accept_token(token), "sequence {}: token {} does not continue the grammar", seq, token);
  output_ids_[seq].push_back(token);
  complete_[seq] = matchers_[seq]->terminated();
}

int32_t BatchGrammar::num_complete() const {
  return static_cast<int32_t>(std::count(complete_.begin(), complete_.end(), 1));
}

nlohmann::json BatchGrammar::outputs_json() const {
  nlohmann::json outputs = nlohmann::json::array();
  for (size_t s = 0; s < output_ids_.size(); ++s)
    outputs.push_back({{"text", tokenizer_.decode(output_ids_[s], false)},
                       {"tokens", output_ids_[s].size()},
                       {"complete", complete_[s] != 0}});
  return outputs;
}

nlohmann::json grammar_result(const BatchTimings& plain, const BatchTimings& constrained, const BatchGrammar& grammar) {
  // Steps compared: those where every sequence was constrained, at the same step index (so the same KV length) in
  // the plain run.
  std::vector<double> plain_steps, steps, fills, accepts;
  for (size_t i = 0; i < constrained.all_constrained.size() && i < plain.decode_step_seconds.size(); ++i) {
    if (!constrained.all_constrained[i]) continue;
    plain_steps.push_back(plain.decode_step_seconds[i] * 1e3);
    steps.push_back(constrained.decode_step_seconds[i] * 1e3);
    fills.push_back(constrained.mask_fill_seconds[i] * 1e3);
    accepts.push_back(constrained.accept_seconds[i] * 1e3);
  }
  nlohmann::json result = {{"steps_compared", steps.size()},
                           {"complete_sequences", grammar.num_complete()},
                           {"outputs", grammar.outputs_json()}};
  if (steps.empty()) return result;  // every output completed before the second step: nothing to compare
  const double plain_ms = median(plain_steps), step_ms = median(steps);
  double fill_total = 0;
  for (double fill : fills) fill_total += fill;
  result.update({{"plain_step_ms_median", plain_ms},
                 {"constrained_step_ms_median", step_ms},
                 {"overhead_fraction", step_ms / plain_ms - 1},
                 {"mask_fill_ms_median", median(fills)},
                 {"mask_fill_ms_mean", fill_total / fills.size()},
                 {"mask_fill_fraction", median(fills) / plain_ms},
                 {"accept_ms_median", median(accepts)}});
  return result;
}

std::string grammar_table_header() {
  return fmt::format("{:>6} {:>9} {:>14} {:>9} {:>13} {:>14} {:>7} {:>10} {:>6} {:>9}\n", "batch", "plain ms",
                     "constrained ms", "overhead", "mask fill ms", "mask fill mean", "fill %", "accept ms", "steps",
                     "complete");
}

std::string grammar_table_row(int32_t batch, const nlohmann::json& result) {
  const std::string counts = fmt::format("{:>6} {:>9}", result["steps_compared"].get<size_t>(),
                                         fmt::format("{}/{}", result["complete_sequences"].get<int32_t>(), batch));
  if (!result.contains("plain_step_ms_median"))
    return fmt::format("{:>6} {:>9} {:>14} {:>9} {:>13} {:>14} {:>7} {:>10} {}\n", batch, "-", "-", "-", "-", "-", "-",
                       "-", counts);
  return fmt::format("{:>6} {:>9.2f} {:>14.2f} {:>8.1f}% {:>13.3f} {:>14.3f} {:>6.1f}% {:>10.3f} {}\n", batch,
                     result["plain_step_ms_median"].get<double>(), result["constrained_step_ms_median"].get<double>(),
                     100 * result["overhead_fraction"].get<double>(), result["mask_fill_ms_median"].get<double>(),
                     result["mask_fill_ms_mean"].get<double>(), 100 * result["mask_fill_fraction"].get<double>(),
                     result["accept_ms_median"].get<double>(), counts);
}

}  // namespace rs::app
