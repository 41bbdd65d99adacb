#include "server/openai_request.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <mutex>
#include <set>

#include "base/log.h"
#include "server/chat_messages.h"

namespace rs::server {
namespace {

using json = nlohmann::ordered_json;

// Reads typed fields of a JSON object; the first problem is kept in `error` and later reads return nothing.
struct FieldReader {
  const json& body;
  std::optional<ApiError> error;

  void fail(ApiError e) {
    if (!error) error = std::move(e);
  }
  // The value of `name`, or null when absent, null-valued, or after an error.
  const json* find(const char* name) {
    if (error) return nullptr;
    auto it = body.find(name);
    return it == body.end() || it->is_null() ? nullptr : &*it;
  }
  std::optional<double> number(const char* name, double lo, double hi) {
    const json* value = find(name);
    if (!value) return std::nullopt;
    if (!value->is_number()) return fail(wrong_type(name, "a number", *value)), std::nullopt;
    const double x = value->get<double>();
    if (x < lo)
      return fail(invalid_param(name,
                                fmt::format("Invalid '{}': decimal below minimum value. Expected a value >= {}, "
                                            "but got {} instead.",
                                            name, lo, x),
                                "decimal_below_min_value")),
             std::nullopt;
    if (x > hi)
      return fail(invalid_param(name,
                                fmt::format("Invalid '{}': decimal above maximum value. Expected a value <= {}, "
                                            "but got {} instead.",
                                            name, hi, x),
                                "decimal_above_max_value")),
             std::nullopt;
    return x;
  }
  // Bounds are checked exactly, never through double: 2^63 is above INT64_MAX, not equal to it.
  std::optional<int64_t> integer(const char* name, int64_t lo, int64_t hi) {
    const json* value = find(name);
    if (!value) return std::nullopt;
    const bool integral = value->is_number_integer() ||
                          (value->is_number_float() && std::floor(value->get<double>()) == value->get<double>());
    if (!integral) return fail(wrong_type(name, "an integer", *value)), std::nullopt;
    // -1: below lo, 1: above hi, 0: x holds the value.
    int below_above = 0;
    int64_t x = 0;
    if (value->is_number_unsigned()) {
      const uint64_t u = value->get<uint64_t>();
      below_above = hi < 0 || u > static_cast<uint64_t>(hi) ? 1 : 0;
      x = static_cast<int64_t>(u);
    } else if (value->is_number_integer()) {
      x = value->get<int64_t>();
    } else {
      // Integral. An integer literal below INT64_MIN parses as a double and may round to -2^63 itself.
      const double d = value->get<double>();
      if (d <= -0x1p63)
        below_above = -1;
      else if (d >= 0x1p63)
        below_above = 1;
      else
        x = static_cast<int64_t>(d);
    }
    if (below_above == 0) below_above = x < lo ? -1 : x > hi ? 1 : 0;
    if (below_above < 0)
      return fail(invalid_param(name,
                                fmt::format("Invalid '{}': integer below minimum value. Expected a value >= {}, "
                                            "but got {} instead.",
                                            name, lo, value->dump()),
                                "integer_below_min_value")),
             std::nullopt;
    if (below_above > 0)
      return fail(invalid_param(name,
                                fmt::format("Invalid '{}': integer above maximum value. Expected a value <= {}, "
                                            "but got {} instead.",
                                            name, hi, value->dump()),
                                "integer_above_max_value")),
             std::nullopt;
    return x;
  }
  std::optional<bool> boolean(const char* name) {
    const json* value = find(name);
    if (!value) return std::nullopt;
    if (!value->is_boolean()) return fail(wrong_type(name, "a boolean", *value)), std::nullopt;
    return value->get<bool>();
  }
  std::optional<std::string> string(const char* name) {
    const json* value = find(name);
    if (!value) return std::nullopt;
    if (!value->is_string()) return fail(wrong_type(name, "a string", *value)), std::nullopt;
    return value->get<std::string>();
  }
  void unsupported(const char* name, const std::string& why) {
    if (find(name))
      fail(invalid_param(name, fmt::format("'{}' is not supported: {}", name, why), "unsupported_parameter"));
  }
};

// Known top-level fields. Anything else is ignored with a log line (vLLM, SGLang), or rejected as OpenAI does
// ("Unrecognized request argument") with RequestLimits::strict_fields.
const std::set<std::string, std::less<>> kCommonFields = {
    "model", "n", "max_tokens", "stop", "stream", "stream_options", "temperature", "top_p", "presence_penalty",
    "frequency_penalty", "seed", "logit_bias", "logprobs", "user", "metadata", "store", "service_tier",
    // Extensions shared with vLLM and SGLang.
    "top_k", "min_p", "repetition_penalty", "stop_token_ids", "ignore_eos", "min_tokens",
    "spaces_between_special_tokens", "skip_special_tokens", "return_token_ids", "include_stop_str_in_output",
    "return_tokens_as_token_ids", "priority", "prompt_logprobs",
    // Structured output: OpenAI's response_format, SGLang's regex/ebnf, vLLM's guided_* and structured_outputs.
    "response_format", "regex", "ebnf", "guided_json", "guided_regex", "guided_grammar", "guided_choice",
    "structured_outputs",
    // Accepted without effect here: OpenAI's prompt-cache routing and abuse-monitoring keys, vLLM's request_id and
    // llama-server's cache_prompt (the radix cache always reuses prefixes).
    "prompt_cache_key", "prompt_cache_retention", "safety_identifier", "request_id", "cache_prompt"};
const std::set<std::string, std::less<>> kChatFields = {"messages",
                                                        "max_completion_tokens",
                                                        "top_logprobs",
                                                        "tools",
                                                        "tool_choice",
                                                        "parallel_tool_calls",
                                                        "reasoning_effort",
                                                        "modalities",
                                                        "audio",
                                                        "prediction",
                                                        "functions",
                                                        "function_call",
                                                        "web_search_options",
                                                        "chat_template_kwargs",
                                                        "add_generation_prompt",
                                                        "continue_final_message",
                                                        "verbosity"};
const std::set<std::string, std::less<>> kCompletionFields = {"prompt", "echo", "suffix", "best_of"};

// Field names already logged as ignored: each once per process, however many requests carry it (bounded, as names
// come from clients).
std::mutex logged_fields_mutex;
std::set<std::string, std::less<>> logged_fields;
constexpr size_t kMaxLoggedFields = 1024;

// An integer that fits a token id's int32 (range against the vocabulary is checked later); larger values must not
// wrap into valid ids.
bool is_token_id(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>() <= static_cast<uint64_t>(INT32_MAX);
  return v.is_number_integer() && v.get<int64_t>() >= INT32_MIN && v.get<int64_t>() <= INT32_MAX;
}

// `model` may be omitted (as vLLM and SGLang allow): the one served model answers.
std::optional<std::string> read_model(FieldReader& reader) {
  if (!reader.body.contains("model")) return std::string();
  return reader.string("model");
}

// OpenAI's logit_bias: {"token id": bias in [-100, 100]}; ids are checked against the vocabulary by the handler.
void read_logit_bias(FieldReader& reader, const json& bias, std::vector<std::pair<int32_t, float>>& out) {
  if (!bias.is_object()) return reader.fail(wrong_type("logit_bias", "an object", bias));
  for (const auto& [key, value] : bias.items()) {
    int64_t id = -1;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (ec != std::errc() || end != key.data() + key.size() || id < 0 || id > INT32_MAX)
      return reader.fail(invalid_param(
          "logit_bias", fmt::format("logit_bias keys must be token ids (non-negative integers), not '{}'.", key),
          "invalid_value"));
    if (!value.is_number() || value.get<double>() < -100.0 || value.get<double>() > 100.0)
      return reader.fail(invalid_param(
          "logit_bias", fmt::format("logit_bias[{}] must be a number in [-100, 100].", key), "invalid_value"));
    out.emplace_back(static_cast<int32_t>(id), value.get<float>());
  }
}

// Options both endpoints share. Endpoint-specific logprobs and max_tokens aliases are read by the callers.
GenerationOptions read_common(FieldReader& reader, const engine::SamplingParams& defaults,
                              const RequestLimits& limits) {
  GenerationOptions options;
  options.sampling = defaults;
  options.sampling.logprobs = false;
  options.sampling.top_logprobs = 0;
  options.sampling.seed.reset();
  options.n = static_cast<int32_t>(reader.integer("n", 1, limits.max_n).value_or(1));
  // 0 only scores the prompt (prompt_logprobs, or echo with logprobs): checked once those are read.
  if (auto v = reader.integer("max_tokens", 0, INT32_MAX)) options.max_tokens = static_cast<int32_t>(*v);
  // vLLM's prompt_logprobs: each prompt token's logprob and this many alternatives, as the choice's prompt_logprobs.
  if (auto v = reader.integer("prompt_logprobs", 0, limits.max_top_logprobs)) {
    options.sampling.prompt_logprobs = static_cast<int32_t>(*v);
    options.prompt_logprobs_field = true;
  }
  if (auto v = reader.number("temperature", 0.0, 2.0)) options.sampling.temperature = static_cast<float>(*v);
  if (auto v = reader.number("top_p", 0.0, 1.0)) {
    options.sampling.top_p = static_cast<float>(*v);
    if (*v == 0.0) {  // OpenAI accepts 0: keep only the most likely token
      options.sampling.top_p = 1.0f;
      options.sampling.top_k = 1;
    }
  }
  if (auto v = reader.integer("top_k", -1, INT32_MAX)) options.sampling.top_k = static_cast<int32_t>(*v);
  if (auto v = reader.number("min_p", 0.0, 1.0)) options.sampling.min_p = static_cast<float>(*v);
  if (auto v = reader.number("presence_penalty", -2.0, 2.0)) options.sampling.presence_penalty = static_cast<float>(*v);
  if (auto v = reader.number("frequency_penalty", -2.0, 2.0))
    options.sampling.frequency_penalty = static_cast<float>(*v);
  if (auto v = reader.number("repetition_penalty", 1e-6, 100.0))
    options.sampling.repetition_penalty = static_cast<float>(*v);
  if (auto v = reader.integer("seed", INT64_MIN, INT64_MAX)) options.sampling.seed = static_cast<uint64_t>(*v);
  if (const json* stop = reader.find("stop")) {
    if (stop->is_string()) {
      options.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array() && static_cast<int64_t>(stop->size()) <= limits.max_stop &&
               std::all_of(stop->begin(), stop->end(), [](const json& s) { return s.is_string(); })) {
      for (const json& s : *stop) options.stop.push_back(s.get<std::string>());
    } else {
      reader.fail(invalid_param(
          "stop", fmt::format("'stop' must be a string or an array of at most {} strings", limits.max_stop),
          "invalid_type"));
    }
    if (std::any_of(options.stop.begin(), options.stop.end(), [](const std::string& s) { return s.empty(); }))
      reader.fail(invalid_param("stop", "stop strings must not be empty", "invalid_value"));
    if (std::any_of(options.stop.begin(), options.stop.end(),
                    [&](const std::string& s) { return static_cast<int64_t>(s.size()) > limits.max_stop_bytes; }))
      reader.fail(invalid_param(
          "stop", fmt::format("stop strings may be at most {} bytes long on this server", limits.max_stop_bytes),
          "invalid_value"));
  }
  if (const json* ids = reader.find("stop_token_ids")) {
    if (!ids->is_array() || !std::all_of(ids->begin(), ids->end(), is_token_id))
      reader.fail(wrong_type("stop_token_ids", "an array of 32-bit integers", *ids));
    else
      for (const json& id : *ids) options.stop_token_ids.push_back(id.get<int32_t>());
  }
  options.ignore_eos = reader.boolean("ignore_eos").value_or(false);
  options.skip_special_tokens = reader.boolean("skip_special_tokens").value_or(true);
  // Checked and accepted: byte-level BPE tokenizers (all this server loads) decode special tokens without spaces
  // between them, as vLLM's fast-tokenizer path does whatever this flag says.
  (void)reader.boolean("spaces_between_special_tokens");
  options.return_token_ids = reader.boolean("return_token_ids").value_or(false);
  options.include_stop_str = reader.boolean("include_stop_str_in_output").value_or(false);
  options.tokens_as_ids = reader.boolean("return_tokens_as_token_ids").value_or(false);
  // vLLM's semantics without priority scheduling: only the default priority is accepted.
  if (auto priority = reader.integer("priority", INT32_MIN, INT32_MAX); priority && *priority != 0)
    reader.fail(invalid_param("priority",
                              "This server schedules requests first come, first served: 'priority' must be 0.",
                              "unsupported_value"));
  options.stream = reader.boolean("stream").value_or(false);
  if (const json* stream_options = reader.find("stream_options")) {
    if (!stream_options->is_object()) {
      reader.fail(wrong_type("stream_options", "an object", *stream_options));
    } else if (!options.stream) {
      reader.fail(invalid_param("stream_options",
                                "The 'stream_options' parameter is only allowed when 'stream' is "
                                "enabled.",
                                "invalid_value"));
    } else {
      FieldReader inner{*stream_options, std::nullopt};
      options.include_usage = inner.boolean("include_usage").value_or(false);
      if (inner.error) reader.fail(*inner.error);
    }
  }
  if (const json* bias = reader.find("logit_bias")) read_logit_bias(reader, *bias, options.sampling.logit_bias);
  if (auto v = reader.integer("min_tokens", 0, INT32_MAX)) {
    options.sampling.min_tokens = static_cast<int32_t>(*v);
    if (options.max_tokens && *v > *options.max_tokens)
      reader.fail(invalid_param("min_tokens", "'min_tokens' must not exceed 'max_tokens'.", "invalid_value"));
  }
  return options;
}

// The messages array itself; each message is checked and normalised for the chat template by chat_messages.h.
std::optional<ApiError> validate_messages(const json* messages, int32_t max_messages, json& out) {
  if (!messages)
    return invalid_param("messages", "Missing required parameter: 'messages'.", "missing_required_parameter");
  if (!messages->is_array()) return wrong_type("messages", "an array", *messages);
  if (messages->empty())
    return invalid_param("messages",
                         "Invalid 'messages': empty array. Expected an array with minimum length 1, but "
                         "got an empty array instead.",
                         "empty_array");
  if (static_cast<int64_t>(messages->size()) > max_messages)
    return invalid_param("messages",
                         fmt::format("Invalid 'messages': {} messages, more than this server's limit of {}.",
                                     messages->size(), max_messages),
                         "array_above_max_length");
  auto normalized = normalize_chat_messages(*messages);
  if (auto* error = std::get_if<ApiError>(&normalized)) return *error;
  out = std::move(std::get<json>(normalized));
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> check_fields(const json& body, const std::set<std::string, std::less<>>& endpoint_fields,
                                     bool strict) {
  for (const auto& [key, value] : body.items()) {
    if (kCommonFields.contains(key) || endpoint_fields.contains(key)) continue;
    if (strict)
      return invalid_param(key, fmt::format("Unrecognized request argument supplied: {}", key), "unknown_parameter");
    std::lock_guard lock(logged_fields_mutex);
    if (logged_fields.size() < kMaxLoggedFields && logged_fields.insert(key).second) {
      // The name is the client's: at most 64 bytes of it, printable ASCII only, so it cannot forge log lines.
      std::string shown = key.substr(0, 64);
      for (char& c : shown)
        if (c < 0x20 || c > 0x7e) c = '?';
      RS_LOG_WARN(
          "ignoring the unknown request field '{}' (logged once; --strict-request-params refuses such requests)",
          shown);
    }
  }
  return std::nullopt;
}

// Parses the body as a JSON object, or explains why it is not one. Nesting is capped while parsing, before anything
// copies the value: copying (and converting for the chat template) recurses once per level, so a deep body would
// overflow the HTTP thread's stack.
std::variant<json, ApiError> parse_body(std::string_view body, int max_depth) {
  max_depth = std::clamp(max_depth, 1, kMaxJsonDepth);
  bool too_deep = false;
  json parsed = json::parse(
      body,
      [&too_deep, max_depth](int depth, json::parse_event_t, json&) {
        if (depth >= max_depth) too_deep = true;
        return !too_deep;  // keep nothing once too deep: the body is refused anyway
      },
      /*allow_exceptions=*/false);
  if (too_deep)
    return invalid_param({},
                         fmt::format("The JSON body of your request is nested more than {} levels deep.", max_depth),
                         "invalid_json");
  if (parsed.is_discarded())
    return invalid_param({},
                         "We could not parse the JSON body of your request. The OpenAI API expects a JSON "
                         "payload, but what was sent was not valid JSON.",
                         "invalid_json");
  if (!parsed.is_object())
    return invalid_param({}, fmt::format("The request body must be a JSON object, not {}.", json_type_name(parsed)),
                         "invalid_json");
  return parsed;
}

engine::SamplingParams sampling_defaults(const nlohmann::json& generation_config) {
  engine::SamplingParams params;
  if (!generation_config.is_object()) return params;
  auto number = [&](const char* key, float fallback) {
    auto it = generation_config.find(key);
    return it != generation_config.end() && it->is_number() ? it->get<float>() : fallback;
  };
  // HF's do_sample=false means greedy unless the request asks otherwise.
  const bool sample = generation_config.value("do_sample", true);
  params.temperature = sample ? number("temperature", 1.0f) : 0.0f;
  params.top_p = number("top_p", 1.0f);
  params.top_k = static_cast<int32_t>(number("top_k", -1.0f));
  params.min_p = number("min_p", 0.0f);
  params.repetition_penalty = number("repetition_penalty", 1.0f);
  if (params.top_k == 0) params.top_k = -1;
  return params;
}

Parsed<ChatRequest> parse_chat_request(std::string_view body, const engine::SamplingParams& defaults,
                                       const RequestLimits& limits) {
  auto parsed = parse_body(body, limits.max_json_depth);
  if (auto* error = std::get_if<ApiError>(&parsed)) return *error;
  const json& object = std::get<json>(parsed);
  if (auto error = check_fields(object, kChatFields, limits.strict_fields)) return *error;
  FieldReader reader{object, std::nullopt};
  ChatRequest request;
  request.model = read_model(reader).value_or("");
  if (auto error =
          validate_messages(reader.error ? nullptr : reader.find("messages"), limits.max_messages, request.messages);
      error && !reader.error)
    reader.fail(*error);
  request.options = read_common(reader, defaults, limits);
  if (auto v = reader.integer("max_completion_tokens", 1, INT32_MAX))
    request.options.max_tokens = static_cast<int32_t>(*v);
  if (request.options.max_tokens == 0 && request.options.sampling.prompt_logprobs < 0)
    reader.fail(invalid_param("max_tokens", "'max_tokens' 0 needs 'prompt_logprobs' (only the prompt is scored).",
                              "invalid_value"));
  request.options.sampling.logprobs = reader.boolean("logprobs").value_or(false);
  if (auto v = reader.integer("top_logprobs", 0, limits.max_top_logprobs)) {
    if (!request.options.sampling.logprobs)
      reader.fail(invalid_param("top_logprobs", "'top_logprobs' requires 'logprobs' to be true", "invalid_value"));
    request.options.sampling.top_logprobs = static_cast<int32_t>(*v);
  }
  if (!reader.error)
    if (auto error = read_output_constraint(object, /*chat=*/true, request.options.constraint)) reader.fail(*error);
  for (const char* name : {"audio", "prediction", "functions", "function_call", "web_search_options"})
    reader.unsupported(name, "this server generates text only");
  if (const json* tools = reader.find("tools")) {
    if (!tools->is_array()) {
      reader.fail(wrong_type("tools", "an array", *tools));
    } else {
      request.template_extra["tools"] = *tools;
      request.options.tools = *tools;
    }
    const json* choice = reader.find("tool_choice");
    request.options.parse_tool_calls = tools->is_array() && !tools->empty() && !(choice && *choice == "none");
  }
  if (auto effort = reader.string("reasoning_effort")) {
    if (*effort != "low" && *effort != "medium" && *effort != "high")
      reader.fail(
          invalid_param("reasoning_effort",
                        fmt::format("Invalid 'reasoning_effort': '{}'. Expected 'low', 'medium' or 'high'.", *effort),
                        "invalid_value"));
    request.template_extra["reasoning_effort"] = *effort;
  }
  if (const json* kwargs = reader.find("chat_template_kwargs")) {
    if (!kwargs->is_object())
      reader.fail(wrong_type("chat_template_kwargs", "an object", *kwargs));
    else
      request.template_extra.update(*kwargs);
  }
  request.continue_final_message = reader.boolean("continue_final_message").value_or(false);
  const std::optional<bool> generation_prompt = reader.boolean("add_generation_prompt");
  if (request.continue_final_message && generation_prompt.value_or(false) && !reader.error)
    reader.fail(invalid_param("continue_final_message",
                              "'continue_final_message' and 'add_generation_prompt' cannot both be true.",
                              "invalid_value"));
  request.add_generation_prompt = generation_prompt.value_or(!request.continue_final_message);
  if (reader.error) return *reader.error;
  return request;
}

Parsed<CompletionRequest> parse_completion_request(std::string_view body, const engine::SamplingParams& defaults,
                                                   const RequestLimits& limits) {
  auto parsed = parse_body(body, limits.max_json_depth);
  if (auto* error = std::get_if<ApiError>(&parsed)) return *error;
  const json& object = std::get<json>(parsed);
  if (auto error = check_fields(object, kCompletionFields, limits.strict_fields)) return *error;
  FieldReader reader{object, std::nullopt};
  CompletionRequest request;
  request.model = read_model(reader).value_or("");
  const json* prompt = reader.find("prompt");
  auto is_token_list = [](const json& v) {
    return v.is_array() && !v.empty() && std::all_of(v.begin(), v.end(), is_token_id);
  };
  if (!reader.error && !prompt) {
    reader.fail(invalid_param("prompt", "Missing required parameter: 'prompt'.", "missing_required_parameter"));
  } else if (prompt && prompt->is_string()) {
    request.text_prompts.push_back(prompt->get<std::string>());
  } else if (prompt && is_token_list(*prompt)) {
    request.token_prompts.push_back(prompt->get<std::vector<int32_t>>());
  } else if (prompt && prompt->is_array() && !prompt->empty() &&
             std::all_of(prompt->begin(), prompt->end(), [](const json& p) { return p.is_string(); })) {
    for (const json& p : *prompt) request.text_prompts.push_back(p.get<std::string>());
  } else if (prompt && prompt->is_array() && !prompt->empty() &&
             std::all_of(prompt->begin(), prompt->end(), is_token_list)) {
    for (const json& p : *prompt) request.token_prompts.push_back(p.get<std::vector<int32_t>>());
  } else if (prompt) {
    reader.fail(invalid_param("prompt",
                              "'prompt' must be a string, an array of strings, an array of token ids, or "
                              "an array of token-id arrays, and not empty",
                              "invalid_type"));
  }
  request.options = read_common(reader, defaults, limits);
  if (!request.options.max_tokens) request.options.max_tokens = 16;  // the legacy endpoint's default
  if (auto v = reader.integer("logprobs", 0, std::min(5, limits.max_top_logprobs))) {
    request.options.sampling.logprobs = true;
    request.options.sampling.top_logprobs = static_cast<int32_t>(*v);
  }
  if (!reader.error)
    if (auto error = read_output_constraint(object, /*chat=*/false, request.options.constraint)) reader.fail(*error);
  request.options.echo = reader.boolean("echo").value_or(false);
  // echo with logprobs: the prompt's tokens lead the logprobs (the first with null), as OpenAI's legacy API did.
  if (request.options.echo && request.options.sampling.logprobs)
    request.options.sampling.prompt_logprobs =
        std::max(request.options.sampling.prompt_logprobs, request.options.sampling.top_logprobs);
  if (request.options.max_tokens == 0 && request.options.sampling.prompt_logprobs < 0)
    reader.fail(invalid_param("max_tokens",
                              "'max_tokens' 0 only scores the prompt: it needs 'echo' with 'logprobs', or "
                              "'prompt_logprobs'.",
                              "invalid_value"));
  if (auto suffix = reader.string("suffix"); suffix && !suffix->empty())
    reader.fail(invalid_param("suffix", "'suffix' is not supported", "unsupported_parameter"));
  if (auto best_of = reader.integer("best_of", 1, limits.max_n); best_of && *best_of != request.options.n)
    reader.fail(invalid_param("best_of", "'best_of' must equal 'n' when given", "unsupported_parameter"));
  if (reader.error) return *reader.error;
  return request;
}

bool unknown_field_logged(std::string_view name) {
  std::lock_guard lock(logged_fields_mutex);
  return logged_fields.contains(name);
}

}  // namespace rs::server
