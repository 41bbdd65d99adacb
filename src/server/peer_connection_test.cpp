#include "server/peer_connection.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace rs::server {
namespace {

// A connected TCP pair over loopback (IPv4 or IPv6): `client` is the peer, `served` the server's side.
struct Connection {
  int listener = -1, client = -1, served = -1;
  SocketAddress client_end, server_end;
  ~Connection() {
    for (int fd : {listener, client, served})
      if (fd >= 0) close(fd);
  }
};

SocketAddress endpoint_of(int fd, bool peer) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len)
       : getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  char host[INET6_ADDRSTRLEN] = {};
  int port = 0;
  if (a.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<sockaddr_in*>(&a);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
  } else {
    const auto* in6 = reinterpret_cast<sockaddr_in6*>(&a);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    port = ntohs(in6->sin6_port);
  }
  return {host, port};
}

// False when the address family is unavailable here (e.g. no IPv6 loopback).
bool connect_pair(Connection& c, int family) {
  sockaddr_storage a{};
  socklen_t len;
  if (family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&a);
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    len = sizeof(sockaddr_in);
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&a);
    in6->sin6_family = AF_INET6;
    in6->sin6_addr = in6addr_loopback;
    len = sizeof(sockaddr_in6);
  }
  c.listener = socket(family, SOCK_STREAM, 0);
  if (c.listener < 0 || bind(c.listener, reinterpret_cast<sockaddr*>(&a), len) != 0 || listen(c.listener, 1) != 0)
    return false;
  getsockname(c.listener, reinterpret_cast<sockaddr*>(&a), &len);
  c.client = socket(family, SOCK_STREAM, 0);
  if (connect(c.client, reinterpret_cast<sockaddr*>(&a), len) != 0) return false;
  c.served = accept(c.listener, nullptr, nullptr);
  c.client_end = endpoint_of(c.served, /*peer=*/true);
  c.server_end = endpoint_of(c.served, /*peer=*/false);
  return c.served >= 0;
}

TEST(PeerConnection, SeesAnOrderlyCloseEvenWithUnreadBytes) {
  for (int family : {AF_INET, AF_INET6}) {
    Connection c;
    if (!connect_pair(c, family)) continue;  // no IPv6 loopback on this machine
    PeerConnection peer(c.client_end, c.server_end);
    ASSERT_TRUE(peer.found()) << c.client_end.addr;
    EXPECT_FALSE(peer.closed());
    ASSERT_EQ(write(c.client, "x\r\n", 3), 3);  // bytes the server never reads (a pipelined request, a stray CRLF)
    EXPECT_FALSE(peer.closed());
    shutdown(c.client, SHUT_WR);
    usleep(20000);
    EXPECT_TRUE(peer.closed()) << c.client_end.addr;
  }
}

TEST(PeerConnection, SeesAReset) {
  Connection c;
  ASSERT_TRUE(connect_pair(c, AF_INET));
  PeerConnection peer(c.client_end, c.server_end);
  ASSERT_TRUE(peer.found());
  linger hard{1, 0};  // close() then sends RST
  setsockopt(c.client, SOL_SOCKET, SO_LINGER, &hard, sizeof(hard));
  close(c.client);
  c.client = -1;
  usleep(20000);
  EXPECT_TRUE(peer.closed());
}

TEST(PeerConnection, AnUnknownPeerCountsAsConnected) {
  Connection c;
  ASSERT_TRUE(connect_pair(c, AF_INET));
  PeerConnection other_port({c.client_end.addr, c.client_end.port == 1 ? 2 : 1}, {});
  EXPECT_FALSE(other_port.found());
  EXPECT_FALSE(other_port.closed());
  PeerConnection other_local(c.client_end, {c.server_end.addr, c.server_end.port == 1 ? 2 : 1});
  EXPECT_FALSE(other_local.found());  // the local endpoint must match too
  EXPECT_FALSE(PeerConnection({}, {}).found());
}

}  // namespace
}  // namespace rs::server
