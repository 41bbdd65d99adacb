#include "server/peer_connection.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>
#include <utility>

namespace rs::server {
namespace {

enum class Side { kPeer, kLocal };

bool endpoint_is(int fd, Side side, const SocketAddress& want) {
  sockaddr_storage address{};
  socklen_t len = sizeof(address);
  auto* sa = reinterpret_cast<sockaddr*>(&address);
  if ((side == Side::kPeer ? getpeername(fd, sa, &len) : getsockname(fd, sa, &len)) != 0) return false;
  char host[NI_MAXHOST], port[NI_MAXSERV];
  if (getnameinfo(sa, len, host, sizeof(host), port, sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV) != 0) return false;
  return want.addr == host && want.port == std::atoi(port);
}

}  // namespace

PeerConnection::PeerConnection(SocketAddress remote, SocketAddress local)
    : remote_(std::move(remote)), local_(std::move(local)) {
  if (!remote_.addr.empty()) fd_ = find_socket();
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
    if (!endpoint_is(static_cast<int>(fd), Side::kPeer, remote_)) continue;
    if (!local_.addr.empty() && !endpoint_is(static_cast<int>(fd), Side::kLocal, local_)) continue;
    found = static_cast<int>(fd);
    break;
  }
  closedir(dir);
  return found;
}

bool PeerConnection::closed() const {
  if (fd_ < 0) return false;
  // The descriptor stays ours until the handler returns (httplib closes it afterwards), so it cannot be reused.
  // POLLRDHUP reports the client's FIN even when bytes it sent earlier are still unread.
  pollfd p{fd_, POLLRDHUP, 0};
  if (poll(&p, 1, 0) < 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace rs::server
