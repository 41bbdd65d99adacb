// HarmonyParser: routes a gpt-oss answer's tokens by harmony channel, so that chat responses carry the "analysis"
// channel as reasoning_content and the "final" channel (and "commentary" messages) as content, instead of one text
// with the channel names glued in. Header tokens (role, channel, recipient, constraint) are never text.
// A message to a recipient "functions.NAME" (a tool call) takes the kToolCall route when tool calls are parsed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace rs::server {

// The harmony special tokens of a gpt-oss tokenizer.
struct HarmonyTokens {
  int32_t start = -1, end = -1, message = -1, channel = -1, constrain = -1, return_ = -1, call = -1;
  bool enabled() const { return message >= 0; }
};

class HarmonyParser {
 public:
  enum class Route : uint8_t { kNone, kReasoning, kContent, kToolCall };

  // The answer starts right after the prompt's "<|start|>assistant": in a message header. Without tool_calls,
  // messages to functions are content.
  HarmonyParser(const HarmonyTokens& tokens, bool tool_calls) : tokens_(tokens), tool_calls_(tool_calls) {}

  // Where the text of `token` goes (kNone: header and special tokens). `text` is the token's own text, read only
  // while reading_header() (the channel name); other callers may pass it empty. A message's route is fixed when its
  // <|message|> arrives.
  Route push(int32_t token, std::string_view text);
  // Whether the next push reads its token's text (decoding it costs a string per token; message tokens skip that).
  bool reading_header() const { return state_ == State::kHeader; }
  // True when a message just ended (its held-back text should be flushed to the route it had).
  bool message_ended() const { return message_ended_; }
  Route last_route() const { return last_route_; }
  // The route of the message being written (kNone between messages and in headers).
  Route current_route() const;
  // The function a kToolCall message calls ("get_weather" for "to=functions.get_weather").
  const std::string& function() const { return function_; }

 private:
  enum class State : uint8_t { kHeader, kMessage, kBetween, kRaw };

  Route route_for_header();

  const HarmonyTokens tokens_;
  const bool tool_calls_;
  std::string function_;
  State state_ = State::kHeader;
  std::string header_;  // header text (channel name, recipient) since the last <|start|>
  Route route_ = Route::kContent;
  Route last_route_ = Route::kContent;
  bool message_ended_ = false;
  int32_t header_tokens_ = 0;
};

}  // namespace rs::server
