#include "server/gateway_routes.h"

#include "server/router_metrics.h"

namespace rs::server {
namespace {

using nlohmann::json;

json health_answer_json(const http::Response& completion, int* status) {
  *status = completion.status == 200 ? 200 : 503;
  if (*status == 200) return {{"status", "ok"}};
  std::string reason = completion.body;
  try {
    reason = json::parse(completion.body).at("error").at("message").get<std::string>();
  } catch (const std::exception&) {
  }
  return {{"status", "unhealthy"}, {"reason", reason}};
}

http::Response json_response(int status, const json& body) {
  http::Response res;
  res.status = status;
  res.set_content(body.dump(), "application/json");
  if (status == 503) res.set_header("Retry-After", "1");
  return res;
}

// Waits for the wrapped completion and answers for it.
class DeferredHealth : public http::DeferredResponse {
 public:
  explicit DeferredHealth(std::shared_ptr<http::DeferredResponse> completion) : completion_(std::move(completion)) {}
  void start(http::Waker wake) override { completion_->start(std::move(wake)); }
  std::optional<http::Response> poll() override {
    std::optional<http::Response> done = completion_->poll();
    if (!done) return std::nullopt;
    int status = 0;
    const json body = health_answer_json(*done, &status);
    return json_response(status, body);
  }
  void abandon() override { completion_->abandon(); }

 private:
  std::shared_ptr<http::DeferredResponse> completion_;
};

}  // namespace

json model_info_json(const ServingModel& model) {
  return {{"model_path", model.model_path},
          {"tokenizer_path", model.text.has_tokenizer() ? json(model.model_path) : json(nullptr)},
          {"served_model_name", model.name},
          {"is_generation", true},
          {"has_image_understanding", false},
          {"preferred_sampling_params", nullptr},
          {"max_model_len", model.max_context}};
}

json server_info_json(const ServingModel& model, const sched::SchedulerStats& stats, int32_t page_size,
                      const std::string& version) {
  const LoadSummary load = summarize_load(stats);
  return {{"version", version},
          {"model_path", model.model_path},
          {"served_model_name", model.name},
          {"context_length", model.max_context},
          {"page_size", page_size},
          {"max_total_num_tokens", load.total_pages * page_size},
          {"internal_states", json::array({{{"num_running_reqs", load.running},
                                            {"num_queue_reqs", load.waiting},
                                            {"token_usage", load.token_usage},
                                            {"cache_hit_rate", load.cache_hit_rate}}})}};
}

json load_json(const sched::SchedulerStats& stats, int32_t page_size) {
  const LoadSummary load = summarize_load(stats);
  return json::array({{{"dp_rank", 0},
                       {"num_reqs", load.running + load.waiting},
                       {"num_running_reqs", load.running},
                       {"num_waiting_reqs", load.waiting},
                       {"num_tokens", load.request_pages * page_size},
                       {"token_usage", load.token_usage}}});
}

http::Request health_generate_request(const ServingModel& model) {
  http::Request req;
  req.method = "POST";
  // Token 0 exists in every vocabulary; one greedy token (an embedding model: one embedding) shows the whole path
  // (queue, forward, sampling) works.
  req.path = model.embedding ? "/v1/embeddings" : "/v1/completions";
  req.body =
      model.embedding
          ? json{{"model", model.name}, {"input", json::array({0})}}.dump()
          : json{{"model", model.name}, {"prompt", json::array({0})}, {"max_tokens", 1}, {"temperature", 0}}.dump();
  req.headers.emplace_back("Content-Type", "application/json");
  return req;
}

http::Response health_generate_answer(http::Response completion) {
  if (completion.deferred) {
    http::Response res;
    res.deferred = std::make_shared<DeferredHealth>(std::move(completion.deferred));
    return res;
  }
  int status = 0;
  const json body = health_answer_json(completion, &status);
  return json_response(status, body);
}

}  // namespace rs::server
