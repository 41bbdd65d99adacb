// Host memory a process may still use: /proc/meminfo, capped by the memory limit of the process's cgroup (v2, or v1's
// memory controller). In a container on a large host, MemAvailable counts the host's memory while the container's
// limit is far lower; sizing weights copies and the KV pool from MemAvailable there gets the server OOM-killed.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>

namespace rs {

struct HostMemory {
  size_t total_bytes = 0;                    // MemTotal, or the cgroup limit when lower
  size_t available_bytes = 0;                // MemAvailable, or what the cgroup limit leaves when lower
  std::optional<size_t> cgroup_limit_bytes;  // the tightest limit of the process's cgroup and its ancestors
};

// Reads `proc_root`/meminfo, `proc_root`/self/cgroup and the cgroup files under `cgroup_root` (the defaults are the
// live system's). A cgroup's free memory is its limit less its working set (usage less inactive file pages, which the
// kernel reclaims before it OOM-kills, as the container runtimes count it). Zeros where /proc/meminfo is unreadable.
HostMemory read_host_memory(const std::filesystem::path& proc_root = "/proc",
                            const std::filesystem::path& cgroup_root = "/sys/fs/cgroup");

}  // namespace rs
