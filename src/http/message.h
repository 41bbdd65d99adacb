// Request and Response of the HTTP layer, and the two kinds of body a handler may answer with later: a stream of
// chunks (SSE) or one whole response that is not ready yet (a non-streaming completion). Both are pulled by the
// connection on its own thread whenever the producer wakes it, so a waiting answer holds no thread.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rs::http {

using Headers = std::vector<std::pair<std::string, std::string>>;

// Case-insensitive header lookup; empty when absent.
std::string_view find_header(const Headers& headers, std::string_view name);

struct Request {
  std::string method;  // "GET", "POST", ...
  std::string path;    // the target without its query
  std::string query;   // after '?', undecoded; empty when none
  Headers headers;
  std::string body;
  std::string remote_addr;  // numeric peer address
  int remote_port = 0;

  std::string_view header(std::string_view name) const { return find_header(headers, name); }
};

// Wakes a waiting connection: callable from any thread, any number of times, also after the connection is gone.
using Waker = std::function<void()>;

// A body produced over time and sent as HTTP chunks (Transfer-Encoding: chunked) after the response's head.
class ChunkSource {
 public:
  virtual ~ChunkSource() = default;
  // Once, on the connection's thread, before the first pull: `wake` asks for a pull soon.
  virtual void start(Waker wake) = 0;
  // On the connection's thread after a wake, and at least every tick() while waiting. Appends what is ready to `out`;
  // returns true when the body is complete (`out` then holds its last bytes).
  virtual bool pull(std::string& out) = 0;
  // The client went away or the server stopped before the body was complete. No pull follows.
  virtual void abandon() = 0;
};

struct Response;

// A whole response that is computed elsewhere (the scheduler) and ready later.
class DeferredResponse {
 public:
  virtual ~DeferredResponse() = default;
  virtual void start(Waker wake) = 0;
  // The response once it is ready; nullopt while it is not.
  virtual std::optional<Response> poll() = 0;
  virtual void abandon() = 0;
};

struct Response {
  int status = 200;
  Headers headers;
  std::string content_type;  // empty: no Content-Type
  std::string body;
  std::shared_ptr<ChunkSource> chunks;         // set: the body is these chunks, not `body`
  std::shared_ptr<DeferredResponse> deferred;  // set: replaced by the deferred one (headers set here are kept)

  void set_header(std::string name, std::string value);
  bool has_header(std::string_view name) const { return !find_header(headers, name).empty(); }
  void set_content(std::string text, std::string type) {
    body = std::move(text);
    content_type = std::move(type);
  }
};

}  // namespace rs::http
