// Request and TokenStream: what the server hands the scheduler, and how tokens flow back to the HTTP thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/channel.h"
#include "base/clock.h"
#include "engine/forward_batch.h"
#include "engine/sampling_params.h"
#include "grammar/matcher.h"
#include "spec/acceptance.h"

namespace rs::sched {

enum class FinishReason : uint8_t { kNone, kStop, kLength, kAbort, kError };

// Who a kError is owed to: the server (500), the request itself (its size, its grammar: 400), or a lack of memory on
// the device for the step it was in (503: the same request may succeed later).
enum class ErrorCause : uint8_t { kServer, kRequest, kOverloaded };

// One scheduler -> HTTP message: tokens produced since the last event, and the end of the request when finished.
struct TokenEvent {
  std::vector<engine::SampledToken> tokens;
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  std::string error;                             // set with kError
  ErrorCause error_cause = ErrorCause::kServer;  // with kError
  int32_t prompt_tokens = 0;                     // filled on the first event
  int32_t cached_tokens = 0;                     // prompt tokens served from the prefix cache
  double queue_seconds = -1;  // first event of an admitted request: seconds from arrival to its first admission
  int32_t choice_index = 0;   // Request::choice_index of the request it belongs to
  // The last token is one of the request's stop tokens: it ends the output and adds no text. (A request also stops,
  // with finish_reason kStop, when its grammar is complete; that last token is output.)
  bool stop_token = false;
  spec::SpecTotals speculative;  // the request's speculative-decoding totals so far (zero without speculation)
  // The first event of a request with prompt logprobs: [position] each prompt token's score (position 0: rank 0, no
  // score: nothing precedes it).
  std::vector<engine::SampledToken> prompt_logprobs;
  // The final event of an embedding request: the prompt's pooled embedding (engine::StepOutput::embeddings).
  std::vector<float> embedding;
};

// Shared by the HTTP handler (consumer) and the scheduler (producer). The consumer may register a waker that every
// push calls (on the scheduler's thread), so that a waiting HTTP connection sleeps instead of polling.
class TokenStream {
 public:
  void push(TokenEvent event) {
    events.push(std::move(event));
    std::function<void()> wake;
    {
      std::lock_guard lock(mutex_);
      wake = wake_;
    }
    if (wake) wake();
  }
  // Replaces the waker (empty: none). Events pushed before it was set are in `events` already.
  void set_waker(std::function<void()> wake) {
    std::lock_guard lock(mutex_);
    wake_ = std::move(wake);
  }

  Channel<TokenEvent> events;

 private:
  std::mutex mutex_;
  std::function<void()> wake_;
};

struct Request {
  uint64_t id = 0;  // unique, assigned by the server
  std::vector<int32_t> prompt_ids;
  engine::SamplingParams sampling;
  int32_t max_new_tokens = 16;
  // An embedding request (an embedding model's engine): the prompt is prefilled and its pooled embedding ends it
  // (TokenEvent::embedding); max_new_tokens is ignored.
  bool embed = false;
  std::vector<int32_t> stop_token_ids;  // finishing tokens (model EOS unless ignore_eos, plus the request's)
  std::shared_ptr<TokenStream> stream;  // may be shared by the n choices of one API call
  int32_t choice_index = 0;             // which choice of its API call this request produces (copied into events)
  Clock::time_point arrival = Clock::now();
  // Structured output: the grammar the output must follow (null: none); only the scheduler thread touches it once the
  // request is submitted. With grammar_after_token >= 0 the constraint starts after the model emits that token (a
  // reasoning model's </think>), so the model thinks freely first. With grammar_or_token >= 0 the constraint applies
  // from the first token, which may instead be grammar_or_token (<think>): then it waits for grammar_after_token.
  std::unique_ptr<grammar::GrammarMatcher> grammar;
  int32_t grammar_after_token = -1;
  int32_t grammar_or_token = -1;
};

}  // namespace rs::sched
