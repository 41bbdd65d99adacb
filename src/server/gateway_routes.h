// The routes a router or gateway probes a replica with (SGLang's model gateway; Kubernetes' probes): model and server
// info, the load, liveness, and a health check that generates one token. JSON shapes as SGLang's server gives them.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "http/message.h"
#include "sched/scheduler.h"
#include "server/generation.h"

namespace rs::server {

// GET /get_model_info
nlohmann::json model_info_json(const ServingModel& model);
// GET /get_server_info and /server_info: what this server runs with, and its current load.
nlohmann::json server_info_json(const ServingModel& model, const sched::SchedulerStats& stats, int32_t page_size,
                                const std::string& version);
// GET /get_load: one entry per data-parallel rank (one here).
nlohmann::json load_json(const sched::SchedulerStats& stats, int32_t page_size);
// The one-token completion /health_generate runs, as a request for the completions handler.
http::Request health_generate_request(const ServingModel& model);
// /health_generate's answer from the completion's: 200 {"status": "ok"} when it generated, else 503 with the reason.
// A deferred completion is wrapped, so the probe waits for the token as any client would.
http::Response health_generate_answer(http::Response completion);

}  // namespace rs::server
