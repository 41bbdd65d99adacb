// Anthropic's Messages API (POST /v1/messages) on top of the chat pipeline: a request is translated into the
// equivalent OpenAI chat request (system, content blocks, tool_use / tool_result, tools, tool_choice, thinking) and
// the chat's results are written back as a Message or as Messages' stream events (message_start,
// content_block_start/delta/stop for text, thinking and tool_use blocks, message_delta, message_stop). Pure JSON and
// text building; no I/O.
#pragma once

#include <string>
#include <variant>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/generation.h"
#include "server/openai_response.h"

namespace rs::server {

// The OpenAI chat request body equivalent to an Anthropic Messages request, or the 400 it deserves (missing
// max_tokens, an unknown block type, an image). count_tokens requests carry no max_tokens (require_max_tokens false).
std::variant<nlohmann::ordered_json, ApiError> anthropic_to_chat(const std::string& body,
                                                                 bool require_max_tokens = true);

// {"type": "error", "error": {"type": ..., "message": ...}} with Anthropic's error type for the status.
nlohmann::json anthropic_error_json(const ApiError& error);

// The whole non-streaming Message for one choice.
nlohmann::json anthropic_message(const std::string& id, const std::string& model, const ChoiceResult& choice,
                                 const Usage& usage);

// Messages' stream events for one choice, as "event: NAME\ndata: JSON\n\n" text, fed with the chat's deltas.
class AnthropicStream {
 public:
  AnthropicStream(std::string id, std::string model) : id_(std::move(id)), model_(std::move(model)) {}
  std::string start(int64_t input_tokens);  // message_start and a ping
  std::string delta(const ChoiceDelta& delta);
  std::string finish(const Usage& usage);  // closes the open block; message_delta and message_stop
  std::string error(const ApiError& error) const;

 private:
  enum class Block { kNone, kThinking, kText };
  // Opens a block of `type` at the next index (closing the open one) unless it is already open.
  void open(Block type, std::string& out);
  void close(std::string& out);

  std::string id_, model_;
  Block open_ = Block::kNone;
  int32_t next_index_ = 0;
  std::string stop_reason_ = "end_turn";
  std::string stop_sequence_;
};

}  // namespace rs::server
