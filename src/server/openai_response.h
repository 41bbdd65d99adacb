// Response bodies shaped like OpenAI's: chat.completion / text_completion objects, their streamed chunks, usage and
// logprobs. Pure JSON building; no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/generation.h"
#include "server/model_text.h"
#include "server/openai_request.h"

namespace rs::server {

// kMessages: Anthropic's /v1/messages, run as a chat and answered in its own shapes (anthropic_messages.h).
// kResponses: OpenAI's /v1/responses, likewise (openai_responses.h).
enum class Endpoint : uint8_t { kChat, kCompletion, kMessages, kResponses, kEmbeddings };

// A choice accumulated over the whole call (non-streaming responses).
struct ChoiceResult {
  std::string text;
  std::string reasoning;
  std::vector<ToolCall> tool_calls;
  std::vector<int32_t> token_ids;
  std::vector<engine::SampledToken> sampled;
  std::vector<engine::SampledToken> prompt_logprobs;  // scored prompt (ChoiceDelta::prompt_logprobs)
  std::string finish_reason;
  std::string stop_sequence;  // the stop string that ended it, if one did

  void append(const ChoiceDelta& delta);
};

class ResponseBuilder {
 public:
  ResponseBuilder(Endpoint endpoint, std::string model_name, const GenerationOptions& options, const ModelText& text);

  const std::string& id() const { return id_; }
  // One streamed chunk for `delta`; `first` adds the assistant role (chat). Call in stream order: completions'
  // logprobs.text_offset counts on from the choice's earlier chunks.
  nlohmann::json chunk(const ChoiceDelta& delta, bool first);
  // The usage-only chunk sent last when stream_options.include_usage is set.
  nlohmann::json usage_chunk(const Usage& usage) const;
  // The whole non-streaming response.
  nlohmann::json response(const std::vector<ChoiceResult>& choices, const Usage& usage) const;

 private:
  nlohmann::json base(const char* object) const;
  // `text_offset`: bytes of the choice's text before these tokens; advanced past them.
  // Completions with echo: the scored prompt's tokens come first (the first with null logprob and alternatives).
  nlohmann::json logprobs(const std::vector<engine::SampledToken>& sampled, int64_t& text_offset,
                          const std::vector<engine::SampledToken>& prompt = {}) const;
  // vLLM's choice-level prompt_logprobs: [null, {"<id>": {logprob, rank, decoded_token}, ...}, ...].
  nlohmann::json prompt_logprobs_json(const std::vector<engine::SampledToken>& prompt) const;
  // A token as logprobs name it: its text, or "token_id:N" with return_tokens_as_token_ids.
  std::string token_name(int32_t token) const;
  // A token's bytes for chat logprobs: its raw bytes, or its name's without a tokenizer.
  nlohmann::json token_bytes(int32_t token) const;
  static nlohmann::json usage_json(const Usage& usage);
  static nlohmann::json tool_calls_json(const std::vector<ToolCall>& calls, int32_t first_index);

  Endpoint endpoint_;
  std::string id_;
  int64_t created_;
  std::string model_;
  GenerationOptions options_;
  const ModelText& text_;
  std::vector<int64_t> stream_offsets_;  // [choice index] bytes of text streamed so far (completions' text_offset)
};

}  // namespace rs::server
