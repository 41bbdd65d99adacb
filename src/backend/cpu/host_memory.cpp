#include "backend/cpu/host_memory.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

namespace rs {
namespace {

namespace fs = std::filesystem;

// The first whitespace-separated number in `path`; nullopt when absent, unreadable or "max" (no limit).
std::optional<size_t> read_number(const fs::path& path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word) || word == "max") return std::nullopt;
  try {
    return static_cast<size_t>(std::stoull(word));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// The value of `key` in a "key value" file (memory.stat), or 0.
size_t read_stat(const fs::path& path, const std::string& key) {
  std::ifstream in(path);
  std::string name;
  size_t value = 0;
  while (in >> name >> value)
    if (name == key) return value;
  return 0;
}

// Limits of 2^60 and more mean "none" (cgroup v1 writes LONG_MAX rounded down to a page).
constexpr size_t kNoLimit = size_t{1} << 60;

struct CgroupFiles {
  const char* limit;
  const char* usage;
  const char* inactive_file;  // memory.stat key
};
constexpr CgroupFiles kV2{"memory.max", "memory.current", "inactive_file"};
constexpr CgroupFiles kV1{"memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"};

// Narrows `memory` by the limit of the cgroup at `relative` under `root` and by those of its ancestors up to `root`.
void apply_cgroup(const fs::path& root, const fs::path& relative, const CgroupFiles& files, HostMemory& memory) {
  fs::path level = relative.lexically_normal();
  while (true) {
    const fs::path dir = level.empty() || level == "." ? root : root / level;
    const std::optional<size_t> limit = read_number(dir / files.limit);
    if (limit && *limit < kNoLimit) {
      const size_t usage = read_number(dir / files.usage).value_or(0);
      const size_t inactive = read_stat(dir / "memory.stat", files.inactive_file);
      const size_t working_set = usage > inactive ? usage - inactive : 0;
      const size_t left = *limit > working_set ? *limit - working_set : 0;
      memory.cgroup_limit_bytes = std::min(memory.cgroup_limit_bytes.value_or(*limit), *limit);
      memory.total_bytes = std::min(memory.total_bytes, *limit);
      memory.available_bytes = std::min(memory.available_bytes, left);
    }
    if (level.empty() || level == ".") break;
    level = level.has_parent_path() ? level.parent_path() : fs::path();
  }
}

}  // namespace

HostMemory read_host_memory(const fs::path& proc_root, const fs::path& cgroup_root) {
  HostMemory memory;
  {
    std::ifstream in(proc_root / "meminfo");
    std::string key, unit;
    size_t kib = 0;
    while (in >> key >> kib >> unit) {
      if (key == "MemAvailable:") memory.available_bytes = kib * 1024;
      if (key == "MemTotal:") memory.total_bytes = kib * 1024;
    }
  }
  if (memory.total_bytes == 0) return memory;
  // /proc/self/cgroup: "0::/path" (v2), "N:controllers:/path" (v1; the memory controller's line).
  std::ifstream in(proc_root / "self" / "cgroup");
  std::string line;
  while (std::getline(in, line)) {
    const size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    const fs::path relative = fs::path(path).relative_path();
    if (controllers.empty() && line.starts_with("0:")) {
      // Hybrid hierarchies (v1 controllers beside a v2 tree) mount the v2 tree at unified/.
      const fs::path root = fs::exists(cgroup_root / "cgroup.controllers") || !fs::exists(cgroup_root / "unified")
                                ? cgroup_root
                                : cgroup_root / "unified";
      apply_cgroup(root, relative, kV2, memory);
    } else {
      std::stringstream list(controllers);
      std::string controller;
      while (std::getline(list, controller, ','))
        if (controller == "memory") {
          // A container without its own cgroup namespace sees the host's path, which its mount lacks: then its
          // memory controller's root is its own cgroup.
          const fs::path root = cgroup_root / "memory";
          apply_cgroup(root, fs::exists(root / relative / kV1.limit) ? relative : fs::path(), kV1, memory);
        }
    }
  }
  return memory;
}

}  // namespace rs
