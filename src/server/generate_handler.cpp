#include "server/generate_handler.h"

#include <fmt/format.h>

#include "base/log.h"
#include "base/utf8.h"
#include "server/anthropic_messages.h"
#include "server/openai_responses.h"
#include "server/sse.h"

namespace rs::server {
namespace {

using namespace std::chrono_literals;
constexpr auto kKeepAliveEvery = 1s;           // SSE comment cadence while no token arrives
constexpr size_t kMaxLoggedInputBytes = 2000;  // --log-requests: a longer prompt is cut here

// A request's prompt or messages for the log: JSON (so newlines cannot forge log lines), cut to kMaxLoggedInputBytes
// at a character boundary.
template <typename Json>
std::string logged_json(const char* key, const Json& value) {
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  const size_t total = text.size();
  if (total <= kMaxLoggedInputBytes) return fmt::format("{}={}", key, text);
  text.resize(kMaxLoggedInputBytes);
  text.resize(text.size() - utf8::incomplete_tail(text));
  return fmt::format("{}={}... ({} bytes in all)", key, text, total);
}

const char* route_of(Endpoint endpoint) {
  switch (endpoint) {
    case Endpoint::kChat: return "/v1/chat/completions";
    case Endpoint::kMessages: return "/v1/messages";
    case Endpoint::kResponses: return "/v1/responses";
    case Endpoint::kEmbeddings: return "/v1/embeddings";
    default: return "/v1/completions";
  }
}

ApiError failure(const Generation& generation) {
  return scheduler_failure(generation.error_cause(), *generation.error());
}

// One access-log line per call (never prompt or output text; --log-requests logs the prompt on a line of its own).
void log_access(Endpoint endpoint, const std::string& id, int status, const Generation& generation) {
  const Usage usage = generation.usage();
  const double ttft = generation.seconds_to_first_token();
  RS_LOG_INFO("{} {} {} prompt_tokens={} cached_tokens={} completion_tokens={} ttft={} total={:.3f}s finish={}", id,
              route_of(endpoint), status, usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens,
              ttft < 0 ? std::string("-") : fmt::format("{:.3f}s", ttft), generation.seconds_since_arrival(),
              generation.finish_reasons());
}

}  // namespace

GenerateHandler::GenerateHandler(const ServingModel& model, sched::Scheduler& scheduler, ServerMetrics& metrics,
                                 bool log_requests)
    : model_(model), scheduler_(scheduler), metrics_(metrics), log_requests_(log_requests) {}

http::Response GenerateHandler::respond_error(const ApiError& error, Endpoint endpoint) {
  RS_LOG_INFO("{} {} {}{}", route_of(endpoint), error.status, error.code.empty() ? error.type : error.code,
              error.param.empty() ? "" : " param=" + error.param);
  if (error.status == 503) {
    // counted by the caller as rejected, once
  } else if (error.status >= 500) {
    metrics_.requests_server_error++;
  } else {
    metrics_.count_client_error(error.status);
  }
  http::Response res;
  res.status = error.status;
  if (error.status == 503) res.set_header("Retry-After", "1");
  const nlohmann::json body = endpoint == Endpoint::kMessages ? anthropic_error_json(error) : error_json(error);
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
  return res;
}

std::optional<ApiError> GenerateHandler::check_num_choices(size_t num_prompts, int32_t n) const {
  const size_t limit = static_cast<size_t>(model_.max_choices_per_call);
  if (num_prompts <= limit / static_cast<size_t>(n)) return std::nullopt;  // num_prompts * n <= limit, no overflow
  return invalid_param(num_prompts > 1 ? "prompt" : "n",
                       fmt::format("This call asks for {} prompts x n={} choices; at most {} are allowed per call.",
                                   num_prompts, n, limit),
                       "too_many_choices");
}

std::variant<std::vector<std::vector<int32_t>>, ApiError> GenerateHandler::build_prompts(Endpoint endpoint,
                                                                                         const std::string& body,
                                                                                         GenerationOptions& options,
                                                                                         std::string& logged_input) {
  std::vector<std::vector<int32_t>> prompts;
  std::string model_name;
  if (endpoint != Endpoint::kCompletion) {  // a chat, or the chat a Messages or Responses call was translated into
    auto parsed = parse_chat_request(body, model_.sampling_defaults, model_.limits);
    if (auto* error = std::get_if<ApiError>(&parsed)) return *error;
    auto& request = std::get<ChatRequest>(parsed);
    if (log_requests_) logged_input = logged_json("messages", request.messages);
    model_name = request.model.empty() ? model_.name : request.model;  // omitted: the served model
    options = request.options;
    options.separate_reasoning = model_.reasoning.enabled() || model_.harmony.enabled();
    // Tools the server cannot parse calls from would come back as text: refuse as vLLM does, naming the flag.
    if (options.parse_tool_calls && !model_.tool_call_format && !model_.harmony.enabled())
      return invalid_param("tool_choice",
                           "\"auto\" tool choice needs a tool-call parser: start the server with --tool-call-parser "
                           "(hermes, qwen3_coder, llama3_json, mistral or auto), or send tool_choice \"none\".",
                           "unsupported_parameter");
    if (auto error = check_num_choices(1, options.n)) return *error;
    if (model_.serves(model_name)) {
      if (!model_.text.has_chat_template())
        return invalid_param("messages",
                             "This model has no tokenizer or chat template; use /v1/completions with "
                             "token-id prompts.",
                             "chat_unsupported");
      auto ids = model_.text.chat_prompt(request.messages, request.add_generation_prompt, request.template_extra,
                                         request.continue_final_message);
      if (auto* error = std::get_if<ApiError>(&ids)) return *error;
      prompts.push_back(std::move(std::get<std::vector<int32_t>>(ids)));
    }
  } else {
    auto parsed = parse_completion_request(body, model_.sampling_defaults, model_.limits);
    if (auto* error = std::get_if<ApiError>(&parsed)) return *error;
    auto& request = std::get<CompletionRequest>(parsed);
    if (log_requests_)
      logged_input = request.token_prompts.empty() ? logged_json("prompt", nlohmann::json(request.text_prompts))
                                                   : logged_json("prompt", nlohmann::json(request.token_prompts));
    model_name = request.model.empty() ? model_.name : request.model;  // omitted: the served model
    options = request.options;
    // Before tokenizing anything: one call must not build (or queue) more choices than the server allows.
    const size_t num_prompts = request.token_prompts.size() + request.text_prompts.size();
    if (auto error = check_num_choices(num_prompts, options.n)) return *error;
    prompts = std::move(request.token_prompts);
    for (const std::string& text : request.text_prompts) {
      auto ids = model_.text.encode_prompt(text);
      if (auto* error = std::get_if<ApiError>(&ids)) return *error;
      prompts.push_back(std::move(std::get<std::vector<int32_t>>(ids)));
    }
  }
  if (!model_.serves(model_name))
    return api_error(404, "invalid_request_error",
                     fmt::format("The model `{}` does not exist or you do not have access to it.", model_name), "model",
                     "model_not_found");
  const char* prompt_param = endpoint == Endpoint::kCompletion ? "prompt" : "messages";
  for (const auto& prompt : prompts) {
    if (prompt.empty()) return invalid_param(prompt_param, "The prompt is empty after tokenization.", "empty_prompt");
    for (int32_t id : prompt)
      if (id < 0 || id >= model_.vocab_size)
        return invalid_param(prompt_param,
                             fmt::format("Token id {} is outside the vocabulary [0, {}).", id, model_.vocab_size),
                             "invalid_token_id");
  }
  if (!options.stop.empty() && !model_.text.has_tokenizer())
    return invalid_param("stop", "Stop strings need a tokenizer, which this model lacks; use stop_token_ids.",
                         "unsupported_parameter");
  if (options.constraint.kind != OutputConstraint::Kind::kNone) {
    if (auto error = compile_constraint(options)) return *error;
  }
  for (const auto& [id, bias] : options.sampling.logit_bias)
    if (id >= model_.vocab_size)
      return invalid_param("logit_bias",
                           fmt::format("Token id {} is outside the vocabulary [0, {}).", id, model_.vocab_size),
                           "invalid_token_id");
  return prompts;
}

std::optional<ApiError> GenerateHandler::compile_constraint(GenerationOptions& options) const {
  const OutputConstraint& constraint = options.constraint;
  if (!model_.grammar)
    return invalid_param(constraint.param,
                         fmt::format("'{}' needs the model's tokenizer, which this model lacks.", constraint.param),
                         "unsupported_parameter");
  // The constraint's grammar writes Hermes <tool_call>{json}</tool_call> blocks (or harmony calls).
  if (constraint.kind == OutputConstraint::Kind::kToolCalls && model_.tool_call_format != ToolCallFormat::kHermes &&
      !model_.harmony.enabled())
    return invalid_param("tool_choice",
                         "tool_choice 'required' or a named function needs the Hermes tool-call format: start the "
                         "server with --tool-call-parser hermes (qwen3).",
                         "unsupported_parameter");
  // Harmony chats (gpt-oss) answer in channels: the constraint applies to the final message.
  auto compiled =
      compile_output_constraint(constraint, *model_.grammar, options.separate_reasoning && model_.harmony.enabled());
  if (auto* error = std::get_if<ApiError>(&compiled)) return *error;
  options.grammar = std::get<std::shared_ptr<const grammar::CompiledGrammar>>(std::move(compiled));
  return std::nullopt;
}

std::variant<int32_t, ApiError> GenerateHandler::max_new_tokens(const std::vector<std::vector<int32_t>>& prompts,
                                                                const GenerationOptions& options,
                                                                Endpoint endpoint) const {
  size_t longest = 0;
  for (const auto& prompt : prompts) longest = std::max(longest, prompt.size());
  const int64_t room = model_.max_context - static_cast<int64_t>(longest);
  const char* prompt_param = endpoint == Endpoint::kCompletion ? "prompt" : "messages";
  const char* max_tokens_param = endpoint == Endpoint::kChat        ? "max_completion_tokens"
                                 : endpoint == Endpoint::kResponses ? "max_output_tokens"
                                                                    : "max_tokens";
  const RequestLimits& limits = model_.limits;
  if (limits.max_prompt_tokens > 0 && static_cast<int64_t>(longest) > limits.max_prompt_tokens)
    return invalid_param(prompt_param,
                         fmt::format("Your prompt has {} tokens, more than this server's limit of {} per prompt.",
                                     longest, limits.max_prompt_tokens),
                         "prompt_too_long");
  if (limits.max_tokens > 0 && options.max_tokens && *options.max_tokens > limits.max_tokens)
    return invalid_param(max_tokens_param,
                         fmt::format("You requested {} completion tokens, more than this server's limit of {}.",
                                     *options.max_tokens, limits.max_tokens),
                         "integer_above_max_value");
  if (room < 1)
    return invalid_param(prompt_param,
                         fmt::format("This model's maximum context length is {} tokens. However, your prompt has {} "
                                     "tokens, which leaves no room for the completion.",
                                     model_.max_context, longest),
                         "context_length_exceeded");
  if (!options.max_tokens)
    return static_cast<int32_t>(
        std::min<int64_t>({room, INT32_MAX, limits.max_tokens > 0 ? limits.max_tokens : INT32_MAX}));
  if (*options.max_tokens > room)
    return invalid_param(max_tokens_param,
                         fmt::format("This model's maximum context length is {} tokens. However, you requested {} "
                                     "tokens ({} in the prompt, {} in the completion). Please reduce the length of the "
                                     "prompt or completion.",
                                     model_.max_context, longest + *options.max_tokens, longest, *options.max_tokens),
                         "context_length_exceeded");
  return *options.max_tokens;
}

// A call in flight after its handler returned: what the deferred and streamed answers share.
struct CallState {
  GenerateHandler& handler;
  Endpoint endpoint;
  std::unique_ptr<InFlight> in_flight;
  std::unique_ptr<Generation> generation;
  std::unique_ptr<ResponseBuilder> builder;
  std::shared_ptr<const ResponsesCall> responses;  // /v1/responses: the translated call (echo, store, messages)
  bool finished = false;  // the answer is complete (what the client does afterwards aborts nothing)

  // The client went away first: free the choices' KV at the scheduler's next step. Counted first: once the scheduler
  // has dropped the request, /metrics may show the server idle (a test waits for exactly that).
  void abandon(const char* what) {
    if (finished) return;
    finished = true;
    handler.metrics_.requests_aborted++;
    generation->abort();
    RS_LOG_INFO("{} closed by the client{}; aborted", builder->id(), what);
    log_access(endpoint, builder->id(), 499, *generation);
  }
};

// A non-streaming call: one JSON body once every choice is done.
class PendingCompletion : public http::DeferredResponse {
 public:
  explicit PendingCompletion(CallState call) : call_(std::move(call)), results_(call_.generation->num_choices()) {}

  void start(http::Waker wake) override { call_.generation->set_waker(std::move(wake)); }

  std::optional<http::Response> poll() override {
    for (const ChoiceDelta& delta : call_.generation->poll(0ms)) results_[delta.index].append(delta);
    if (!call_.generation->done()) return std::nullopt;
    call_.finished = true;
    call_.generation->set_waker({});
    if (call_.generation->error()) return call_.handler.respond_error(failure(*call_.generation), call_.endpoint);
    call_.handler.metrics_.requests_ok++;
    log_access(call_.endpoint, call_.builder->id(), 200, *call_.generation);
    http::Response res;
    const std::string& id = call_.builder->id();
    const std::string& model = call_.handler.model_.name;
    nlohmann::json body;
    if (call_.endpoint == Endpoint::kMessages) {
      body = anthropic_message(id, model, results_.at(0), call_.generation->usage());
    } else if (call_.endpoint == Endpoint::kResponses) {
      body = response_object(id, model, results_.at(0), call_.generation->usage(), call_.responses->echo);
      if (call_.responses->store)
        call_.handler.responses_.put(id, {body, conversation_with(call_.responses->messages, body["output"])});
    } else {
      body = call_.builder->response(results_, call_.generation->usage());
    }
    res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
    return res;
  }

  void abandon() override { call_.abandon(""); }

 private:
  CallState call_;
  std::vector<ChoiceResult> results_;
};

// A streaming call: SSE chunks as tokens arrive, a keep-alive comment while none does, [DONE] at the end.
class CompletionStream : public http::ChunkSource {
 public:
  CompletionStream(CallState call, bool include_usage) : call_(std::move(call)), include_usage_(include_usage) {}

  void start(http::Waker wake) override { call_.generation->set_waker(std::move(wake)); }

  bool pull(std::string& out) override {
    Generation& generation = *call_.generation;
    const size_t before = out.size();
    // Whether the generation was done is read once, by the writer of the last event.
    const bool done = call_.endpoint == Endpoint::kMessages    ? pull_messages(out)
                      : call_.endpoint == Endpoint::kResponses ? pull_responses(out)
                                                               : pull_chunks(out);
    // A comment while nothing arrives: clients ignore it, and writing it reveals a client that went away.
    if (out.size() == before && Clock::now() - last_write_ >= kKeepAliveEvery) out += kSseKeepAlive;
    if (out.size() > before) last_write_ = Clock::now();
    if (done) {
      call_.finished = true;
      generation.set_waker({});
      const int status = generation.error() ? failure(generation).status : 200;
      if (status >= 500) {
        call_.handler.metrics_.requests_server_error++;
      } else if (status >= 400) {
        call_.handler.metrics_.count_client_error(status);
      } else {
        call_.handler.metrics_.requests_ok++;
      }
      log_access(call_.endpoint, call_.builder->id(), status, generation);
    }
    return done;
  }

  void abandon() override { call_.abandon(" mid-stream"); }

 private:
  // OpenAI's chunks: data lines, [DONE] at the end. Returns whether the generation is done.
  bool pull_chunks(std::string& out) {
    Generation& generation = *call_.generation;
    if (!started_) {
      started_ = true;
      for (int32_t c = 0; call_.endpoint == Endpoint::kChat && c < generation.num_choices(); ++c) {
        ChoiceDelta role;
        role.index = c;
        out += sse_data(call_.builder->chunk(role, /*first=*/true));
      }
    }
    for (const ChoiceDelta& delta : generation.poll(0ms)) out += sse_data(call_.builder->chunk(delta, false));
    const bool done = generation.done();
    if (done && generation.error()) {
      out += sse_data(error_json(failure(generation)));
    } else if (done && include_usage_) {
      out += sse_data(call_.builder->usage_chunk(generation.usage()));
    }
    if (done) out += kSseDone;
    return done;
  }

  // Anthropic's named events (one choice): message_start first, message_stop (or an error event) last.
  bool pull_messages(std::string& out) {
    Generation& generation = *call_.generation;
    if (!started_) {
      started_ = true;
      out += anthropic_.start(generation.usage().prompt_tokens);
    }
    for (const ChoiceDelta& delta : generation.poll(0ms)) out += anthropic_.delta(delta);
    const bool done = generation.done();
    if (done) out += generation.error() ? anthropic_.error(failure(generation)) : anthropic_.finish(generation.usage());
    return done;
  }

  // OpenAI's Responses events: response.created first, response.completed / .incomplete (or error) last; stored then.
  bool pull_responses(std::string& out) {
    Generation& generation = *call_.generation;
    if (!started_) {
      started_ = true;
      out += responses_.start();
    }
    for (const ChoiceDelta& delta : generation.poll(0ms)) out += responses_.delta(delta);
    const bool done = generation.done();
    if (!done) return false;
    if (generation.error()) {
      out += responses_.error(failure(generation));
      return true;
    }
    out += responses_.finish(generation.usage());
    if (call_.responses->store) {
      const nlohmann::json& response = responses_.final_response();
      call_.handler.responses_.put(call_.builder->id(),
                                   {response, conversation_with(call_.responses->messages, response["output"])});
    }
    return true;
  }

  CallState call_;
  AnthropicStream anthropic_{call_.builder->id(), call_.handler.model_.name};
  ResponsesStream responses_{call_.builder->id(), call_.handler.model_.name,
                             call_.responses ? call_.responses->echo : nlohmann::json::object()};
  const bool include_usage_;
  bool started_ = false;
  Clock::time_point last_write_ = Clock::now();
};

http::Response GenerateHandler::count_message_tokens(const http::Request& req) {
  auto translated = anthropic_to_chat(req.body, /*require_max_tokens=*/false);
  if (auto* error = std::get_if<ApiError>(&translated)) return respond_error(*error, Endpoint::kMessages);
  GenerationOptions options;
  std::string logged_input;
  auto prompts =
      build_prompts(Endpoint::kMessages, std::get<nlohmann::ordered_json>(translated).dump(), options, logged_input);
  if (auto* error = std::get_if<ApiError>(&prompts)) return respond_error(*error, Endpoint::kMessages);
  http::Response res;
  res.set_content(
      nlohmann::json{{"input_tokens", std::get<std::vector<std::vector<int32_t>>>(prompts).at(0).size()}}.dump(),
      "application/json");
  return res;
}

http::Response GenerateHandler::handle(Endpoint endpoint, const http::Request& req) {
  auto in_flight = std::make_unique<InFlight>(in_flight_);
  if (model_.embedding)
    return respond_error(api_error(400, "invalid_request_error",
                                   fmt::format("The model `{}` serves embeddings only (an embedding model, or "
                                               "--task embed): use /v1/embeddings.",
                                               model_.name),
                                   "model", "model_not_supported"),
                         endpoint);
  // Anthropic's Messages and OpenAI's Responses run as the chat request they stand for.
  std::string chat_body;
  std::shared_ptr<ResponsesCall> responses_call;
  if (endpoint == Endpoint::kMessages) {
    auto translated = anthropic_to_chat(req.body);
    if (auto* error = std::get_if<ApiError>(&translated)) return respond_error(*error, endpoint);
    chat_body = std::get<nlohmann::ordered_json>(translated).dump();
  } else if (endpoint == Endpoint::kResponses) {
    auto translated = responses_to_chat(req.body, responses_);
    if (auto* error = std::get_if<ApiError>(&translated)) return respond_error(*error, endpoint);
    responses_call = std::make_shared<ResponsesCall>(std::move(std::get<ResponsesCall>(translated)));
    chat_body = responses_call->chat.dump();
  }
  GenerationOptions options;
  std::string logged_input;
  auto prompts = build_prompts(endpoint, chat_body.empty() ? req.body : chat_body, options, logged_input);
  if (auto* error = std::get_if<ApiError>(&prompts)) return respond_error(*error, endpoint);
  auto& prompt_ids = std::get<std::vector<std::vector<int32_t>>>(prompts);
  auto max_new = max_new_tokens(prompt_ids, options, endpoint);
  if (auto* error = std::get_if<ApiError>(&max_new)) return respond_error(*error, endpoint);

  const uint64_t first_id = next_request_id_.fetch_add(prompt_ids.size() * options.n);
  auto generation = std::make_unique<Generation>(model_, options, std::move(prompt_ids), std::get<int32_t>(max_new),
                                                 first_id, scheduler_, metrics_);
  if (!generation->submit()) {
    metrics_.requests_rejected++;
    return respond_error(
        server_error(503, "The server is overloaded: too many requests are queued. Retry later.", "server_overloaded"),
        endpoint);
  }
  auto builder = std::make_unique<ResponseBuilder>(endpoint, model_.name, options, model_.text);
  if (log_requests_) RS_LOG_INFO("{} {} {}", builder->id(), route_of(endpoint), logged_input);

  CallState call{
      *this, endpoint, std::move(in_flight), std::move(generation), std::move(builder), std::move(responses_call)};
  http::Response res;
  if (!options.stream) {
    res.deferred = std::make_shared<PendingCompletion>(std::move(call));
    return res;
  }
  res.set_header("Cache-Control", "no-cache");
  res.content_type = "text/event-stream";
  res.chunks = std::make_shared<CompletionStream>(std::move(call), options.include_usage);
  return res;
}

}  // namespace rs::server
