// OpenAI request bodies (/v1/chat/completions, /v1/completions) parsed and validated into plain structs.
// Every user mistake comes back as an ApiError value; nothing here throws on bad input.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/sampling_params.h"
#include "server/api_error.h"
#include "server/structured_output.h"

namespace rs::server {

// What both endpoints share once validated.
struct GenerationOptions {
  int32_t n = 1;                        // choices per prompt
  std::optional<int32_t> max_tokens;    // none: the endpoint's default
  std::vector<std::string> stop;        // stop strings (not included in the output)
  std::vector<int32_t> stop_token_ids;  // extra stop tokens besides the model's EOS
  bool ignore_eos = false;
  bool skip_special_tokens = true;
  bool stream = false;
  bool include_usage = false;          // stream_options.include_usage
  bool return_token_ids = false;       // extension: choices carry token_ids (for models without a tokenizer)
  bool include_stop_str = false;       // vLLM's include_stop_str_in_output: a matched stop string stays in the text
  bool tokens_as_ids = false;          // vLLM's return_tokens_as_token_ids: logprobs name tokens "token_id:N"
  bool echo = false;                   // completions: the prompt's text comes first in each choice
  bool prompt_logprobs_field = false;  // vLLM's prompt_logprobs asked: each choice carries "prompt_logprobs"
  bool separate_reasoning = false;     // chat with --reasoning-parser: reasoning goes to reasoning_content
  bool parse_tool_calls = false;       // chat with tools (tool_choice not "none") and a model whose calls are parsed
  nlohmann::ordered_json tools;        // the chat's tools (parsers type call arguments by their schemas), or null
  engine::SamplingParams sampling;     // logprobs / top_logprobs included
  OutputConstraint constraint;         // structured output (response_format, regex, ebnf, guided_*, tool_choice)
  // The constraint compiled for the served model (by the handler); null when there is none.
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
};

struct ChatRequest {
  std::string model;
  // Key order is kept (ordered_json): chat templates print tool schemas in the order the client sent them.
  nlohmann::ordered_json messages;  // validated and normalised for the chat template (chat_messages.h)
  nlohmann::ordered_json template_extra = nlohmann::ordered_json::object();  // tools, reasoning_effort, kwargs
  bool add_generation_prompt = true;
  bool continue_final_message = false;  // the prompt ends inside the final message (then no generation prompt)
  GenerationOptions options;
};

struct CompletionRequest {
  std::string model;
  std::vector<std::string> text_prompts;  // exactly one of these two is non-empty
  std::vector<std::vector<int32_t>> token_prompts;
  GenerationOptions options;
};

template <typename T>
using Parsed = std::variant<T, ApiError>;

// The request body as a JSON object, nesting capped while parsing (max_depth), or the 400 that says why it is not one.
std::variant<nlohmann::ordered_json, ApiError> parse_body(std::string_view body, int max_depth);
// Top-level fields neither common to the generation endpoints nor in endpoint_fields: each logged once and ignored
// (as vLLM and SGLang), or a 400 unknown_parameter when strict (as OpenAI).
std::optional<ApiError> check_fields(const nlohmann::ordered_json& body,
                                     const std::set<std::string, std::less<>>& endpoint_fields, bool strict);

// Containers a request body may nest (arrays and objects, the body itself counted) by default, and at most.
constexpr int kMaxJsonDepth = 64;

// What one request may ask for. Each is a `serve` option; a request past one gets a 400 that names the limit.
struct RequestLimits {
  int32_t max_json_depth = kMaxJsonDepth;  // nesting of the body (<= kMaxJsonDepth: copies recurse per level)
  int32_t max_messages = 1024;             // chat messages per request
  int32_t max_n = 128;                     // choices per prompt
  int32_t max_stop = 4;                    // stop strings per request (OpenAI's limit)
  int32_t max_stop_bytes = 1024;           // bytes per stop string
  int32_t max_top_logprobs = 20;           // chat top_logprobs; completions logprobs take min(5, this)
  int64_t max_prompt_tokens = 0;           // per prompt, after the chat template; 0 = only the context length
  int32_t max_tokens = 0;                  // max_tokens a request may ask for (and the default); 0 = the context's room
  // Unknown top-level fields: false (the default, as vLLM and SGLang) accepts and ignores them, logging each field name
  // once; true (--strict-request-params) answers 400 unknown_parameter, as OpenAI does.
  bool strict_fields = false;
};

// Whether check_unknown_field has logged `name` already (process-wide; for tests).
bool unknown_field_logged(std::string_view name);

// `defaults` carries the model's generation_config.json sampling values, used where the request is silent.
Parsed<ChatRequest> parse_chat_request(std::string_view body, const engine::SamplingParams& defaults,
                                       const RequestLimits& limits = {});
Parsed<CompletionRequest> parse_completion_request(std::string_view body, const engine::SamplingParams& defaults,
                                                   const RequestLimits& limits = {});

// Sampling defaults from generation_config.json (temperature, top_p, top_k, min_p, repetition_penalty).
engine::SamplingParams sampling_defaults(const nlohmann::json& generation_config);

}  // namespace rs::server
