// OpenAI's Responses API (POST /v1/responses, GET and DELETE /v1/responses/{id}) on top of the chat pipeline: a
// request (input text or items, instructions, function tools and their outputs, previous_response_id) is translated
// into the chat it stands for, and the chat's results come back as a Response object (reasoning, message and
// function_call items) or as its typed stream events. Stored responses (store, the default) live in a bounded
// in-memory ResponseStore so that a later call can continue them. Pure JSON and text building besides the store.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/generation.h"
#include "server/openai_response.h"

namespace rs::server {

// Responses kept for previous_response_id and GET /v1/responses/{id}: the response object and the whole conversation
// as chat messages (the request's and the answer). Oldest first out past max_entries or max_bytes. Thread-safe.
class ResponseStore {
 public:
  struct Entry {
    nlohmann::json response;
    nlohmann::ordered_json messages;
  };
  explicit ResponseStore(size_t max_entries = 1000, size_t max_bytes = size_t{64} << 20)
      : max_entries_(max_entries), max_bytes_(max_bytes) {}
  void put(const std::string& id, Entry entry);
  std::optional<Entry> get(const std::string& id) const;
  bool erase(const std::string& id);

 private:
  const size_t max_entries_, max_bytes_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::pair<Entry, size_t>> entries_;  // id -> entry, its size in bytes
  std::deque<std::string> order_;                                      // ids, oldest first (erased ones skipped)
  size_t bytes_ = 0;
};

// A translated /v1/responses call.
struct ResponsesCall {
  nlohmann::ordered_json chat;      // the chat request body
  nlohmann::ordered_json messages;  // its messages (stored with the answer)
  nlohmann::json echo;              // request fields the Response object repeats (instructions, tools, ...)
  bool store = true;
};

std::variant<ResponsesCall, ApiError> responses_to_chat(const std::string& body, const ResponseStore& store);

// The Response object of a finished choice; `echo` from the call.
nlohmann::json response_object(const std::string& id, const std::string& model, const ChoiceResult& choice,
                               const Usage& usage, const nlohmann::json& echo);
// The conversation to store: the call's messages and the response's output items as an assistant message.
nlohmann::ordered_json conversation_with(const nlohmann::ordered_json& messages, const nlohmann::json& output);

// Typed stream events of one choice ("event: TYPE\ndata: JSON\n\n", sequence numbers from 0).
class ResponsesStream {
 public:
  ResponsesStream(std::string id, std::string model, nlohmann::json echo);
  std::string start();  // response.created, response.in_progress
  std::string delta(const ChoiceDelta& delta);
  // Closes the open item; response.completed (or response.incomplete at the token limit) with every item.
  std::string finish(const Usage& usage);
  std::string error(const ApiError& error);
  const nlohmann::json& final_response() const { return final_; }

 private:
  enum class Item { kNone, kReasoning, kMessage };
  std::string event(const char* type, nlohmann::json data);
  void open(Item item, std::string& out);
  void close(std::string& out);

  std::string id_, model_;
  nlohmann::json echo_;
  int64_t created_at_;
  int64_t sequence_ = 0;
  Item open_ = Item::kNone;
  std::string item_id_, item_text_;
  nlohmann::json output_ = nlohmann::json::array();  // finished items
  std::string finish_reason_;
  nlohmann::json final_;
};

}  // namespace rs::server
