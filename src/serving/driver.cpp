#include "serving/driver.h"

#include "base/clock.h"

namespace rs::serving {
namespace {

StackOptions stack_options(bool keep_logits,
                           std::function<void(const engine::ForwardBatch&, const engine::StepOutput&)> observer) {
  StackOptions options;
  options.scheduler_thread = false;
  if (keep_logits) options.step_observer = std::move(observer);
  return options;
}

}  // namespace

Driver::Driver(const std::string& model_dir, engine::EngineConfig engine_config,
               sched::SchedulerConfig scheduler_config, DriverOptions options)
    : options_(options),
      stack_(model_dir, std::move(engine_config), std::move(scheduler_config),
             stack_options(options.keep_logits,
                           [this](const engine::ForwardBatch& batch, const engine::StepOutput& output) {
                             record_logits(batch, output);
                           })) {}

size_t Driver::submit(std::unique_ptr<sched::Request> request) {
  const size_t index = completions_.size();
  completions_.emplace_back();
  request->id = next_id_++;
  request->stream = std::make_shared<sched::TokenStream>();
  pending_.push_back(Pending{index, request->stream});
  row_owner_[&request->sampling] = index;  // the request object itself moves into the scheduler, not its fields
  RS_CHECK(stack_.scheduler().submit(std::move(request)), "the scheduler refused request {}: its queue is full", index);
  return index;
}

size_t Driver::submit(std::vector<int32_t> prompt, const engine::SamplingParams& sampling, int32_t max_new_tokens,
                      std::vector<int32_t> stop_token_ids) {
  auto request = std::make_unique<sched::Request>();
  request->prompt_ids = std::move(prompt);
  request->sampling = sampling;
  request->max_new_tokens = max_new_tokens;
  request->stop_token_ids = std::move(stop_token_ids);
  return submit(std::move(request));
}

void Driver::run() {
  const auto start = Clock::now();
  int idle_steps = 0;
  while (!pending_.empty()) {
    const bool stepped = stack_.step();
    const size_t finished = collect(seconds_since(start));
    // A step that ran nothing and finished nothing twice in a row means the queue cannot move (the scheduler fails
    // requests it can never admit, so this is a bug, not a user error).
    idle_steps = stepped || finished ? 0 : idle_steps + 1;
    RS_CHECK(idle_steps < 2, "the scheduler stopped making progress with {} requests unfinished", pending_.size());
  }
  row_owner_.clear();
}

const Completion& Driver::generate(std::vector<int32_t> prompt, const engine::SamplingParams& sampling,
                                   int32_t max_new_tokens, std::vector<int32_t> stop_token_ids) {
  const size_t index = submit(std::move(prompt), sampling, max_new_tokens, std::move(stop_token_ids));
  run();
  return result(index);
}

size_t Driver::collect(double elapsed_seconds) {
  size_t finished = 0;
  std::erase_if(pending_, [&](const Pending& pending) {
    Completion& completion = completions_[pending.index];
    bool done = false;
    while (auto event = pending.stream->events.try_pop()) {
      if (completion.tokens.empty() && !event->tokens.empty()) completion.first_token_seconds = elapsed_seconds;
      for (const auto& token : event->tokens) completion.tokens.push_back(token.token_id);
      completion.cached_tokens = std::max(completion.cached_tokens, event->cached_tokens);
      completion.speculative = event->speculative;
      if (!event->embedding.empty()) completion.embedding = std::move(event->embedding);
      if (!event->finished) continue;
      completion.finish_reason = event->finish_reason;
      completion.error = event->error;
      completion.total_seconds = elapsed_seconds;
      done = true;
    }
    finished += done;
    return done;
  });
  return finished;
}

void Driver::record_logits(const engine::ForwardBatch& batch, const engine::StepOutput& output) {
  const size_t rows = batch.logit_rows.size();
  if (rows == 0 || batch.sampling.size() != rows || output.logits.empty()) return;  // (embeddings keep no logits)
  const size_t vocab = output.logits.size() / rows;
  for (size_t row = 0; row < rows; ++row) {
    if (batch.sampling[row].score_target >= 0) continue;  // a scored prompt row samples nothing
    const auto owner = row_owner_.find(batch.sampling[row].params);
    if (owner == row_owner_.end()) continue;
    const float* first = output.logits.data() + row * vocab;
    completions_[owner->second].logits.emplace_back(first, first + vocab);
  }
}

}  // namespace rs::serving
