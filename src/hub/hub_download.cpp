#include "hub/hub_download.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/log.h"

namespace rs::hub {
namespace fs = std::filesystem;
namespace {

struct Response {
  long status = 0;
  std::map<std::string, std::string> headers;  // of the last response (after redirects), names lower-case
  std::string body;                            // when no file sink
  std::string error;                           // curl's, when the transfer failed
};

struct Transfer {
  CURL* curl = nullptr;
  Response* response;
  FILE* sink = nullptr;
  std::string label;   // the file, for the progress line
  int64_t offset = 0;  // bytes already on disk (a resumed download)
  bool progress = false;
  int64_t shown = -1;  // last percentage printed
};

size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto* response = static_cast<Response*>(user);
  std::string line(data, size * count);
  if (line.rfind("HTTP/", 0) == 0) response->headers.clear();  // a new response (a redirect's target)
  const size_t colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = line.substr(0, colon), value = line.substr(colon + 1);
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    value.erase(0, value.find_first_not_of(" \t"));
    value.erase(value.find_last_not_of(" \t\r\n") + 1);
    response->headers[name] = value;
  }
  return size * count;
}

size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto* transfer = static_cast<Transfer*>(user);
  long status = 0;
  curl_easy_getinfo(transfer->curl, CURLINFO_RESPONSE_CODE, &status);
  // Only a file's own bytes go into it: an error page (429, 5xx) is kept as the answer's body instead.
  if (transfer->sink && (status == 200 || status == 206)) return std::fwrite(data, size, count, transfer->sink) * size;
  if (transfer->response->body.size() > (1 << 16)) return size * count;
  transfer->response->body.append(data, size * count);
  return size * count;
}

int on_progress(void* user, curl_off_t total, curl_off_t now, curl_off_t, curl_off_t) {
  auto* transfer = static_cast<Transfer*>(user);
  if (!transfer->progress || total <= 0) return 0;
  const int64_t done = transfer->offset + now, all = transfer->offset + total;
  const int64_t percent = done * 100 / all;
  if (percent == transfer->shown) return 0;
  transfer->shown = percent;
  std::fprintf(stderr, "\rdownloading %s: %3lld%% (%.1f of %.1f MiB)", transfer->label.c_str(),
               static_cast<long long>(percent), done / 1048576.0, all / 1048576.0);
  return 0;
}

// One HTTP request. follow: follow redirects (files); head: no body; sink: the body goes to this file, resumed at
// `offset` with a Range request when > 0.
Response request(const std::string& url, const DownloadOptions& options, bool head, bool follow, FILE* sink = nullptr,
                 int64_t offset = 0, const std::string& label = {}) {
  Response response;
  CURL* curl = curl_easy_init();
  RS_CHECK(curl, "cannot start libcurl");
  Transfer transfer{curl, &response, sink, label, offset, options.progress && sink && isatty(STDERR_FILENO)};
  curl_slist* headers = curl_slist_append(nullptr, "User-Agent: radixserve");
  // libcurl keeps custom Authorization headers from hosts a redirect leads to (a CDN gets no token).
  if (!options.token.empty()) headers = curl_slist_append(headers, ("Authorization: Bearer " + options.token).c_str());
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, follow ? 1L : 0L);
  curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(curl, CURLOPT_NOBODY, head ? 1L : 0L);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &response);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 30L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);  // a transfer stalled for a minute fails (and is resumed)
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, 60L);
  if (offset > 0) curl_easy_setopt(curl, CURLOPT_RESUME_FROM_LARGE, static_cast<curl_off_t>(offset));
  const CURLcode code = curl_easy_perform(curl);
  if (code != CURLE_OK) response.error = curl_easy_strerror(code);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  if (transfer.progress && transfer.shown >= 0) std::fputc('\n', stderr);
  return response;
}

std::string describe(const Response& response, const std::string& url) {
  if (!response.error.empty()) return fmt::format("{}: {}", url, response.error);
  std::string why = fmt::format("{}: HTTP {}", url, response.status);
  if (response.status == 401 || response.status == 403)
    why += " (access denied: a gated or private repository needs $HF_TOKEN)";
  if (response.status == 404) why += " (no such repository, revision or file)";
  return why;
}

// SHA-256 of a file, or git's blob id (SHA-1 of "blob <size>\0" + content: the ETag the hub gives non-LFS files).
std::string digest_of(const fs::path& file, bool git_blob) {
  std::ifstream in(file, std::ios::binary);
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, git_blob ? EVP_sha1() : EVP_sha256(), nullptr);
  if (git_blob) {
    const std::string header = fmt::format("blob {}", fs::file_size(file));
    EVP_DigestUpdate(ctx, header.data(), header.size() + 1);  // with its terminating NUL
  }
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    EVP_DigestUpdate(ctx, buffer.data(), static_cast<size_t>(in.gcount()));
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_DigestFinal_ex(ctx, digest, &size);
  EVP_MD_CTX_free(ctx);
  std::string hex;
  for (unsigned int i = 0; i < size; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

// The files of a repository that serving needs.
bool wanted(const std::string& name, bool has_safetensors) {
  // Subfolders (original/, onnx/, ...) hold other formats; sentence-transformers' module folders (1_Pooling/, ...)
  // hold the embedding's pooling.
  static const std::regex kModuleConfig(R"([0-9]+_[A-Za-z]+/config\.json)");
  if (std::regex_match(name, kModuleConfig)) return true;
  if (name.find('/') != std::string::npos) return false;
  static const std::regex kWanted(
      R"(.*\.json|.*\.safetensors|.*\.jinja|tokenizer\.model|merges\.txt|vocab\.(json|txt))");
  if (std::regex_match(name, kWanted)) return true;
  return !has_safetensors && std::regex_match(name, std::regex(R"(pytorch_model.*\.bin)"));
}

std::string blob_name(const Response& head) {
  auto it = head.headers.find("x-linked-etag");
  if (it == head.headers.end()) it = head.headers.find("etag");
  RS_CHECK(it != head.headers.end(), "the hub gave no ETag for a file");
  std::string etag = it->second;
  if (etag.rfind("W/", 0) == 0) etag.erase(0, 2);
  etag.erase(std::remove(etag.begin(), etag.end(), '"'), etag.end());
  RS_CHECK(!etag.empty() && etag.find('/') == std::string::npos, "unusable ETag '{}'", etag);
  return etag;
}

void fetch_file(const std::string& repo, const std::string& sha, const std::string& file, const fs::path& root,
                const DownloadOptions& options) {
  const fs::path link = root / "snapshots" / sha / file;
  if (fs::exists(link)) return;  // already in the cache (a link to its blob, or a file huggingface_hub placed)
  if (fs::is_symlink(fs::symlink_status(link))) fs::remove(link);  // a link whose blob was deleted: fetch it again
  const std::string url = fmt::format("{}/{}/resolve/{}/{}", options.endpoint, repo, sha, file);
  const Response head = request(url, options, /*head=*/true, /*follow=*/false);
  RS_CHECK(head.error.empty() && head.status >= 200 && head.status < 400, "cannot download {}", describe(head, url));
  const std::string etag = blob_name(head);
  const auto size_header =
      head.headers.count("x-linked-size") ? head.headers.find("x-linked-size") : head.headers.find("content-length");
  const int64_t size = size_header != head.headers.end() ? std::atoll(size_header->second.c_str()) : -1;
  const fs::path blob = root / "blobs" / etag;
  fs::create_directories(blob.parent_path());
  // One download per blob at a time, across processes sharing the cache: the second waits, then finds the blob.
  const fs::path lock_path = blob.string() + ".lock";
  const int lock_fd = ::open(lock_path.c_str(), O_CREAT | O_RDWR, 0644);
  RS_CHECK(lock_fd >= 0, "cannot create {}", lock_path.string());
  struct Unlock {
    int fd;
    ~Unlock() { ::close(fd); }  // closing releases the flock
  } unlock{lock_fd};
  RS_CHECK(::flock(lock_fd, LOCK_EX) == 0, "cannot lock {}", lock_path.string());
  if (!fs::exists(blob)) {
    const fs::path partial = blob.string() + ".incomplete";
    std::string last_error;
    bool done = false;
    for (int attempt = 0; attempt < options.max_attempts && !done; ++attempt) {
      const int64_t offset = fs::exists(partial) ? static_cast<int64_t>(fs::file_size(partial)) : 0;
      FILE* sink = std::fopen(partial.c_str(), "ab");
      RS_CHECK(sink, "cannot write {}", partial.string());
      const Response got = request(url, options, /*head=*/false, /*follow=*/true, sink, offset, file);
      std::fclose(sink);
      // The range starts at the end: complete, if it has the size the hub announced (else start over).
      if (got.error.empty() && got.status == 416) {
        done = size < 0 || static_cast<int64_t>(fs::file_size(partial)) == size;
        if (!done) fs::remove(partial);
      }
      if (got.error.empty() && (got.status == 200 || got.status == 206)) {
        if (got.status == 200 && offset > 0) {  // the server ignored the range: the file restarted from byte 0
          fs::remove(partial);
          continue;
        }
        done = true;
      } else if (!done) {
        last_error = describe(got, url);
        RS_LOG_WARN("download of {} interrupted ({}); resuming", file, last_error);
      }
    }
    RS_CHECK(done, "cannot download {} after {} attempts: {}", file, options.max_attempts, last_error);
    // An LFS file's ETag is its SHA-256, another file's its git blob id (SHA-1): either must match.
    const bool lfs = std::regex_match(etag, std::regex("[0-9a-f]{64}"));
    if (lfs || std::regex_match(etag, std::regex("[0-9a-f]{40}"))) {
      const std::string actual = digest_of(partial, /*git_blob=*/!lfs);
      if (actual != etag) {
        fs::remove(partial);
        RS_FAIL("{} is corrupt: {} {} where the hub says {}", file, lfs ? "SHA-256" : "git blob id", actual, etag);
      }
    }
    fs::rename(partial, blob);
  }
  fs::create_directories(link.parent_path());
  fs::create_symlink(fs::relative(blob, link.parent_path()), link);
}

}  // namespace

bool available() { return true; }

DownloadOptions options_from_env(const std::string& revision, const fs::path& cache) {
  DownloadOptions options;
  const char* endpoint = std::getenv("HF_ENDPOINT");
  options.endpoint = endpoint && *endpoint ? endpoint : "https://huggingface.co";
  while (!options.endpoint.empty() && options.endpoint.back() == '/') options.endpoint.pop_back();
  if (const char* token = std::getenv("HF_TOKEN")) options.token = token;
  if (!revision.empty()) options.revision = revision;
  options.cache = cache;
  return options;
}

fs::path download_model(const std::string& given, const DownloadOptions& options) {
  static const bool curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  RS_CHECK(curl_ready, "libcurl failed to initialise");
  std::string repo = given, gguf;
  if (const size_t second = given.find('/', given.find('/') + 1); second != std::string::npos) {
    repo = given.substr(0, second);
    gguf = given.substr(second + 1);
  }
  RS_CHECK(std::count(repo.begin(), repo.end(), '/') == 1 && repo.front() != '/' && repo.back() != '/',
           "'{}' is not a hub repository id (ORG/NAME)", given);
  char* escaped = curl_easy_escape(nullptr, options.revision.c_str(), static_cast<int>(options.revision.size()));
  const std::string revision = escaped ? escaped : options.revision;  // refs/pr/1 -> refs%2Fpr%2F1, as the hub wants
  curl_free(escaped);
  const std::string api = fmt::format("{}/api/models/{}/revision/{}", options.endpoint, repo, revision);
  const Response info = request(api, options, /*head=*/false, /*follow=*/true);
  RS_CHECK(info.error.empty() && info.status == 200, "cannot find {} on the hub: {}", given, describe(info, api));
  const nlohmann::json json = nlohmann::json::parse(info.body, nullptr, false);
  RS_CHECK(json.is_object() && json.contains("sha") && json["sha"].is_string(),
           "the hub's answer for {} has no commit sha", repo);
  const std::string sha = json["sha"];
  RS_CHECK(std::regex_match(sha, std::regex("[0-9A-Za-z]+")), "unusable commit id '{}'", sha);
  std::vector<std::string> files;
  bool has_safetensors = false;
  for (const auto& sibling : json.value("siblings", nlohmann::json::array()))
    if (sibling.contains("rfilename") && sibling["rfilename"].is_string()) {
      files.push_back(sibling["rfilename"]);
      has_safetensors |= files.back().ends_with(".safetensors");
    }
  std::vector<std::string> chosen;
  if (!gguf.empty()) {
    RS_CHECK(std::find(files.begin(), files.end(), gguf) != files.end(), "{} has no file {}", repo, gguf);
    chosen.push_back(gguf);
  } else {
    for (const std::string& file : files)
      if (wanted(file, has_safetensors)) chosen.push_back(file);
    RS_CHECK(std::find(chosen.begin(), chosen.end(), "config.json") != chosen.end(),
             "{} has no config.json: not a model radixserve can serve (for a GGUF repository name the file: "
             "ORG/NAME/FILE.gguf)",
             repo);
  }
  std::string folder = "models--" + repo;
  folder.replace(folder.find('/'), 1, "--");
  const fs::path root = options.cache / folder;
  RS_LOG_INFO("downloading {} ({} files at {}) from {} into {}", repo, chosen.size(), sha.substr(0, 12),
              options.endpoint, root.string());
  // Marked incomplete until every file is there, so that an interrupted download is resumed, not served.
  const fs::path snapshot = root / "snapshots" / sha;
  fs::create_directories(snapshot);
  const fs::path marker = snapshot / ".radixserve-incomplete";
  std::ofstream(marker).put('\n');
  for (const std::string& file : chosen) fetch_file(repo, sha, file, root, options);
  fs::remove(marker);
  if (options.revision != sha) {
    fs::create_directories((root / "refs" / options.revision).parent_path());
    std::ofstream(root / "refs" / options.revision) << sha;
  }
  return gguf.empty() ? snapshot : snapshot / gguf;
}

}  // namespace rs::hub
