#include "apps/radixserve/model_option.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <exception>
#include <regex>

#include "loader/model_folder.h"
#ifdef RS_HAVE_HUB
#include "hub/hub_download.h"
#endif

namespace rs::app {
namespace {

std::string& requested_revision() {
  static std::string revision;  // set by --revision while the command line is parsed
  return revision;
}

bool is_repo_id(const std::string& value) {
  static const std::regex kRepo(R"([A-Za-z0-9][\w.-]*/[\w.-]+(/[^/]+)*)");
  return std::regex_match(value, kRepo) && !std::filesystem::exists(value);
}

// As huggingface_hub reads it: 1, ON, YES or TRUE (any case).
bool offline() {
  const char* value = std::getenv("HF_HUB_OFFLINE");
  if (!value) return false;
  std::string v(value);
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::toupper(c); });
  return v == "1" || v == "ON" || v == "YES" || v == "TRUE";
}

}  // namespace

CLI::Validator model_folder() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        const std::string& revision = requested_revision();
        // A named revision is fetched (the cache's refs/main would name another commit); otherwise the cache first.
        const bool fetch_first = is_repo_id(value) && !revision.empty() && revision != "main" && !offline();
        if (!fetch_first) {
          try {
            value = loader::resolve_model_folder(value).string();
            return "";
          } catch (const std::exception& e) {
#ifdef RS_HAVE_HUB
            if (!is_repo_id(value) || offline()) return e.what();
#else
            return e.what();
#endif
          }
        }
#ifdef RS_HAVE_HUB
        try {
          const auto options = hub::options_from_env(revision, loader::hub_cache_dir());
          value = loader::resolve_model_folder(hub::download_model(value, options)).string();
        } catch (const std::exception& e) {
          return e.what();
        }
        return "";
#else
        return value +
               ": this radixserve was built without libcurl and cannot download models (run scripts/setup "
               "and rebuild, or download with `hf download`)";
#endif
      },
      "", "");
}

void add_revision_option(CLI::App& command) {
  command
      .add_option_function<std::string>(
          "--revision", [](const std::string& revision) { requested_revision() = revision; },
          "Branch, tag or commit of a hub repository id given as the model (default main)")
      ->trigger_on_parse();
}

}  // namespace rs::app
