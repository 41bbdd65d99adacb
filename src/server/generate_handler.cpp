#include "server/generate_handler.h"

#include <httplib.h>

#include <fmt/format.h>

#include "base/log.h"
#include "base/utf8.h"
#include "server/peer_connection.h"
#include "server/sse.h"

namespace rs::server {
namespace {

using namespace std::chrono_literals;
constexpr auto kPollInterval = 100ms;    // how often a waiting handler wakes to check its client
constexpr auto kKeepAliveEvery = 1s;     // SSE comment cadence while no token arrives
constexpr auto kPeerCheckEvery = 250ms;  // how often a non-streaming handler checks that its client is still there
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

// Everything a streamed response needs after its handler has returned.
struct StreamState {
  std::unique_ptr<InFlight> in_flight;
  std::unique_ptr<Generation> generation;
  std::unique_ptr<ResponseBuilder> builder;
  bool include_usage = false;
  bool started = false;
  bool finished = false;
  Clock::time_point last_write = Clock::now();
};

}  // namespace

GenerateHandler::GenerateHandler(const ServingModel& model, sched::Scheduler& scheduler, ServerMetrics& metrics,
                                 bool log_requests)
    : model_(model), scheduler_(scheduler), metrics_(metrics), log_requests_(log_requests) {}

static const char* route_of(Endpoint endpoint) {
  return endpoint == Endpoint::kChat ? "/v1/chat/completions" : "/v1/completions";
}

void GenerateHandler::log_access(Endpoint endpoint, const std::string& id, int status, const Generation& generation) {
  const Usage usage = generation.usage();
  const double ttft = generation.seconds_to_first_token();
  RS_LOG_INFO("{} {} {} prompt_tokens={} cached_tokens={} completion_tokens={} ttft={} total={:.3f}s finish={}", id,
              route_of(endpoint), status, usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens,
              ttft < 0 ? std::string("-") : fmt::format("{:.3f}s", ttft), generation.seconds_since_arrival(),
              generation.finish_reasons());
}

void GenerateHandler::respond_error(httplib::Response& res, const ApiError& error, Endpoint endpoint) {
  RS_LOG_INFO("{} {} {}{}", route_of(endpoint), error.status, error.code.empty() ? error.type : error.code,
              error.param.empty() ? "" : " param=" + error.param);
  if (error.status == 503) {
    // counted by the caller as rejected, once
  } else if (error.status >= 500) {
    metrics_.requests_server_error++;
  } else {
    metrics_.count_client_error(error.status);
  }
  res.status = error.status;
  if (error.status == 503) res.set_header("Retry-After", "1");
  res.set_content(error_json(error).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
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
  if (endpoint == Endpoint::kChat) {
    auto parsed = parse_chat_request(body, model_.sampling_defaults, model_.limits);
    if (auto* error = std::get_if<ApiError>(&parsed)) return *error;
    auto& request = std::get<ChatRequest>(parsed);
    if (log_requests_) logged_input = logged_json("messages", request.messages);
    model_name = request.model.empty() ? model_.name : request.model;  // omitted: the served model
    options = request.options;
    options.separate_reasoning = model_.reasoning.enabled() || model_.harmony.enabled();
    options.parse_tool_calls = options.parse_tool_calls && (model_.hermes_tool_calls || model_.harmony.enabled());
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
  const char* prompt_param = endpoint == Endpoint::kChat ? "messages" : "prompt";
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
  if (constraint.kind == OutputConstraint::Kind::kToolCalls && !model_.hermes_tool_calls && !model_.harmony.enabled())
    return invalid_param("tool_choice",
                         "tool_choice 'required' or a named function needs the model's tool-call format: start the "
                         "server with --tool-call-parser qwen3.",
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
  const char* prompt_param = endpoint == Endpoint::kChat ? "messages" : "prompt";
  const char* max_tokens_param = endpoint == Endpoint::kChat ? "max_completion_tokens" : "max_tokens";
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

void GenerateHandler::handle(Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
  auto in_flight = std::make_unique<InFlight>(in_flight_);
  GenerationOptions options;
  std::string logged_input;
  auto prompts = build_prompts(endpoint, req.body, options, logged_input);
  if (auto* error = std::get_if<ApiError>(&prompts)) return respond_error(res, *error, endpoint);
  auto& prompt_ids = std::get<std::vector<std::vector<int32_t>>>(prompts);
  auto max_new = max_new_tokens(prompt_ids, options, endpoint);
  if (auto* error = std::get_if<ApiError>(&max_new)) return respond_error(res, *error, endpoint);

  // Found before the work starts, while the client is surely connected (only non-streaming calls use it).
  const PeerConnection peer =
      options.stream ? PeerConnection({}, {})
                     : PeerConnection({req.remote_addr, req.remote_port}, {req.local_addr, req.local_port});
  const uint64_t first_id = next_request_id_.fetch_add(prompt_ids.size() * options.n);
  auto generation = std::make_unique<Generation>(model_, options, std::move(prompt_ids), std::get<int32_t>(max_new),
                                                 first_id, scheduler_, metrics_);
  if (!generation->submit()) {
    metrics_.requests_rejected++;
    return respond_error(
        res,
        server_error(503, "The server is overloaded: too many requests are queued. Retry later.", "server_overloaded"),
        endpoint);
  }
  auto builder = std::make_unique<ResponseBuilder>(endpoint, model_.name, options, model_.text);
  if (log_requests_) RS_LOG_INFO("{} {} {}", builder->id(), route_of(endpoint), logged_input);

  if (!options.stream) {
    std::vector<ChoiceResult> results(generation->num_choices());
    auto next_check = Clock::now() + kPeerCheckEvery;
    while (!generation->done()) {
      for (const ChoiceDelta& delta : generation->poll(kPollInterval)) results[delta.index].append(delta);
      if (generation->done() || Clock::now() < next_check) continue;
      next_check = Clock::now() + kPeerCheckEvery;
      if (peer.closed()) {            // nobody will read the answer: free the choices' KV at the scheduler's next step
        metrics_.requests_aborted++;  // counted first: once aborted, /metrics may already show the server idle
        generation->abort();
        RS_LOG_INFO("rid={} closed by the client ({}:{}); aborted", first_id, req.remote_addr, req.remote_port);
        res.status = 499;  // nginx's "client closed request"; never seen by the client
        log_access(endpoint, builder->id(), 499, *generation);
        return;
      }
    }
    if (generation->error()) return respond_error(res, server_error(500, *generation->error()), endpoint);
    metrics_.requests_ok++;
    log_access(endpoint, builder->id(), 200, *generation);
    res.set_content(
        builder->response(results, generation->usage()).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
        "application/json");
    return;
  }

  auto state = std::make_shared<StreamState>();
  state->in_flight = std::move(in_flight);
  state->generation = std::move(generation);
  state->builder = std::move(builder);
  state->include_usage = options.include_usage;
  const bool chat = endpoint == Endpoint::kChat;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, state, chat, endpoint](size_t, httplib::DataSink& sink) {
        std::string out;
        if (!state->started) {
          state->started = true;
          for (int32_t c = 0; chat && c < state->generation->num_choices(); ++c) {
            ChoiceDelta role;
            role.index = c;
            out += sse_data(state->builder->chunk(role, /*first=*/true));
          }
        }
        for (const ChoiceDelta& delta : state->generation->poll(out.empty() ? kPollInterval : 0ms))
          out += sse_data(state->builder->chunk(delta, false));
        const bool done = state->generation->done();
        if (done && state->generation->error()) {
          out += sse_data(error_json(server_error(500, *state->generation->error())));
        } else if (done && state->include_usage) {
          out += sse_data(state->builder->usage_chunk(state->generation->usage()));
        }
        if (done) out += kSseDone;
        if (out.empty() && Clock::now() - state->last_write >= kKeepAliveEvery) out = kSseKeepAlive;
        if (!out.empty()) {
          if (!sink.write(out.data(), out.size())) return false;  // the client went away
          state->last_write = Clock::now();
        }
        if (done) {
          state->finished = true;
          (state->generation->error() ? metrics_.requests_server_error : metrics_.requests_ok)++;
          log_access(endpoint, state->builder->id(), state->generation->error() ? 500 : 200, *state->generation);
          sink.done();
        }
        return true;
      },
      [this, state, endpoint](bool) {
        if (state->finished) return;  // everything was written (the client may close before the last chunk frame)
        // Disconnected mid-stream: free the choices' KV at the scheduler's next step. Counted first: once the
        // scheduler has dropped the request, /metrics may show the server idle (a test waits for exactly that).
        metrics_.requests_aborted++;
        state->generation->abort();
        RS_LOG_INFO("stream {} closed by the client; aborted", state->builder->id());
        log_access(endpoint, state->builder->id(), 499, *state->generation);
      });
}

}  // namespace rs::server
