// SseParser: splits a text/event-stream body into events, as the WHATWG EventSource rules do for the data field:
// lines end at CRLF, LF or CR; "data:" lines (one leading space dropped) are joined with '\n'; a blank line
// dispatches the event; comments (":...") and other fields are ignored. Bytes may arrive split at any point.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace rs::loadgen {

class SseParser {
 public:
  using EventSink = std::function<void(std::string_view data)>;

  // Consumes body bytes; calls `on_event` with the data of each complete event that has a data field.
  void feed(std::string_view bytes, const EventSink& on_event);
  // Bytes of a partial line or event held back, waiting for their end.
  size_t pending_bytes() const { return line_.size() + data_.size(); }

 private:
  void on_line(std::string_view line, const EventSink& on_event);

  std::string line_;       // the partial line
  std::string data_;       // data lines of the current event, joined
  bool has_data_ = false;  // the current event has a data field (possibly empty)
  bool after_cr_ = false;  // the last byte was a CR: a following LF belongs to that line end
};

}  // namespace rs::loadgen
