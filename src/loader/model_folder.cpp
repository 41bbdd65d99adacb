#include "loader/model_folder.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <regex>

#include "base/error.h"
#include "base/log.h"
#include "loader/gguf/gguf_config.h"
#include "loader/gguf/gguf_tokenizer.h"
#include "loader/gguf/gguf_weights.h"

namespace rs::loader {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Bumped whenever the files a view holds change meaning, so that old views are not reused.
constexpr const char* kViewVersion = "gguf-view-1";

uint64_t fnv1a(uint64_t hash, const std::string& bytes) {
  for (unsigned char c : bytes) hash = (hash ^ c) * 0x100000001b3ull;
  return hash;
}

void write_json(const fs::path& path, const json& value) {
  std::ofstream out(path);
  out << value.dump(2) << '\n';
  RS_CHECK(out.good(), "{}: cannot write", path.string());
}

std::vector<fs::path> gguf_files_in(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& item : fs::directory_iterator(dir))
    if (item.path().extension() == ".gguf" && fs::is_regular_file(item.path())) files.push_back(item.path());
  std::sort(files.begin(), files.end());
  return files;
}

// The model name a view folder takes: the file name without ".gguf" and without a split suffix.
std::string model_stem(const fs::path& first) {
  static const std::regex kSplit(R"((.*)-\d{5}-of-\d{5})");
  std::string stem = first.stem().string();
  std::smatch match;
  if (std::regex_match(stem, match, kSplit)) stem = match[1].str();
  return stem;
}

fs::path make_view(const std::vector<fs::path>& files) {
  uint64_t hash = fnv1a(0xcbf29ce484222325ull, kViewVersion);
  for (const auto& file : files) {
    const fs::path canonical = fs::canonical(file);
    hash = fnv1a(hash, canonical.string());
    hash = fnv1a(hash, std::to_string(fs::file_size(canonical)));
    hash = fnv1a(hash, std::to_string(fs::last_write_time(canonical).time_since_epoch().count()));
  }
  const fs::path view = cache_dir() / "gguf" / fmt::format("{:016x}", hash) / model_stem(files.front());
  if (fs::exists(view / ".complete")) return view;

  const gguf::GgufWeights weights(files);
  // A vocab-only file (llama.cpp's ggml-vocab-*.gguf, `convert_hf_to_gguf.py --vocab-only`) has a tokenizer and no
  // model: its view holds the tokenizer files only.
  const bool vocab_only = weights.total_bytes() == 0 && weights.names().empty();
  const json config = vocab_only ? json() : gguf::hf_config(weights);
  const json generation = gguf::hf_generation_config(weights.metadata());
  const auto tokenizer = gguf::hf_tokenizer(weights.metadata());
  // Written into a private folder, then renamed into place: a concurrent server sees a whole view or none.
  const fs::path staging = view.parent_path() / fmt::format(".staging-{}", ::getpid());
  std::error_code error;
  fs::remove_all(staging, error);
  fs::create_directories(staging, error);
  RS_CHECK(!error, "{}: cannot create the GGUF model folder: {} (set RADIXSERVE_CACHE_DIR)", staging.string(),
           error.message());
  if (!vocab_only) {
    write_json(staging / "config.json", config);
    write_json(staging / "generation_config.json", generation);
  }
  if (tokenizer) {
    write_json(staging / "tokenizer.json", tokenizer->tokenizer);
    write_json(staging / "tokenizer_config.json", tokenizer->tokenizer_config);
  }
  for (const auto& file : files) fs::create_symlink(fs::canonical(file), staging / file.filename());
  std::ofstream(staging / ".complete") << kViewVersion << '\n';
  fs::rename(staging, view, error);
  if (error) {  // another process made it first (or a stale view without its marker stands there)
    if (!fs::exists(view / ".complete")) {
      fs::remove_all(view);
      fs::rename(staging, view);
    } else {
      fs::remove_all(staging, error);
    }
  }
  RS_LOG_INFO("GGUF {} ({}): model files in {}", files.front().string(),
              vocab_only ? "vocabulary only" : config["architectures"][0].get<std::string>(), view.string());
  return view;
}

}  // namespace

fs::path cache_dir() {
  if (const char* dir = std::getenv("RADIXSERVE_CACHE_DIR"); dir && *dir) return dir;
  if (const char* dir = std::getenv("XDG_CACHE_HOME"); dir && *dir) return fs::path(dir) / "radixserve";
  if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".cache" / "radixserve";
  return fs::temp_directory_path() / fmt::format("radixserve-cache-{}", ::getuid());
}

fs::path hub_cache_dir() {
  if (const char* dir = std::getenv("HF_HUB_CACHE"); dir && *dir) return dir;
  if (const char* home = std::getenv("HF_HOME"); home && *home) return fs::path(home) / "hub";
  if (const char* dir = std::getenv("XDG_CACHE_HOME"); dir && *dir) return fs::path(dir) / "huggingface" / "hub";
  if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".cache" / "huggingface" / "hub";
  return fs::path(".cache") / "huggingface" / "hub";
}

std::string hub_repo_of(const fs::path& folder) {
  static const std::regex kSnapshot(R"(.*/models--([^/]+?)--([^/]+)/snapshots/[^/]+/?)");
  std::smatch match;
  const std::string text = folder.lexically_normal().string();
  return std::regex_match(text, match, kSnapshot) ? match[1].str() + "/" + match[2].str() : "";
}

namespace {

// A repository id's snapshot in the hub cache, as huggingface_hub lays it out: refs/main names the revision; a cache
// with one snapshot and no ref (copied caches) uses that one.
std::optional<fs::path> hub_snapshot(const std::string& org, const std::string& name) {
  const fs::path repo = hub_cache_dir() / ("models--" + org + "--" + name);
  if (!fs::is_directory(repo / "snapshots")) return std::nullopt;
  std::ifstream ref(repo / "refs" / "main");
  std::string revision;
  if (ref && std::getline(ref, revision) && !revision.empty() && fs::is_directory(repo / "snapshots" / revision))
    return repo / "snapshots" / revision;
  // A snapshot radixserve is still downloading (hub/hub_download.h) is not one to serve.
  std::vector<fs::path> snapshots;
  for (const auto& item : fs::directory_iterator(repo / "snapshots"))
    if (item.is_directory() && !fs::exists(item.path() / ".radixserve-incomplete")) snapshots.push_back(item.path());
  if (snapshots.empty()) return std::nullopt;
  RS_CHECK(snapshots.size() == 1, "{}: {} snapshots and no refs/main: pass the snapshot folder itself", repo.string(),
           snapshots.size());
  return snapshots.front();
}

// "ORG/NAME" or "ORG/NAME/FILE..." that is not a path on disk: the hub cache's copy, or a clear error.
fs::path from_hub(const fs::path& path) {
  static const std::regex kRepo(R"(([A-Za-z0-9][\w.-]*)/([\w.-]+)((/[^/]+)*))");
  std::smatch match;
  const std::string text = path.string();
  RS_CHECK(std::regex_match(text, match, kRepo) && !path.is_absolute(),
           "{}: no such file or folder (give a model folder, a .gguf file or a Hugging Face repository id ORG/NAME)",
           text);
  const auto snapshot = hub_snapshot(match[1].str(), match[2].str());
  RS_CHECK(snapshot.has_value(),
           "{}: not a folder or file here, and not in the Hugging Face cache ({}); download it first (e.g. `hf "
           "download {}/{}`, or let radixserve fetch it: unset HF_HUB_OFFLINE) or set HF_HOME / HF_HUB_CACHE",
           text, (hub_cache_dir() / ("models--" + match[1].str() + "--" + match[2].str())).string(), match[1].str(),
           match[2].str());
  if (match[3].length() == 0) return *snapshot;
  const fs::path target = *snapshot / match[3].str().substr(1);
  RS_CHECK(fs::exists(target), "{}: the cached snapshot {} has no {}", text, snapshot->string(),
           match[3].str().substr(1));
  return target;
}

}  // namespace

fs::path resolve_model_folder(const fs::path& given) {
  const fs::path path = fs::exists(given) ? given : from_hub(given);
  std::vector<fs::path> candidates;
  if (fs::is_regular_file(path) && gguf::is_gguf(path)) {
    static const std::regex kSplit(R"((.*)-\d{5}-of-\d{5}\.gguf)");
    std::smatch match;
    const std::string name = path.filename().string();
    if (std::regex_match(name, match, kSplit)) {  // every part of the split, wherever --model points
      for (const auto& file : gguf_files_in(path.parent_path().empty() ? fs::path(".") : path.parent_path())) {
        std::smatch other;
        const std::string other_name = file.filename().string();
        if (std::regex_match(other_name, other, kSplit) && other[1].str() == match[1].str()) candidates.push_back(file);
      }
    } else {
      candidates.push_back(path);
    }
  } else if (fs::is_directory(path) && !fs::exists(path / "config.json")) {
    candidates = gguf_files_in(path);
  }
  if (candidates.empty()) return path;
  return make_view(gguf::model_files(candidates));
}

}  // namespace rs::loader
