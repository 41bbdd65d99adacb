#include "server/harmony_parser.h"

namespace rs::server {
namespace {

// A model that writes this many header tokens without a <|message|> is not following harmony: its text is shown as is.
constexpr int32_t kMaxHeaderTokens = 64;

}  // namespace

HarmonyParser::Route HarmonyParser::route_for_header() {
  // header_: what followed <|start|> (role, " to=recipient") and <|channel|> (name, " to=recipient", ...).
  if (const size_t to = header_.find("to=functions."); tool_calls_ && to != std::string::npos) {
    const std::string_view rest = std::string_view(header_).substr(to + 13);
    function_ = std::string(rest.substr(0, rest.find_first_of(" <")));
    return Route::kToolCall;
  }
  const size_t at = header_.find("<|channel|>");
  std::string_view channel = at == std::string::npos ? std::string_view() : std::string_view(header_).substr(at + 11);
  channel = channel.substr(0, channel.find_first_of(" <"));
  if (channel == "analysis") return Route::kReasoning;
  return Route::kContent;  // final, commentary preambles, or no channel
}

HarmonyParser::Route HarmonyParser::current_route() const {
  switch (state_) {
    case State::kMessage: return route_;
    case State::kRaw: return Route::kContent;
    default: return Route::kNone;
  }
}

HarmonyParser::Route HarmonyParser::push(int32_t token, std::string_view text) {
  message_ended_ = false;
  switch (state_) {
    case State::kRaw: return Route::kContent;
    case State::kHeader:
      if (token == tokens_.message) {
        route_ = route_for_header();
        state_ = State::kMessage;
        return Route::kNone;
      }
      if (++header_tokens_ > kMaxHeaderTokens) {
        state_ = State::kRaw;
        return Route::kContent;
      }
      header_ += token == tokens_.channel     ? std::string_view("<|channel|>")
                 : token == tokens_.constrain ? std::string_view("<|constrain|>")
                                              : text;
      return Route::kNone;
    case State::kMessage:
      if (token == tokens_.end || token == tokens_.return_ || token == tokens_.call || token == tokens_.start) {
        message_ended_ = true;
        last_route_ = route_;
        state_ = token == tokens_.start ? State::kHeader : State::kBetween;
        header_.clear(), header_tokens_ = 0;
        return Route::kNone;
      }
      return route_;
    case State::kBetween:
      if (token == tokens_.start) {
        state_ = State::kHeader;
        header_.clear(), header_tokens_ = 0;
      }
      return Route::kNone;
  }
  return Route::kNone;
}

}  // namespace rs::server
