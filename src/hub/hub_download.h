// Downloads a model repository from the Hugging Face Hub (or anything that speaks its file API at $HF_ENDPOINT) into
// the hub cache layout the Python tools share (hub_cache_dir()/models--ORG--NAME/{blobs,snapshots/SHA,refs/REV}), so
// that `--model ORG/NAME` works on a machine that has not fetched it yet and a cache filled by huggingface_hub is
// reused as it is. Files the server reads are fetched (configs, tokenizer files, chat templates, safetensors and their
// index; GGUF only when named), each into blobs/<etag>.incomplete, resumed with a Range request after an interruption,
// checked against its SHA-256 when the hub gives one (LFS files), then linked from the snapshot. libcurl does HTTP.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

namespace rs::hub {

struct DownloadOptions {
  std::string endpoint;           // $HF_ENDPOINT, else https://huggingface.co
  std::string token;              // $HF_TOKEN: sent as "Authorization: Bearer TOKEN"
  std::string revision = "main";  // a branch, tag or commit
  std::filesystem::path cache;    // the hub cache (loader::hub_cache_dir())
  bool progress = true;           // a progress line per file on stderr
  int max_attempts = 5;           // per file; each retry resumes where the last stopped
};

// The options from the environment ($HF_ENDPOINT, $HF_TOKEN) for `revision` into `cache`.
DownloadOptions options_from_env(const std::string& revision, const std::filesystem::path& cache);

// Fetches what a model needs of `repo` ("ORG/NAME", or "ORG/NAME/FILE.gguf" for one GGUF file) and returns the
// snapshot folder. Files already in the cache are not fetched again. Fails (rs::Error) with the hub's answer when the
// repository, revision or a file cannot be had, or a checksum does not match.
std::filesystem::path download_model(const std::string& repo, const DownloadOptions& options);

// Whether this build can download (libcurl was found).
bool available();

}  // namespace rs::hub
