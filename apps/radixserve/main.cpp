// radixserve: one binary, subcommands serve | generate | bench | tokenize | chat-template.
#include <cstdio>

#include "apps/radixserve/commands.h"
#include "base/error.h"
#include "base/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

int main(int argc, char** argv) {
  CLI::App app{"radixserve: an LLM inference server with a paged KV cache and a radix prefix cache"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "radixserve " + rs::app::version_string());
  app.fallthrough();  // --log-level is accepted after the subcommand too
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "debug, info, warn or error")->capture_default_str();
  app.parse_complete_callback([&] { rs::set_log_level(log_level); });
  spdlog::set_default_logger(spdlog::stderr_color_mt("radixserve"));
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] %v");
  rs::app::add_serve_command(app);
  rs::app::add_generate_command(app);
  rs::app::add_bench_command(app);
  rs::app::add_tokenize_command(app);
  rs::app::add_chat_template_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const rs::Error& e) {
    RS_LOG_DEBUG("error raised at {}", e.location());
    std::fprintf(stderr, "radixserve: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "radixserve: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
