// GenerateHandler: POST /v1/chat/completions and /v1/completions on an HTTP worker thread: parse and validate,
// build prompts and submit a Generation, then hand the connection an answer it waits for without a thread: one JSON
// body once the generation is done, or an SSE stream; either aborts the generation when the client goes away.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>

#include "sched/scheduler.h"
#include "server/generation.h"
#include "server/metrics.h"
#include "server/openai_response.h"
#include "server/openai_responses.h"

#include "http/message.h"

namespace rs::server {

// Counts a call in flight for as long as it lives (a streamed response outlives its handler).
class InFlight {
 public:
  explicit InFlight(std::atomic<int32_t>& counter) : counter_(counter) { ++counter_; }
  ~InFlight() { --counter_; }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  std::atomic<int32_t>& counter_;
};

class GenerateHandler {
 public:
  // model, scheduler and metrics must outlive every call. log_requests: each accepted call also logs its prompt or
  // messages (truncated) at info level.
  GenerateHandler(const ServingModel& model, sched::Scheduler& scheduler, ServerMetrics& metrics, bool log_requests);

  // Any HTTP worker thread. An error answer, or a deferred (non-streaming) or chunked (SSE) one.
  http::Response handle(Endpoint endpoint, const http::Request& req);
  // POST /v1/messages/count_tokens: {"input_tokens": N} of the prompt a Messages request would send.
  http::Response count_message_tokens(const http::Request& req);
  // POST /v1/embeddings (embedding_handler.cpp): one embedding request per input, answered once all are done.
  http::Response handle_embeddings(const http::Request& req);
  // Calls whose response is still being produced (streams included).
  int32_t in_flight() const { return in_flight_.load(); }
  // Stored /v1/responses answers (GET and DELETE /v1/responses/{id} read it).
  ResponseStore& responses() { return responses_; }

 private:
  // Parses the body into prompt ids and options; with log_requests_, also the request's prompt or messages as JSON
  // in `logged_input`.
  std::variant<std::vector<std::vector<int32_t>>, ApiError> build_prompts(Endpoint endpoint, const std::string& body,
                                                                          GenerationOptions& options,
                                                                          std::string& logged_input);
  // Compiles options.constraint into options.grammar, or a 400 naming the parameter.
  std::optional<ApiError> compile_constraint(GenerationOptions& options) const;
  // A 400 when num_prompts x n exceeds model_.max_choices_per_call.
  std::optional<ApiError> check_num_choices(size_t num_prompts, int32_t n) const;
  std::variant<int32_t, ApiError> max_new_tokens(const std::vector<std::vector<int32_t>>& prompts,
                                                 const GenerationOptions& options, Endpoint endpoint) const;
  http::Response respond_error(const ApiError& error, Endpoint endpoint);

  friend struct CallState;
  friend class PendingCompletion;
  friend class CompletionStream;
  friend class PendingEmbeddings;

  const ServingModel& model_;
  sched::Scheduler& scheduler_;
  ServerMetrics& metrics_;
  const bool log_requests_;
  std::atomic<uint64_t> next_request_id_{1};
  std::atomic<int32_t> in_flight_{0};
  ResponseStore responses_;
};

}  // namespace rs::server
