#include "server/openai_response.h"

#include "server/ids.h"

#include <fmt/format.h>

#include <chrono>

namespace rs::server {
namespace {

using nlohmann::json;

json utf8_bytes(const std::string& text) {
  json bytes = json::array();
  for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
  return bytes;
}

}  // namespace

void ChoiceResult::append(const ChoiceDelta& delta) {
  text += delta.text;
  reasoning += delta.reasoning;
  tool_calls.insert(tool_calls.end(), delta.tool_calls.begin(), delta.tool_calls.end());
  token_ids.insert(token_ids.end(), delta.token_ids.begin(), delta.token_ids.end());
  sampled.insert(sampled.end(), delta.sampled.begin(), delta.sampled.end());
  prompt_logprobs.insert(prompt_logprobs.end(), delta.prompt_logprobs.begin(), delta.prompt_logprobs.end());
  if (!delta.finish_reason.empty()) finish_reason = delta.finish_reason;
  if (!delta.stop_sequence.empty()) stop_sequence = delta.stop_sequence;
}

ResponseBuilder::ResponseBuilder(Endpoint endpoint, std::string model_name, const GenerationOptions& options,
                                 const ModelText& text)
    : endpoint_(endpoint),
      id_(random_id(endpoint == Endpoint::kChat        ? "chatcmpl-"
                    : endpoint == Endpoint::kMessages  ? "msg_"
                    : endpoint == Endpoint::kResponses ? "resp_"
                                                       : "cmpl-")),
      created_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                   .count()),
      model_(std::move(model_name)),
      options_(options),
      text_(text) {}

json ResponseBuilder::base(const char* object) const {
  return {{"id", id_}, {"object", object}, {"created", created_}, {"model", model_}, {"system_fingerprint", nullptr}};
}

json ResponseBuilder::usage_json(const Usage& usage) {
  json out = {{"prompt_tokens", usage.prompt_tokens},
              {"completion_tokens", usage.completion_tokens},
              {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", usage.cached_tokens}}}};
  const spec::SpecTotals& spec = usage.speculative;
  if (spec.verifies > 0)  // an extension (as SGLang reports accept length): only where speculation ran
    out["speculative"] = {
        {"verify_steps", spec.verifies},
        {"draft_tokens", spec.drafted},
        {"accepted_tokens", spec.accepted},
        {"acceptance_rate", spec.drafted > 0 ? static_cast<double>(spec.accepted) / spec.drafted : 0.0},
        {"accept_length", 1.0 + static_cast<double>(spec.accepted) / spec.verifies}};
  return out;
}

std::string ResponseBuilder::token_name(int32_t token) const {
  return options_.tokens_as_ids ? "token_id:" + std::to_string(token) : text_.token_text(token);
}

json ResponseBuilder::token_bytes(int32_t token) const {
  return utf8_bytes(text_.has_tokenizer() ? text_.token_bytes(token) : token_name(token));
}

// Offsets count the bytes each token adds to the text (a token holding part of a character adds those bytes, though
// its text alone shows U+FFFD).
json ResponseBuilder::prompt_logprobs_json(const std::vector<engine::SampledToken>& prompt) const {
  json out = json::array();
  for (const auto& token : prompt) {
    if (token.rank == 0) {  // the first prompt token: nothing precedes it
      out.push_back(nullptr);
      continue;
    }
    json entry = json::object();
    entry[std::to_string(token.token_id)] = {
        {"logprob", token.logprob}, {"rank", token.rank}, {"decoded_token", token_name(token.token_id)}};
    for (size_t i = 0; i < token.top_logprobs.size(); ++i) {
      const auto& alt = token.top_logprobs[i];
      const std::string key = std::to_string(alt.token_id);
      if (entry.contains(key)) continue;
      entry[key] = {{"logprob", alt.logprob}, {"rank", i + 1}, {"decoded_token", token_name(alt.token_id)}};
    }
    out.push_back(std::move(entry));
  }
  return out;
}

json ResponseBuilder::logprobs(const std::vector<engine::SampledToken>& sampled, int64_t& text_offset,
                               const std::vector<engine::SampledToken>& prompt) const {
  if (!options_.sampling.logprobs) return nullptr;
  if (endpoint_ == Endpoint::kChat) {
    json content = json::array();
    for (const auto& token : sampled) {
      const std::string text = token_name(token.token_id);
      json top = json::array();
      for (const auto& alt : token.top_logprobs) {
        if (static_cast<int32_t>(top.size()) >= options_.sampling.top_logprobs) break;
        const std::string alt_text = token_name(alt.token_id);
        top.push_back({{"token", alt_text}, {"logprob", alt.logprob}, {"bytes", token_bytes(alt.token_id)}});
      }
      content.push_back(
          {{"token", text}, {"logprob", token.logprob}, {"bytes", token_bytes(token.token_id)}, {"top_logprobs", top}});
    }
    return {{"content", content}, {"refusal", nullptr}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array(), offsets = json::array();
  if (options_.echo)
    for (const auto& token : prompt) {
      tokens.push_back(token_name(token.token_id));
      json top = json::object();
      for (const auto& alt : token.top_logprobs) {
        if (static_cast<int32_t>(top.size()) >= options_.sampling.top_logprobs) break;
        top[token_name(alt.token_id)] = alt.logprob;
      }
      token_logprobs.push_back(token.rank == 0 ? json(nullptr) : json(token.logprob));
      top_logprobs.push_back(token.rank == 0 ? json(nullptr) : top);
      offsets.push_back(text_offset);
      text_offset += static_cast<int64_t>(text_.token_bytes(token.token_id).size());
    }
  for (const auto& token : sampled) {
    const std::string text = token_name(token.token_id);
    tokens.push_back(text);
    token_logprobs.push_back(token.logprob);
    json top = json::object();
    for (const auto& alt : token.top_logprobs) {
      if (static_cast<int32_t>(top.size()) >= options_.sampling.top_logprobs) break;
      top[token_name(alt.token_id)] = alt.logprob;
    }
    top_logprobs.push_back(top);
    offsets.push_back(text_offset);
    text_offset += static_cast<int64_t>(text_.token_bytes(token.token_id).size());
  }
  return {
      {"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top_logprobs}, {"text_offset", offsets}};
}

// OpenAI's tool_calls: [{id, type: "function", function: {name, arguments}}]; streamed deltas also carry the call's
// index (first_index >= 0), each call arriving whole in one delta.
json ResponseBuilder::tool_calls_json(const std::vector<ToolCall>& calls, int32_t first_index) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json call = {{"id", random_id("call_")},
                 {"type", "function"},
                 {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (first_index >= 0) call["index"] = first_index + static_cast<int32_t>(i);
    out.push_back(std::move(call));
  }
  return out;
}

json ResponseBuilder::chunk(const ChoiceDelta& delta, bool first) {
  if (static_cast<size_t>(delta.index) >= stream_offsets_.size()) stream_offsets_.resize(delta.index + 1, 0);
  json choice = {{"index", delta.index},
                 {"logprobs", logprobs(delta.sampled, stream_offsets_[delta.index], delta.prompt_logprobs)},
                 {"finish_reason", delta.finish_reason.empty() ? json(nullptr) : json(delta.finish_reason)}};
  if (options_.return_token_ids) choice["token_ids"] = delta.token_ids;
  if (options_.prompt_logprobs_field && !delta.prompt_logprobs.empty())
    choice["prompt_logprobs"] = prompt_logprobs_json(delta.prompt_logprobs);
  json out;
  if (endpoint_ == Endpoint::kChat) {
    out = base("chat.completion.chunk");
    json message = json::object();
    if (first) message["role"] = "assistant";
    if (!delta.reasoning.empty()) message["reasoning_content"] = delta.reasoning;
    if (!delta.text.empty() || (first && delta.reasoning.empty())) message["content"] = delta.text;
    if (!delta.tool_calls.empty()) message["tool_calls"] = tool_calls_json(delta.tool_calls, delta.first_tool_index);
    choice["delta"] = message;
  } else {
    out = base("text_completion");
    choice["text"] = delta.text;
  }
  out["choices"] = json::array({choice});
  if (options_.include_usage) out["usage"] = nullptr;
  return out;
}

json ResponseBuilder::usage_chunk(const Usage& usage) const {
  json out = base(endpoint_ == Endpoint::kChat ? "chat.completion.chunk" : "text_completion");
  out["choices"] = json::array();
  out["usage"] = usage_json(usage);
  return out;
}

json ResponseBuilder::response(const std::vector<ChoiceResult>& choices, const Usage& usage) const {
  json out = base(endpoint_ == Endpoint::kChat ? "chat.completion" : "text_completion");
  json list = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceResult& result = choices[i];
    int64_t text_offset = 0;
    json choice = {{"index", i},
                   {"logprobs", logprobs(result.sampled, text_offset, result.prompt_logprobs)},
                   {"finish_reason", result.finish_reason}};
    if (options_.prompt_logprobs_field) choice["prompt_logprobs"] = prompt_logprobs_json(result.prompt_logprobs);
    if (endpoint_ == Endpoint::kChat) {
      choice["message"] = {{"role", "assistant"}, {"content", result.text}, {"refusal", nullptr}};
      if (!result.tool_calls.empty()) {
        choice["message"]["tool_calls"] = tool_calls_json(result.tool_calls, -1);
        if (result.text.find_first_not_of(" \n\r\t") == std::string::npos) choice["message"]["content"] = nullptr;
      }
      if (options_.separate_reasoning)
        choice["message"]["reasoning_content"] = result.reasoning.empty() ? json(nullptr) : json(result.reasoning);
    } else {
      choice["text"] = result.text;
    }
    if (options_.return_token_ids) choice["token_ids"] = result.token_ids;
    list.push_back(std::move(choice));
  }
  out["choices"] = std::move(list);
  out["usage"] = usage_json(usage);
  return out;
}

}  // namespace rs::server
