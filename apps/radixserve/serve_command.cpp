// `radixserve serve`: loads a model and serves the OpenAI-compatible API until SIGTERM or SIGINT, then drains:
// no new calls, running ones get --drain-timeout seconds to finish, the rest are aborted, and the process exits.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>

#include "apps/radixserve/cli_checks.h"
#include "apps/radixserve/commands.h"
#include "apps/radixserve/kv_events_setup.h"
#include "apps/radixserve/model_option.h"
#include "apps/radixserve/scheduler_options.h"
#include "base/error.h"
#include "base/log.h"
#include "grammar/compiler.h"
#include "loader/model_folder.h"
#include "memory/kv_footprint.h"
#include "sched/scheduler.h"
#include "server/http_server.h"
#include "server/openai_request.h"
#include "server/stats_line.h"
#include "server/tool_call_parser.h"
#include "serving/serving_stack.h"

namespace rs::app {
namespace {

struct ServeOptions {
  std::string model_dir;
  std::vector<std::string> served_model_names;  // the first is the model's name, the rest aliases; empty: folder
  std::string chat_template;                    // a Jinja file replacing the model's chat template
  int32_t log_stats_interval_s = 10;
  server::ServerConfig http;
  server::RequestLimits limits;
  sched::SchedulerConfig scheduler;
  engine::EngineConfig engine;
  int32_t drain_timeout_s = 30;
  std::string reasoning_parser = "none";  // "qwen3": <think> ... </think> -> reasoning_content
  std::string tool_call_parser = "none";  // hermes (qwen3), qwen3_coder, llama3_json, mistral, auto or none
  bool skip_tokenizer_init = false;       // token-id prompts only: no tokenizer is loaded (vLLM's flag)
  KvEventsOptions kv_events;              // --kv-events-config
};

// The chat template's text, wherever the model keeps it (--chat-template file, chat_template.jinja, or
// tokenizer_config.json's chat_template, a string or named templates), for --tool-call-parser auto.
std::string chat_template_text(const ServeOptions& options) {
  const auto read = [](const std::filesystem::path& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  if (!options.chat_template.empty()) return read(options.chat_template);
  const std::filesystem::path dir(options.model_dir);
  if (std::filesystem::exists(dir / "chat_template.jinja")) return read(dir / "chat_template.jinja");
  const auto config = nlohmann::json::parse(read(dir / "tokenizer_config.json"), nullptr, false);
  if (!config.is_object() || !config.contains("chat_template")) return "";
  std::string text;
  for (const auto& entry :
       config["chat_template"].is_array() ? config["chat_template"] : nlohmann::json::array({config["chat_template"]}))
    if (entry.is_string())
      text += entry.get<std::string>();
    else if (entry.is_object() && entry.contains("template") && entry["template"].is_string())
      text += entry["template"].get<std::string>();
  return text;
}

// --tool-call-parser: a format by name, or auto (the chat template's own), or none.
std::optional<server::ToolCallFormat> tool_call_format(const ServeOptions& options, const server::ModelText& text) {
  if (options.tool_call_parser == "none") return std::nullopt;
  if (options.tool_call_parser != "auto") return server::tool_call_format_named(options.tool_call_parser);
  if (text.harmony_chat()) return std::nullopt;  // harmony calls are parsed anyway
  const auto format = server::tool_call_format_of_template(chat_template_text(options));
  if (!format) RS_LOG_WARN("--tool-call-parser auto: the chat template writes no tool-call format radixserve knows");
  return format;
}

// gpt-oss: harmony's special tokens, when chats are rendered in harmony and the tokenizer has them all.
server::HarmonyTokens harmony_tokens(const server::ModelText& text) {
  if (!text.harmony_chat()) return {};
  server::HarmonyTokens tokens;
  const std::pair<const char*, int32_t*> names[] = {{"<|start|>", &tokens.start},
                                                    {"<|end|>", &tokens.end},
                                                    {"<|message|>", &tokens.message},
                                                    {"<|channel|>", &tokens.channel},
                                                    {"<|constrain|>", &tokens.constrain},
                                                    {"<|return|>", &tokens.return_},
                                                    {"<|call|>", &tokens.call}};
  for (const auto& [name, id] : names) {
    const auto found = text.token_id(name);
    if (!found) {
      RS_LOG_WARN("harmony chat format but no {} token: answers are not split by channel", name);
      return {};
    }
    *id = *found;
  }
  return tokens;
}

// The reasoning tags a --reasoning-parser names, resolved to token ids of the model's tokenizer.
server::ReasoningTags reasoning_tags(const std::string& parser, const server::ModelText& text) {
  if (parser == "none") return {};
  server::ReasoningTags tags{"<think>", "</think>"};
  const auto open = text.token_id(tags.open), close = text.token_id(tags.close);
  RS_CHECK(open && close, "--reasoning-parser {}: the model's tokenizer has no {} / {} tokens", parser, tags.open,
           tags.close);
  tags.open_id = *open, tags.close_id = *close;
  return tags;
}

// Logs server::stats_line every `interval` while the server is busy, until destroyed.
class PeriodicStats {
 public:
  PeriodicStats(const sched::Scheduler& scheduler, std::chrono::seconds interval) {
    if (interval.count() <= 0) return;
    thread_ = std::thread([this, &scheduler, interval] {
      sched::SchedulerStats before = scheduler.stats();
      auto since = Clock::now();
      std::unique_lock lock(mutex_);
      while (!stop_cv_.wait_for(lock, interval, [this] { return stopped_; })) {
        const sched::SchedulerStats now = scheduler.stats();
        if (auto line = server::stats_line(before, now, seconds_since(since))) RS_LOG_INFO("{}", *line);
        before = now;
        since = Clock::now();
      }
    });
  }
  ~PeriodicStats() {
    {
      std::lock_guard lock(mutex_);
      stopped_ = true;
    }
    stop_cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable stop_cv_;
  bool stopped_ = false;
  std::thread thread_;
};

// The write end of the shutdown pipe. The one global here: a signal handler can reach nothing else.
int g_shutdown_pipe = -1;

extern "C" void on_shutdown_signal(int signal_number) {
  const unsigned char byte = static_cast<unsigned char>(signal_number);
  [[maybe_unused]] const ssize_t written = ::write(g_shutdown_pipe, &byte, 1);  // async-signal-safe
}

// SIGTERM / SIGINT: the handler writes the signal to a pipe and a waiter thread acts on it. (Blocking the signals and
// using sigwait would not do: OpenBLAS starts its threads before main, with the signals unblocked.)
class ShutdownSignal {
 public:
  // Installs the handlers and starts the waiter, which lives until the process exits and shares its state with this
  // object.
  ShutdownSignal() : state_(std::make_shared<State>()) {
    int fds[2];
    RS_CHECK(::pipe(fds) == 0, "cannot create the shutdown pipe");
    g_shutdown_pipe = fds[1];
    struct sigaction action = {};
    action.sa_handler = on_shutdown_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    ::sigaction(SIGTERM, &action, nullptr);
    ::sigaction(SIGINT, &action, nullptr);
    ::signal(SIGPIPE, SIG_IGN);  // a client closing its socket must not kill the server
    std::thread([state = state_, read_fd = fds[0]] { wait_loop(*state, read_fd); }).detach();
  }
  // While not serving (loading), a signal exits at once: there is nothing to drain.
  void set_serving(bool serving) { state_->serving = serving; }
  // Blocks until the first signal.
  void wait() {
    std::unique_lock lock(state_->mutex);
    state_->raised_cv.wait(lock, [&] { return state_->raised; });
  }

 private:
  struct State {
    std::atomic<bool> serving{false};
    std::mutex mutex;
    std::condition_variable raised_cv;
    bool raised = false;
  };
  static void wait_loop(State& state, int read_fd) {
    for (int received = 0;;) {
      unsigned char signal_number = 0;
      if (::read(read_fd, &signal_number, 1) != 1) continue;
      if (!state.serving || received++ > 0) {
        RS_LOG_WARN("signal {}: exiting immediately", signal_number);  // a second signal means "now"
        std::_Exit(received > 1 ? 1 : 0);
      }
      RS_LOG_INFO("signal {}: draining", signal_number);
      {
        std::lock_guard lock(state.mutex);
        state.raised = true;
      }
      state.raised_cv.notify_all();
    }
  }

  std::shared_ptr<State> state_;
};

// The API's model name: the first --served-model-name, else the model folder's name.
std::string served_name(const ServeOptions& options) {
  if (!options.served_model_names.empty()) return options.served_model_names.front();
  std::filesystem::path folder = std::filesystem::absolute(options.model_dir).lexically_normal();
  if (folder.filename().empty()) folder = folder.parent_path();
  // A hub cache snapshot (--model ORG/NAME) serves as ORG/NAME, as vLLM names it.
  if (const std::string repo = loader::hub_repo_of(folder); !repo.empty()) return repo;
  return folder.filename().string();
}

void log_kv_plan(const engine::Engine& engine, const memory::KvPoolConfig& pool) {
  const int64_t context = engine.context_length();
  const memory::KvFootprint footprint = memory::request_kv_footprint(pool, context);
  RS_LOG_INFO(
      "KV per request at {} tokens: {:.1f} MiB with sliding-window pages reclaimed, {:.1f} MiB keeping every "
      "page",
      context, footprint.windowed_bytes / 1048576.0, footprint.keep_all_bytes / 1048576.0);
  for (size_t g = 0; g < pool.groups.size(); ++g)
    RS_LOG_INFO("KV group {}: window {}, {} layers, {} pages of {} tokens", g, pool.groups[g].window,
                pool.groups[g].layers.size(), pool.groups[g].num_pages, pool.page_size);
}

void run_serve(ServeOptions options) {
  ShutdownSignal shutdown;
  if (options.http.api_key.empty())
    if (const char* key = std::getenv("RADIXSERVE_API_KEY")) options.http.api_key = key;
  RS_CHECK(!options.http.protect_metrics || !options.http.api_key.empty(),
           "--protect-metrics needs an API key (--api-key or $RADIXSERVE_API_KEY)");
  // A server without a tokenizer answers only token-id prompts: say so at start, not in every chat's 400.
  RS_CHECK(options.skip_tokenizer_init ||
               std::filesystem::exists(std::filesystem::path(options.model_dir) / "tokenizer.json"),
           "{}: no tokenizer.json, so text prompts and chats cannot work; add the tokenizer files, or pass "
           "--skip-tokenizer-init to serve token-id prompts only",
           options.model_dir);
  options.http.version = version_string();
  // Before anything else that must be torn down: the scheduler reports to it until the stack stops.
  const std::unique_ptr<KvEventsSetup> kv_events =
      start_kv_events(options.kv_events, options.scheduler.prefix_cache, options.engine.backend);
  if (kv_events) {
    options.scheduler.kv_events = kv_events->sink();
    options.http.kv_event_counts = [events = kv_events.get()] { return events->counts(); };
  }
  server::HttpServer http(options.http);
  http.start();  // /health says "loading" from here on

  options.engine.progress = make_progress_reporter();
  serving::ServingStack stack(options.model_dir, options.engine, options.scheduler);
  engine::Engine& engine = stack.engine();
  const memory::KvPoolConfig& pool = engine.kv_pool().config();
  log_kv_plan(engine, pool);
  // The KV pool, not the model, would bound a request: refuse rather than cut contexts silently, unless the user set
  // the context (then it is their limit, and a warning says what the pool holds).
  if (stack.max_request_tokens() < engine.context_length() && options.engine.context_length <= 0)
    RS_FAIL(
        "the KV pool holds {} tokens of full attention, less than one request at the model's context of {} tokens "
        "({:.2f} GiB of KV for one such request): give more memory with --kv-cache-gb / --mem-fraction-static, or "
        "set --context-length {} (or less) to serve shorter requests",
        stack.max_request_tokens(), engine.context_length(),
        static_cast<double>(memory::request_kv_footprint(pool, engine.context_length()).windowed_bytes) / (1 << 30),
        stack.max_request_tokens());
  if (stack.max_request_tokens() < engine.context_length())
    RS_LOG_WARN(
        "the KV pool holds {} tokens of full attention: requests are limited to {} of the model's {} tokens of "
        "context (give more memory with --kv-cache-gb / --mem-fraction-static, or set --context-length {} to "
        "make it the server's limit)",
        stack.max_request_tokens(), stack.max_request_tokens(), engine.context_length(), stack.max_request_tokens());

  server::ServingModel model;
  model.name = served_name(options);
  model.model_path = options.model_dir;
  if (options.served_model_names.size() > 1)
    model.aliases.assign(options.served_model_names.begin() + 1, options.served_model_names.end());
  model.max_context = stack.max_request_tokens();
  model.vocab_size = engine.model_config().vocab_size;
  model.eos_token_ids = engine.model_config().eos_token_ids;
  model.sampling_defaults = server::sampling_defaults(engine.model_config().generation_defaults);
  if (!options.skip_tokenizer_init) model.text = server::ModelText::load(options.model_dir, options.chat_template);
  model.reasoning = reasoning_tags(options.reasoning_parser, model.text);
  model.harmony = harmony_tokens(model.text);
  model.tool_call_format = tool_call_format(options, model.text);
  if (model.text.has_tokenizer())
    model.grammar =
        std::make_shared<grammar::GrammarCompiler>(grammar::TokenVocab::from_tokenizer(*model.text.tokenizer()));
  model.max_choices_per_call = std::min(128, options.scheduler.max_queued_requests);
  model.max_embedding_inputs = std::min(2048, options.scheduler.max_queued_requests);
  model.limits = options.limits;
  if (const loader::ModelConfig& mc = engine.model_config(); mc.embedding) {
    model.embedding =
        server::EmbeddingModel{mc.hidden_size, mc.embedding_normalize, mc.is_matryoshka, mc.matryoshka_dimensions};
    RS_LOG_INFO("serving embeddings ({} dimensions, last-token pooling{}) at /v1/embeddings", mc.hidden_size,
                mc.embedding_normalize ? ", normalised" : "");
  }

  sched::Scheduler& scheduler = stack.scheduler();
  http.set_ready(model, scheduler, pool.page_size);
  shutdown.set_serving(true);
  RS_LOG_INFO("serving {} (context {} tokens) on {}:{}", model.name, model.max_context, options.http.host, http.port());

  {
    PeriodicStats stats(scheduler, std::chrono::seconds(options.log_stats_interval_s));
    shutdown.wait();
  }
  http.begin_drain();
  const auto deadline = Clock::now() + std::chrono::seconds(options.drain_timeout_s);
  while (http.in_flight() > 0 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (http.in_flight() > 0) RS_LOG_WARN("drain timeout: aborting {} call(s) still running", http.in_flight());
  stack.stop();  // aborts what is left; their handlers answer and return
  const auto grace = Clock::now() + std::chrono::seconds(2);
  while (http.in_flight() > 0 && Clock::now() < grace) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  http.stop();
  RS_LOG_INFO("shut down");
}

// Limits on what one request may send or ask for (each excess gets a 4xx naming it) and on slow clients.
void add_limit_options(CLI::App& cmd, ServeOptions& options) {
  cmd.add_option("--max-request-bytes", options.http.max_request_bytes, "Largest request body accepted (else 413)")
      ->check(CLI::Range(size_t{1024}, size_t{1} << 32))
      ->capture_default_str();
  cmd.add_option("--read-timeout", options.http.read_timeout_s, "Seconds a client may stay silent mid-request")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd.add_option("--write-timeout", options.http.write_timeout_s, "Seconds a client may leave a response unread")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd.add_option("--keep-alive-timeout", options.http.keep_alive_timeout_s,
                 "Seconds an idle keep-alive connection stays open")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd.add_option("--max-connections", options.http.max_connections,
                 "Open client connections; past this a new one gets 503 (streams waiting for tokens hold no thread)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  cmd.add_flag("--strict-request-params", options.limits.strict_fields,
               "Answer unknown request fields with 400 unknown_parameter (as OpenAI) instead of ignoring them with a "
               "log line (as vLLM and SGLang)");
  cmd.add_option("--max-json-depth", options.limits.max_json_depth, "Deepest nesting of a request body")
      ->check(CLI::Range(1, server::kMaxJsonDepth))
      ->capture_default_str();
  cmd.add_option("--max-messages", options.limits.max_messages, "Chat messages per request")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd.add_option("--max-n", options.limits.max_n, "Choices per prompt ('n')")
      ->check(CLI::Range(1, 128))
      ->capture_default_str();
  cmd.add_option("--max-stop-sequences", options.limits.max_stop, "Stop strings per request")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  cmd.add_option("--max-stop-bytes", options.limits.max_stop_bytes, "Bytes per stop string")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd.add_option("--max-top-logprobs", options.limits.max_top_logprobs, "Alternatives per token in logprobs")
      ->check(CLI::Range(0, 20))
      ->capture_default_str();
  cmd.add_option("--max-prompt-tokens", options.limits.max_prompt_tokens,
                 "Tokens per prompt after the chat template (0 = the context length)")
      ->check(non_negative_number())
      ->capture_default_str();
  cmd.add_option("--max-tokens-limit", options.limits.max_tokens,
                 "Largest max_tokens a request may ask for, and the default when it asks for none (0 = what the "
                 "context leaves)")
      ->check(non_negative_number())
      ->capture_default_str();
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto options = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve the OpenAI-compatible HTTP API");
  cmd->add_option("model,--model", options->model_dir,
                  "Model folder (config.json, safetensors, tokenizer.json); `serve DIR` as vLLM's `serve MODEL`")
      ->required()
      ->transform(model_folder());
  add_revision_option(*cmd);
  // vLLM flags with no setting of their own here: accepted where their meaning holds.
  cmd->add_flag_callback(
      "--enable-auto-tool-choice", [] {},
      "Accepted for vLLM command lines: tool calls are parsed whenever --tool-call-parser names a format");
  cmd->add_option("--served-model-name", options->served_model_names,
                  "Model name(s) in the API: the first is reported, all are accepted (default: folder name)")
      ->delimiter(',');
  cmd->add_option("--chat-template", options->chat_template, "A Jinja chat template file used instead of the model's")
      ->check(CLI::ExistingFile);
  cmd->add_option("--host", options->http.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", options->http.port, "Port to listen on (0 = any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--api-key", options->http.api_key,
                  "Require 'Authorization: Bearer KEY' on /v1 routes (default: $RADIXSERVE_API_KEY)");
  cmd->add_option("--allowed-origins", options->http.allowed_origins,
                  "Browser origins allowed to call the API (CORS), e.g. http://localhost:3000 or '*'; default none")
      ->delimiter(',');
  cmd->add_option("--metrics-port", options->http.metrics_port,
                  "Serve /metrics (and /health) on this port of the same host instead of the API port (0 = any free "
                  "port); /health stays on the API port too")
      ->check(CLI::Range(0, 65535));
  cmd->add_flag("--protect-metrics", options->http.protect_metrics,
                "Require the API key on /metrics too (default: public; /health stays open for probes)");
  cmd->add_flag_callback(
      "--no-web-ui", [options] { options->http.web_ui = false; }, "Do not serve the chat page at GET /");
  cmd->add_flag("--log-requests", options->http.log_requests,
                "Also log each call's prompt or messages (first 2000 bytes) at info level");
  add_scheduler_options(*cmd, options->scheduler);
  add_kv_events_options(*cmd, options->kv_events);
  cmd->add_option("--log-stats-interval", options->log_stats_interval_s,
                  "Seconds between stats lines (requests, KV use, tok/s) while busy; 0 = none")
      ->check(CLI::Range(0, 3600))
      ->capture_default_str();
  cmd->add_option("--drain-timeout", options->drain_timeout_s, "Seconds running requests get to finish on SIGTERM")
      ->check(CLI::Range(0, 3600))
      ->capture_default_str();
  cmd->add_option("--reasoning-parser", options->reasoning_parser,
                  "Split chat answers into reasoning_content and content: qwen3 (<think> ... </think>) or none")
      ->check(CLI::IsMember({"none", "qwen3"}))
      ->capture_default_str();
  cmd->add_flag("--skip-tokenizer-init", options->skip_tokenizer_init,
                "Load no tokenizer: serve token-id prompts only (return_token_ids), as vLLM's flag; without it a model "
                "folder lacking tokenizer.json is refused");
  cmd->add_option("--tool-call-parser", options->tool_call_parser,
                  "Turn tool calls in chat answers into tool_calls: hermes or qwen3 (<tool_call>{json}</tool_call>), "
                  "qwen3_coder (Qwen3-Coder / Qwen3.5 XML), llama3_json, mistral, auto (the chat template's format) "
                  "or none (gpt-oss harmony calls are always parsed)")
      ->check(CLI::IsMember({"none", "qwen3", "hermes", "qwen3_coder", "llama3_json", "mistral", "auto"}))
      ->capture_default_str();
  add_limit_options(*cmd, *options);
  add_engine_options(*cmd, options->engine);
  cmd->callback([options] { run_serve(*options); });
}

}  // namespace rs::app
