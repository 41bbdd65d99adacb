#include "server/peer_connection.h"

#include <dirent.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace rs::server {

PeerConnection::PeerConnection(std::string remote_addr, int remote_port)
    : addr_(std::move(remote_addr)), port_(remote_port) {}

bool PeerConnection::matches(int fd) const {
  sockaddr_storage peer{};
  socklen_t len = sizeof(peer);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) return false;
  char host[NI_MAXHOST], port[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<sockaddr*>(&peer), len, host, sizeof(host), port, sizeof(port),
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return false;
  return addr_ == host && port_ == std::atoi(port);
}

int PeerConnection::find_socket() const {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int found = -1;
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    struct stat st {};
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    if (matches(static_cast<int>(fd))) {
      found = static_cast<int>(fd);
      break;
    }
  }
  closedir(dir);
  return found;
}

bool PeerConnection::closed() {
  if (fd_ >= 0 && !matches(fd_)) {
    // A reset connection has no peer any more (ENOTCONN); the descriptor itself stays ours until the handler returns.
    sockaddr_storage peer{};
    socklen_t len = sizeof(peer);
    if (getpeername(fd_, reinterpret_cast<sockaddr*>(&peer), &len) != 0 && errno == ENOTCONN) return true;
    fd_ = -1;
  }
  if (fd_ < 0) fd_ = find_socket();
  if (fd_ < 0) return false;
  char byte;
  const ssize_t n = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return false;                 // bytes waiting (a pipelined request): still there
  if (n == 0) return true;                 // orderly shutdown by the client
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;  // reset
}

}  // namespace rs::server
