// Generation: one API call in flight on an HTTP thread. Submits a Request per choice (prompts x n) to the scheduler,
// turns their TokenEvents into text deltas (incremental detokenizing, stop strings), and keeps usage and latency.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "engine/forward_batch.h"
#include "grammar/compiler.h"
#include "sched/scheduler.h"
#include "server/harmony_parser.h"
#include "server/metrics.h"
#include "server/model_text.h"
#include "server/openai_embeddings.h"
#include "server/openai_request.h"
#include "server/reasoning_parser.h"
#include "server/stop_matcher.h"
#include "server/tool_call_parser.h"
#include "spec/acceptance.h"

namespace rs::server {

// The answer to a request the scheduler failed with `message`: 400 when the request caused it (its size, its grammar),
// 503 when its step ran out of memory (a retry may fit), 500 otherwise.
ApiError scheduler_failure(sched::ErrorCause cause, const std::string& message);

// What a poll added to one choice.
struct ChoiceDelta {
  int32_t index = 0;
  std::string text;                           // newly released text (the reply, when reasoning is split off)
  std::string reasoning;                      // newly released reasoning (chat with a reasoning parser)
  std::vector<ToolCall> tool_calls;           // tool calls completed here
  int32_t first_tool_index = 0;               // the choice's index of tool_calls[0]
  std::vector<int32_t> token_ids;             // tokens that arrived (the final stop token excluded)
  std::vector<engine::SampledToken> sampled;  // the same tokens with their logprobs
  std::string finish_reason;                  // "stop" or "length" when the choice ended here, else empty
  std::string stop_sequence;                  // with finish_reason "stop": the request's stop string that matched
  // The first delta of a choice whose prompt is scored: [position] each prompt token (rank 0 at position 0: unscored).
  std::vector<engine::SampledToken> prompt_logprobs;
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
  spec::SpecTotals speculative;  // summed over the choices; reported when any draft was verified
};

// Tags around a model's reasoning, as text and as token ids (to tell from the prompt whether it opened them).
struct ReasoningTags {
  std::string open, close;
  int32_t open_id = -1, close_id = -1;
  bool enabled() const { return !open.empty(); }
};

// The model facts a generation needs; owned by the server, shared by every call.
struct ServingModel {
  std::string name;                          // the served model name
  std::string model_path;                    // the folder it was loaded from (/get_model_info)
  std::vector<std::string> aliases;          // more names requests may use (--served-model-name a b ...)
  int64_t max_context = 0;                   // prompt + output tokens per request
  int32_t vocab_size = 0;                    // token-id prompts must lie in [0, vocab_size)
  std::vector<int32_t> eos_token_ids;        // stop tokens unless ignore_eos
  engine::SamplingParams sampling_defaults;  // generation_config.json
  int32_t max_choices_per_call = 128;        // prompts x n one call may submit (at most the scheduler's queue)
  int32_t max_embedding_inputs = 2048;       // inputs one /v1/embeddings call may submit (OpenAI's 2,048; the queue)
  RequestLimits limits;                      // what one request may ask for (serve options)
  ModelText text;
  // Chat answers split into reasoning_content and content at these tags (--reasoning-parser); empty: off.
  ReasoningTags reasoning;
  // gpt-oss: chat answers routed by harmony channel (analysis -> reasoning_content, final -> content).
  HarmonyTokens harmony;
  // The format tool calls are parsed from (--tool-call-parser); none: tools reach the template, calls stay text.
  // gpt-oss's harmony calls are always parsed.
  std::optional<ToolCallFormat> tool_call_format;
  // Compiles structured output constraints for this model's vocabulary (cached by text); null without a tokenizer.
  std::shared_ptr<grammar::GrammarCompiler> grammar;
  // An embedding model (--task embed): /v1/embeddings serves, the generation routes refuse; else the other way round.
  std::optional<EmbeddingModel> embedding;

  bool serves(std::string_view requested) const {
    return requested == name || std::find(aliases.begin(), aliases.end(), requested) != aliases.end();
  }
};

class Generation {
 public:
  // prompts: token ids per prompt; choice i*n+j is choice j of prompt i, with request id first_request_id+i*n+j
  // (the caller reserves the range). max_new_tokens is already validated against the context.
  Generation(const ServingModel& model, const GenerationOptions& options, std::vector<std::vector<int32_t>> prompts,
             int32_t max_new_tokens, uint64_t first_request_id, sched::Scheduler& scheduler, ServerMetrics& metrics);
  ~Generation();  // aborts choices still running
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // Submits every choice; false when the scheduler refused one (queue full), in which case none stays submitted.
  bool submit();
  // Waits up to `timeout` for scheduler events and returns the deltas they produced (empty on timeout).
  std::vector<ChoiceDelta> poll(std::chrono::milliseconds timeout);
  // Called (on the scheduler's thread) whenever an event arrives, so that a caller can wait without polling.
  void set_waker(std::function<void()> wake) { stream_->set_waker(std::move(wake)); }
  bool done() const { return num_finished_ == static_cast<int32_t>(choices_.size()); }
  // Aborts every unfinished choice (the client went away).
  void abort();
  // Set when the scheduler failed a choice (then done() is true and the call is answered with an error).
  const std::optional<std::string>& error() const { return error_; }
  // With error(): whose fault it was (the request's own: 400; the server's: 500; no memory for its step: 503).
  sched::ErrorCause error_cause() const { return error_cause_; }
  Usage usage() const;
  int32_t num_choices() const { return static_cast<int32_t>(choices_.size()); }
  // For the access log: seconds from arrival to the first token (any choice; negative: none yet) and until now, and
  // the choices' finish reasons ("stop", "length", "abort" for unfinished ones), distinct, comma-separated.
  double seconds_to_first_token() const;
  double seconds_since_arrival() const { return seconds_since(arrival_); }
  std::string finish_reasons() const;

 private:
  struct Choice {
    Choice(uint64_t id, TextStream stream, StopMatcher stops)
        : request_id(id), text(std::move(stream)), stop(std::move(stops)) {}
    uint64_t request_id = 0;
    TextStream text;
    StopMatcher stop;
    std::optional<ReasoningParser> reasoning;
    std::optional<HarmonyParser> harmony;
    std::optional<ToolCallParser> tools;
    std::string tool_arguments;  // harmony: the arguments of the call being written
    int32_t tool_calls = 0;
    int32_t prompt_tokens = 0;
    int32_t cached_tokens = 0;
    int32_t completion_tokens = 0;
    spec::SpecTotals speculative;
    bool finished = false;
    bool submitted = false;
    std::string finish_reason;
    std::string echo;  // completions with echo: the prompt's text, sent before the first output
    Clock::time_point last_token;
  };

  void apply(sched::TokenEvent& event, std::vector<ChoiceDelta>& deltas);
  bool prompt_opens_reasoning(const std::vector<int32_t>& prompt) const;
  // Adds one token's text to the choice's output (harmony: to the channel's route).
  void add_token_text(Choice& choice, int32_t token, ChoiceDelta& delta);
  void end_harmony_call(Choice& choice, ChoiceDelta& delta);
  void end_choice(Choice& choice, ChoiceDelta& delta, const std::string& reason);

  const ServingModel& model_;
  GenerationOptions options_;
  std::vector<std::vector<int32_t>> prompts_;
  int32_t max_new_tokens_;
  uint64_t first_request_id_;
  sched::Scheduler& scheduler_;
  ServerMetrics& metrics_;
  std::shared_ptr<sched::TokenStream> stream_ = std::make_shared<sched::TokenStream>();
  std::vector<Choice> choices_;
  int32_t num_finished_ = 0;
  std::optional<std::string> error_;
  sched::ErrorCause error_cause_ = sched::ErrorCause::kServer;
  Clock::time_point arrival_ = Clock::now();
  std::optional<Clock::time_point> first_token_;
};

}  // namespace rs::server
