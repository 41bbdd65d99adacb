// Host time of one scheduler step with N sequences decoding: admission, the batch's layout (StepBuilder), memory
// reservation and commit, token events. The engine is stubbed (launch is free, sample returns one token per logit
// row), so this is the part of a step that overlap scheduling could hide behind the device's forward (issue 36);
// divide it by a device step's time at the same batch (`bench one-batch`) for overlap's ceiling.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <memory>
#include <random>
#include <vector>

#include "sched/request.h"
#include "sched/scheduler.h"

namespace rs::sched {
namespace {

constexpr int32_t kPageSize = 16;
constexpr int64_t kSteps = 400;  // timed decode steps per run

// A scheduler with `running` requests of `prompt` random tokens, all past their prefill.
struct DecodingScheduler {
  std::vector<std::shared_ptr<TokenStream>> streams;
  size_t rows = 0;  // logit rows of the last launched step
  std::unique_ptr<Scheduler> scheduler;

  DecodingScheduler(int32_t running, int32_t prompt) {
    const int64_t context = prompt + kSteps + 64;
    memory::KvPoolConfig geometry;
    geometry.page_size = kPageSize;
    geometry.groups.push_back(memory::KvGroup{
        .window = 0, .num_pages = int64_t{running} * ((context + kPageSize - 1) / kPageSize) + running});
    SchedulerConfig config;
    config.max_running_requests = running;
    config.max_prefill_tokens = 16384;
    config.chunked_prefill_size = 8192;
    config.context_length = context;
    config.vocab_size = 32000;
    StepFunctions steps{.launch = [this](const engine::ForwardBatch& batch) { rows = batch.logit_rows.size(); },
                        .sample =
                            [this] {
                              engine::StepOutput out;
                              out.tokens.resize(rows);
                              for (size_t r = 0; r < rows; ++r)
                                out.tokens[r].token_id = static_cast<int32_t>(100 + r % 7);
                              return out;
                            }};
    scheduler = std::make_unique<Scheduler>(config, geometry, std::move(steps));
    std::mt19937 random(1234);
    for (int32_t i = 0; i < running; ++i) {
      auto request = std::make_unique<Request>();
      request->id = static_cast<uint64_t>(i + 1);
      for (int32_t t = 0; t < prompt; ++t) request->prompt_ids.push_back(static_cast<int32_t>(random() % 30000 + 1000));
      // Room for the timed steps after the setup's: prefilling every prompt takes that many steps, the first
      // sequences decoding during them.
      const int64_t setup_steps =
          (int64_t{running} * prompt + config.max_prefill_tokens - 1) / config.max_prefill_tokens;
      request->max_new_tokens = static_cast<int32_t>(kSteps + setup_steps + 16);
      request->sampling.temperature = 0.0f;
      request->stream = streams.emplace_back(std::make_shared<TokenStream>());
      scheduler->submit(std::move(request));
    }
    // Prefill every prompt (and the first decode steps): the timed steps decode all of them.
    while (scheduler->stats().num_running < running || rows < static_cast<size_t>(running)) scheduler->step();
    drain();
  }
  // Consumes every stream's events; the tokens they carried.
  int64_t drain() {
    int64_t tokens = 0;
    for (auto& stream : streams)
      while (auto event = stream->events.try_pop()) tokens += static_cast<int64_t>(event->tokens.size());
    return tokens;
  }
};

void BM_SchedulerDecodeStep(benchmark::State& state) {
  const auto running = static_cast<int32_t>(state.range(0));
  DecodingScheduler s(running, static_cast<int32_t>(state.range(1)));
  int64_t steps = 0, tokens = 0;
  for (auto _ : state) {
    s.scheduler->step();
    if (++steps % 32 == 0) {  // the HTTP side consumes events; not part of the scheduler's step
      state.PauseTiming();
      tokens += s.drain();
      state.ResumeTiming();
    }
  }
  tokens += s.drain();
  // Every timed step must have decoded every sequence: a stalled or finished batch would time nothing.
  if (tokens != steps * running)
    state.SkipWithError(fmt::format("{} tokens streamed in {} steps of {} sequences", tokens, steps, running).c_str());
  // Sequence-steps per second of host time: its inverse is the host cost of one sequence in one step.
  state.counters["seq_steps_per_s"] =
      benchmark::Counter(static_cast<double>(running) * static_cast<double>(steps), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SchedulerDecodeStep)
    ->ArgsProduct({{1, 32, 128, 256, 512, 1024}, {512}})
    ->ArgNames({"running", "prompt"})
    ->Iterations(kSteps)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace rs::sched
