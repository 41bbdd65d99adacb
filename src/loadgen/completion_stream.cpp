#include "loadgen/completion_stream.h"

#include <nlohmann/json.hpp>

namespace rs::loadgen {

std::string_view error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kNone: return "none";
    case ErrorKind::kConnect: return "connect";
    case ErrorKind::kHttpStatus: return "http_status";
    case ErrorKind::kTimeout: return "timeout";
    case ErrorKind::kMalformed: return "malformed";
    case ErrorKind::kDisconnected: return "disconnected";
    case ErrorKind::kStreamError: return "stream_error";
  }
  return "unknown";
}

namespace {

void fail(RequestResult& result, ErrorKind kind, std::string_view detail) {
  if (!result.ok()) return;
  result.error = kind;
  result.error_detail = std::string(detail.substr(0, 200));
}

}  // namespace

void CompletionStream::on_event(std::string_view data, double now_s, RequestResult& result) {
  if (failed_ || !result.ok()) return;
  if (done_) {
    failed_ = true;
    return fail(result, ErrorKind::kMalformed, "event after [DONE]");
  }
  if (data == "[DONE]") {
    done_ = true;
    result.latency_s = now_s - result.start_s;
    return;
  }
  const nlohmann::json chunk = nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (!chunk.is_object()) {
    failed_ = true;
    return fail(result, ErrorKind::kMalformed, "SSE event is not a JSON object: " + std::string(data.substr(0, 80)));
  }
  if (const auto error = chunk.find("error"); error != chunk.end() && !error->is_null()) {
    failed_ = true;
    const auto message = error->is_object() ? error->value("message", error->dump()) : error->dump();
    return fail(result, ErrorKind::kStreamError, message);
  }
  if (const auto usage = chunk.find("usage"); usage != chunk.end() && usage->is_object()) {
    result.prompt_tokens = usage->value("prompt_tokens", int64_t{-1});
    result.completion_tokens = usage->value("completion_tokens", int64_t{-1});
    const auto details = usage->find("prompt_tokens_details");
    if (details != usage->end() && details->is_object()) result.cached_tokens = details->value("cached_tokens", 0);
    const auto spec = usage->find("speculative");
    if (spec != usage->end() && spec->is_object()) {
      result.spec_verify_steps = spec->value("verify_steps", int64_t{0});
      result.spec_accepted_tokens = spec->value("accepted_tokens", int64_t{0});
    }
  }
  const auto choices = chunk.find("choices");
  if (choices == chunk.end() || !choices->is_array() || choices->empty()) return;  // e.g. the usage-only chunk
  const nlohmann::json& choice = choices->front();
  // A token arrived when the chunk carries text, or token ids (radixserve and vLLM with return_token_ids): a model
  // without a tokenizer, or text held back (a partial UTF-8 character, a possible stop string), sends ids alone.
  const auto text = choice.find("text");
  const auto ids = choice.find("token_ids");
  const bool has_text = text != choice.end() && text->is_string() && !text->get_ref<const std::string&>().empty();
  const bool has_ids = ids != choice.end() && ids->is_array() && !ids->empty();
  if (!has_text && !has_ids) return;
  if (last_chunk_s_ < 0)
    result.ttft_s = now_s - result.start_s;
  else
    result.itl_s.push_back(now_s - last_chunk_s_);
  last_chunk_s_ = now_s;
}

void CompletionStream::on_end(double now_s, RequestResult& result) {
  if (!result.ok()) return;
  if (!done_) {
    result.latency_s = now_s - result.start_s;
    return fail(result, ErrorKind::kMalformed, "the stream ended without data: [DONE]");
  }
  if (result.prompt_tokens < 0 || result.completion_tokens < 0)
    fail(result, ErrorKind::kMalformed, "no usage in the stream (stream_options.include_usage)");
}

}  // namespace rs::loadgen
