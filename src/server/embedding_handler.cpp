// POST /v1/embeddings (GenerateHandler::handle_embeddings): each input becomes an embedding request (Request::embed)
// that the scheduler prefills beside everything else, and the call is answered once every one has its embedding.
#include <fmt/format.h>

#include "base/log.h"
#include "server/generate_handler.h"

namespace rs::server {

// The call in flight: polls its requests' streams; aborts them when the client goes away.
class PendingEmbeddings : public http::DeferredResponse {
 public:
  PendingEmbeddings(GenerateHandler& handler, std::unique_ptr<InFlight> in_flight,
                    std::vector<std::shared_ptr<sched::TokenStream>> streams, std::vector<uint64_t> ids,
                    EmbeddingRequest request, std::string id)
      : handler_(handler),
        in_flight_(std::move(in_flight)),
        streams_(std::move(streams)),
        ids_(std::move(ids)),
        request_(std::move(request)),
        id_(std::move(id)),
        embeddings_(streams_.size()),
        done_(streams_.size(), false) {}

  void start(http::Waker wake) override {
    for (auto& stream : streams_) stream->set_waker(wake);
  }

  std::optional<http::Response> poll() override {
    for (size_t i = 0; i < streams_.size(); ++i)
      while (auto event = streams_[i]->events.try_pop()) {
        prompt_tokens_ += event->prompt_tokens;
        if (!event->finished) continue;
        done_[i] = true;
        if (event->finish_reason == sched::FinishReason::kError && !error_)
          error_ = scheduler_failure(event->error_cause, event->error);
        else if ((event->finish_reason != sched::FinishReason::kStop || event->embedding.empty()) && !error_)
          error_ = server_error(503, "The request was aborted before its embedding was made (the server is stopping).",
                                "aborted");
        embeddings_[i] = std::move(event->embedding);
      }
    if (std::find(done_.begin(), done_.end(), false) != done_.end()) return std::nullopt;
    finished_ = true;
    for (auto& stream : streams_) stream->set_waker({});
    if (error_) return handler_.respond_error(*error_, Endpoint::kEmbeddings);
    const EmbeddingModel& model = *handler_.model_.embedding;
    if (request_.dimensions && *request_.dimensions != model.width)
      for (auto& embedding : embeddings_)
        embedding = truncate_embedding(embedding, *request_.dimensions, model.normalize);
    handler_.metrics_.requests_ok++;
    RS_LOG_INFO("{} /v1/embeddings 200 inputs={} prompt_tokens={}", id_, streams_.size(), prompt_tokens_);
    http::Response res;
    res.set_content(embedding_list(handler_.model_.name, embeddings_, request_.base64, prompt_tokens_).dump(),
                    "application/json");
    return res;
  }

  void abandon() override {
    if (finished_) return;
    finished_ = true;
    handler_.metrics_.requests_aborted++;
    for (uint64_t id : ids_) handler_.scheduler_.abort(id);
    RS_LOG_INFO("{} /v1/embeddings closed by the client; aborted", id_);
  }

 private:
  GenerateHandler& handler_;
  std::unique_ptr<InFlight> in_flight_;
  std::vector<std::shared_ptr<sched::TokenStream>> streams_;
  std::vector<uint64_t> ids_;
  EmbeddingRequest request_;
  std::string id_;
  std::vector<std::vector<float>> embeddings_;
  std::vector<bool> done_;
  std::optional<ApiError> error_;
  int64_t prompt_tokens_ = 0;
  bool finished_ = false;
};

http::Response GenerateHandler::handle_embeddings(const http::Request& req) {
  auto in_flight = std::make_unique<InFlight>(in_flight_);
  if (!model_.embedding)
    return respond_error(api_error(400, "invalid_request_error",
                                   fmt::format("The model `{}` does not serve embeddings: start the server with "
                                               "--task embed (or serve an embedding checkpoint).",
                                               model_.name),
                                   "model", "model_not_supported"),
                         Endpoint::kEmbeddings);
  auto parsed = parse_embedding_request(req.body, model_.limits);
  if (auto* error = std::get_if<ApiError>(&parsed)) return respond_error(*error, Endpoint::kEmbeddings);
  EmbeddingRequest request = std::move(std::get<EmbeddingRequest>(parsed));
  if (!request.model.empty() && !model_.serves(request.model))
    return respond_error(
        api_error(404, "invalid_request_error",
                  fmt::format("The model `{}` does not exist or you do not have access to it.", request.model), "model",
                  "model_not_found"),
        Endpoint::kEmbeddings);
  if (auto error = check_dimensions(*model_.embedding, request.dimensions))
    return respond_error(*error, Endpoint::kEmbeddings);
  if (const size_t inputs = request.texts.size() + request.token_inputs.size();
      inputs > static_cast<size_t>(model_.max_embedding_inputs))
    return respond_error(invalid_param("input",
                                       fmt::format("This call has {} inputs; at most {} are allowed per call.", inputs,
                                                   model_.max_embedding_inputs),
                                       "too_many_inputs"),
                         Endpoint::kEmbeddings);
  std::vector<std::vector<int32_t>> inputs = std::move(request.token_inputs);
  for (const std::string& text : request.texts) {
    auto ids = model_.text.encode_prompt(text);
    if (auto* error = std::get_if<ApiError>(&ids)) return respond_error(*error, Endpoint::kEmbeddings);
    inputs.push_back(std::move(std::get<std::vector<int32_t>>(ids)));
  }
  for (const auto& input : inputs) {
    if (input.empty())
      return respond_error(invalid_param("input", "An input is empty after tokenization.", "empty_prompt"),
                           Endpoint::kEmbeddings);
    for (int32_t id : input)
      if (id < 0 || id >= model_.vocab_size)
        return respond_error(
            invalid_param("input", fmt::format("Token id {} is outside the vocabulary [0, {}).", id, model_.vocab_size),
                          "invalid_token_id"),
            Endpoint::kEmbeddings);
    if (static_cast<int64_t>(input.size()) > model_.max_context)
      return respond_error(invalid_param("input",
                                         fmt::format("This model's maximum context length is {} tokens, but an input "
                                                     "has {} tokens.",
                                                     model_.max_context, input.size()),
                                         "context_length_exceeded"),
                           Endpoint::kEmbeddings);
  }
  const uint64_t first_id = next_request_id_.fetch_add(inputs.size());
  std::vector<std::shared_ptr<sched::TokenStream>> streams;
  std::vector<uint64_t> ids;
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto submitted = std::make_unique<sched::Request>();
    submitted->id = first_id + i;
    submitted->prompt_ids = std::move(inputs[i]);
    submitted->embed = true;
    submitted->stream = std::make_shared<sched::TokenStream>();
    streams.push_back(submitted->stream);
    if (!scheduler_.submit(std::move(submitted))) {
      for (uint64_t id : ids) scheduler_.abort(id);
      metrics_.requests_rejected++;
      return respond_error(server_error(503, "The server is overloaded: too many requests are queued. Retry later.",
                                        "server_overloaded"),
                           Endpoint::kEmbeddings);
    }
    ids.push_back(first_id + i);
  }
  http::Response res;
  res.deferred = std::make_shared<PendingEmbeddings>(*this, std::move(in_flight), std::move(streams), std::move(ids),
                                                     std::move(request), fmt::format("embd-{}", first_id));
  return res;
}

}  // namespace rs::server
