#include "loadgen/http_response_parser.h"

#include <algorithm>
#include <charconv>

namespace rs::loadgen {
namespace {

constexpr size_t kMaxLineBytes = 64 * 1024;  // a status, header or chunk-size line longer than this is malformed

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return (x | 0x20) == (y | 0x20); });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// Whether a comma-separated header value lists `token` (case-insensitive).
bool lists_token(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    if (iequals(trim(value.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

bool HttpResponseParser::fail(std::string message) {
  state_ = State::kError;
  error_ = std::move(message);
  return false;
}

size_t HttpResponseParser::take_line(std::string_view bytes, bool& complete) {
  const size_t newline = bytes.find('\n');
  complete = newline != std::string_view::npos;
  const size_t used = complete ? newline + 1 : bytes.size();
  line_.append(bytes.data(), complete ? newline : used);
  if (!line_.empty() && line_.back() == '\r' && complete) line_.pop_back();
  return used;
}

bool HttpResponseParser::feed(std::string_view bytes, const BodySink& on_body) {
  while (!bytes.empty()) {
    switch (state_) {
      case State::kError: return false;
      case State::kDone: return fail("bytes after the end of the response");
      case State::kBody:
      case State::kChunkData: {
        const size_t take = remaining_ > 0 ? static_cast<size_t>(std::min<uint64_t>(remaining_, bytes.size()))
                                           : bytes.size();  // remaining_ 0 in kBody: until the connection closes
        on_body(bytes.substr(0, take));
        bytes.remove_prefix(take);
        if (remaining_ == 0) break;
        remaining_ -= take;
        if (remaining_ == 0) state_ = state_ == State::kBody ? State::kDone : State::kChunkEnd;
        break;
      }
      default: {
        bool complete = false;
        bytes.remove_prefix(take_line(bytes, complete));
        if (line_.size() > kMaxLineBytes) return fail("header or chunk-size line too long");
        if (!complete) break;
        const std::string line = std::move(line_);
        line_.clear();
        if (!on_line(line)) return false;
      }
    }
  }
  return state_ != State::kError;
}

bool HttpResponseParser::on_line(std::string_view line) {
  switch (state_) {
    case State::kStatusLine: {
      // "HTTP/1.1 200 OK"
      if (line.size() < 12 || line.substr(0, 5) != "HTTP/" || line[8] != ' ') return fail("bad status line");
      http11_ = line.substr(5, 3) == "1.1";
      keep_alive_ = http11_;
      const auto [end, ec] = std::from_chars(line.data() + 9, line.data() + 12, status_);
      if (ec != std::errc() || end != line.data() + 12 || status_ < 100) return fail("bad status code");
      state_ = State::kHeaders;
      return true;
    }
    case State::kHeaders: return line.empty() ? end_headers() : on_header(line);
    case State::kChunkSize: {
      const std::string_view size = trim(line.substr(0, line.find(';')));
      uint64_t bytes = 0;
      const auto [end, ec] = std::from_chars(size.data(), size.data() + size.size(), bytes, 16);
      if (size.empty() || ec != std::errc() || end != size.data() + size.size()) return fail("bad chunk size");
      remaining_ = bytes;
      state_ = bytes == 0 ? State::kTrailers : State::kChunkData;
      return true;
    }
    case State::kChunkEnd:
      if (!line.empty()) return fail("chunk data longer than its size");
      state_ = State::kChunkSize;
      return true;
    case State::kTrailers:
      if (line.empty()) state_ = State::kDone;
      return true;
    default: return fail("internal parser state");
  }
}

bool HttpResponseParser::on_header(std::string_view line) {
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0) return fail("bad header line");
  const std::string_view name = line.substr(0, colon), value = trim(line.substr(colon + 1));
  if (iequals(name, "transfer-encoding")) {
    chunked_ = lists_token(value, "chunked");
  } else if (iequals(name, "content-length")) {
    int64_t length = -1;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), length);
    if (ec != std::errc() || end != value.data() + value.size() || length < 0) return fail("bad Content-Length");
    content_length_ = length;
  } else if (iequals(name, "connection")) {
    if (lists_token(value, "close")) keep_alive_ = false;
    if (lists_token(value, "keep-alive")) keep_alive_ = true;
  }
  return true;
}

bool HttpResponseParser::end_headers() {
  if (status_ < 200) {  // 100 Continue and other interim responses: the real one follows
    state_ = State::kStatusLine;
    return true;
  }
  framed_ = true;
  if (status_ == 204 || status_ == 304) {
    state_ = State::kDone;
  } else if (chunked_) {
    state_ = State::kChunkSize;
  } else if (content_length_ >= 0) {
    remaining_ = static_cast<uint64_t>(content_length_);
    state_ = remaining_ == 0 ? State::kDone : State::kBody;
  } else {
    framed_ = false;  // the body runs to the connection's end
    remaining_ = 0;
    state_ = State::kBody;
  }
  return true;
}

bool HttpResponseParser::finish_on_close() {
  if (state_ == State::kBody && !framed_) state_ = State::kDone;
  return state_ == State::kDone;
}

}  // namespace rs::loadgen
