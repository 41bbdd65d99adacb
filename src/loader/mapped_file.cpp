#include "loader/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace rs::loader {

Mapping map_readonly(const std::filesystem::path& path, size_t min_bytes, std::string_view too_short) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  RS_CHECK(fd >= 0, "{}: cannot open: {}", path.string(), std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    RS_FAIL("{}: not a regular file", path.string());
  }
  const auto size = static_cast<size_t>(info.st_size);
  if (size < min_bytes || size == 0) {
    ::close(fd);
    RS_FAIL("{}: file of {} bytes is too short to be {} (truncated?)", path.string(), size, too_short);
  }
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  RS_CHECK(data != MAP_FAILED, "{}: mmap failed: {}", path.string(), std::strerror(errno));
  return {data, size};
}

}  // namespace rs::loader
