#include "loadgen/sse_parser.h"

namespace rs::loadgen {

void SseParser::feed(std::string_view bytes, const EventSink& on_event) {
  while (!bytes.empty()) {
    if (after_cr_) {
      after_cr_ = false;
      if (bytes.front() == '\n') bytes.remove_prefix(1);
      continue;
    }
    const size_t end = bytes.find_first_of("\r\n");
    if (end == std::string_view::npos) {
      line_.append(bytes);
      return;
    }
    after_cr_ = bytes[end] == '\r';
    if (line_.empty()) {
      on_line(bytes.substr(0, end), on_event);  // the usual case: a whole line in one read, no copy
    } else {
      line_.append(bytes.substr(0, end));
      const std::string line = std::move(line_);
      line_.clear();
      on_line(line, on_event);
    }
    bytes.remove_prefix(end + 1);
  }
}

void SseParser::on_line(std::string_view line, const EventSink& on_event) {
  if (line.empty()) {
    if (has_data_) on_event(data_);
    data_.clear();
    has_data_ = false;
    return;
  }
  if (line.front() == ':') return;  // comment
  const size_t colon = line.find(':');
  const std::string_view field = line.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field != "data") return;
  if (has_data_) data_ += '\n';
  data_.append(value);
  has_data_ = true;
}

}  // namespace rs::loadgen
