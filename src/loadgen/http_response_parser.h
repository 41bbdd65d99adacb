// HttpResponseParser: an incremental HTTP/1.1 response parser for the load generator (`radixserve bench serve`):
// status line, headers, then a body framed by chunked transfer encoding, Content-Length, or the connection's end.
// Bytes may arrive split at any point; the decoded body is handed out as it arrives.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace rs::loadgen {

class HttpResponseParser {
 public:
  using BodySink = std::function<void(std::string_view)>;

  // Consumes `bytes` of the response; decoded body bytes go to `on_body` (possibly in several pieces). Returns false
  // once the response is malformed (error() says why); bytes after a complete response are a protocol error too.
  bool feed(std::string_view bytes, const BodySink& on_body);
  // The peer closed the connection: ends a body that runs to the close. Returns whether the response is complete.
  bool finish_on_close();

  bool done() const { return state_ == State::kDone; }
  bool failed() const { return state_ == State::kError; }
  bool headers_done() const { return state_ > State::kHeaders && state_ != State::kError; }
  int status() const { return status_; }
  // The connection may carry another request after this response (HTTP/1.1 without "Connection: close").
  bool keep_alive() const { return keep_alive_ && framed_; }
  const std::string& error() const { return error_; }
  // Ready for the next response on the same connection.
  void reset() { *this = HttpResponseParser(); }

 private:
  enum class State : uint8_t {
    kStatusLine,
    kHeaders,
    kBody,
    kChunkSize,
    kChunkData,
    kChunkEnd,
    kTrailers,
    kDone,
    kError
  };

  // Appends to line_ up to and including '\n'; returns the bytes used, and whether the line is complete.
  size_t take_line(std::string_view bytes, bool& complete);
  bool on_line(std::string_view line);  // a complete line (CR/LF stripped) in a line state
  bool on_header(std::string_view line);
  bool end_headers();
  bool fail(std::string message);

  State state_ = State::kStatusLine;
  std::string line_;  // the partial line being collected
  int status_ = 0;
  bool http11_ = true;
  bool keep_alive_ = true;
  bool chunked_ = false;
  bool framed_ = false;          // the body's end is known without closing (chunked or Content-Length)
  int64_t content_length_ = -1;  // -1: absent
  uint64_t remaining_ = 0;       // body or chunk bytes still to come
  std::string error_;
};

}  // namespace rs::loadgen
