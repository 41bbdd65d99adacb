#include "server/tool_call_parser.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "server/partial_tag.h"

namespace rs::server {
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

}  // namespace

void ToolCallParser::close_call(Output& out) {
  const nlohmann::json call = nlohmann::json::parse(call_, nullptr, /*allow_exceptions=*/false);
  const bool valid = call.is_object() && call.contains("name") && call["name"].is_string() &&
                     (!call.contains("arguments") || call["arguments"].is_object() || call["arguments"].is_string());
  if (valid) {
    const nlohmann::json arguments = call.value("arguments", nlohmann::json::object());
    out.calls.push_back(
        {call["name"].get<std::string>(), arguments.is_string() ? arguments.get<std::string>() : arguments.dump()});
  } else {
    out.content.append(kOpen).append(call_).append(kClose);
  }
  call_.clear();
  in_call_ = false;
}

ToolCallParser::Output ToolCallParser::feed(std::string_view piece) {
  Output out;
  std::string text = std::move(pending_);
  text.append(piece);
  pending_.clear();
  std::string_view rest = text;
  while (!rest.empty()) {
    const std::string_view tag = in_call_ ? kClose : kOpen;
    const size_t at = rest.find(tag);
    if (at != std::string_view::npos) {
      (in_call_ ? call_ : out.content).append(rest.substr(0, at));
      rest.remove_prefix(at + tag.size());
      if (in_call_)
        close_call(out);
      else
        in_call_ = true;
      continue;
    }
    const size_t keep = partial_tag_suffix(rest, tag);
    (in_call_ ? call_ : out.content).append(rest.substr(0, rest.size() - keep));
    pending_.assign(rest.substr(rest.size() - keep));
    break;
  }
  return out;
}

ToolCallParser::Output ToolCallParser::finish() {
  Output out;
  if (in_call_) out.content.append(kOpen).append(call_);
  out.content.append(pending_);
  call_.clear(), pending_.clear();
  in_call_ = false;
  return out;
}

}  // namespace rs::server
