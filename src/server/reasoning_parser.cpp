#include "server/reasoning_parser.h"

#include <algorithm>

#include "server/partial_tag.h"

namespace rs::server {
namespace {

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

}  // namespace

ReasoningParser::ReasoningParser(std::string open_tag, std::string close_tag, bool starts_in_reasoning)
    : open_(std::move(open_tag)),
      close_(std::move(close_tag)),
      state_(starts_in_reasoning ? State::kReasoning : State::kBeforeReasoning) {}

void ReasoningParser::emit(std::string_view text, Split& out) {
  if (state_ == State::kReasoning) {
    out.reasoning.append(text);
    return;
  }
  if (skip_space_) {
    while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
    if (text.empty()) return;
    skip_space_ = false;
  }
  out.content.append(text);
}

ReasoningParser::Split ReasoningParser::feed(std::string_view piece) {
  Split out;
  std::string text = std::move(pending_);
  text.append(piece);
  pending_.clear();
  std::string_view rest = text;
  while (!rest.empty()) {
    if (state_ == State::kContent) {  // after the reasoning everything is reply
      emit(rest, out);
      break;
    }
    // Before the reasoning only leading whitespace may precede an opening tag; other text means the model answers
    // without thinking.
    const std::string& tag = state_ == State::kReasoning ? close_ : open_;
    const size_t at = rest.find(tag);
    if (at != std::string_view::npos) {
      if (state_ == State::kBeforeReasoning && !std::all_of(rest.begin(), rest.begin() + at, is_space)) {
        state_ = State::kContent;
        continue;
      }
      if (state_ == State::kReasoning) emit(rest.substr(0, at), out);
      state_ = state_ == State::kReasoning ? State::kContent : State::kReasoning;
      skip_space_ = state_ == State::kContent;
      rest.remove_prefix(at + tag.size());
      continue;
    }
    const size_t keep = partial_tag_suffix(rest, tag);
    if (state_ == State::kBeforeReasoning) {
      const std::string_view head = rest.substr(0, rest.size() - keep);
      if (!std::all_of(head.begin(), head.end(), is_space)) {
        state_ = State::kContent;
        continue;
      }
      pending_.assign(rest);  // whitespace (and maybe the start of the tag): undecided
      break;
    }
    emit(rest.substr(0, rest.size() - keep), out);
    pending_.assign(rest.substr(rest.size() - keep));
    break;
  }
  return out;
}

ReasoningParser::Split ReasoningParser::finish() {
  Split out;
  std::string rest = std::move(pending_);
  pending_.clear();
  if (state_ == State::kBeforeReasoning) state_ = State::kContent;
  emit(rest, out);
  return out;
}

}  // namespace rs::server
