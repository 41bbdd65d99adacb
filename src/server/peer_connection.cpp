#include "server/peer_connection.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <utility>

namespace rs::server {
namespace {

enum class Side { kPeer, kLocal };

// The address in binary, so that each candidate socket costs one getpeername/getsockname and a compare: under load
// the scan passes ~2,000 sockets per non-streaming request, and formatting each one's address was most of its work.
struct BinaryAddress {
  int family = AF_UNSPEC;  // AF_UNSPEC: not numeric, compared as text
  in_addr v4{};
  in6_addr v6{};
};

BinaryAddress parse_address(const std::string& text) {
  BinaryAddress a;
  if (inet_pton(AF_INET, text.c_str(), &a.v4) == 1) {
    a.family = AF_INET;
  } else if (inet_pton(AF_INET6, text.c_str(), &a.v6) == 1) {
    a.family = AF_INET6;
  }
  return a;
}

bool endpoint_is(int fd, Side side, const SocketAddress& want, const BinaryAddress& binary) {
  sockaddr_storage address{};
  socklen_t len = sizeof(address);
  auto* sa = reinterpret_cast<sockaddr*>(&address);
  if ((side == Side::kPeer ? getpeername(fd, sa, &len) : getsockname(fd, sa, &len)) != 0) return false;
  if (binary.family == AF_INET && sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    return ntohs(in->sin_port) == want.port && in->sin_addr.s_addr == binary.v4.s_addr;
  }
  if (binary.family == AF_INET6 && sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    return ntohs(in6->sin6_port) == want.port && std::memcmp(&in6->sin6_addr, &binary.v6, sizeof(in6_addr)) == 0;
  }
  if (binary.family != AF_UNSPEC) return false;  // numeric, of the other family
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
  const BinaryAddress remote = parse_address(remote_.addr), local = parse_address(local_.addr);
  int found = -1;
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    struct stat st {};
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    if (!endpoint_is(static_cast<int>(fd), Side::kPeer, remote_, remote)) continue;
    if (!local_.addr.empty() && !endpoint_is(static_cast<int>(fd), Side::kLocal, local_, local)) continue;
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
