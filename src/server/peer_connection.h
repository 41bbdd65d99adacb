// PeerConnection: whether the client of a request still holds its connection, for handlers that answer only at the
// end (non-streaming completions). cpp-httplib 0.11 hands a handler no socket and no "connection closed" query, so
// the server-side socket is found among the process's open sockets by its two endpoints (unique per connection).
// A client that half-closes its side (shutdown(SHUT_WR)) after sending counts as gone, as nginx treats it by default.
// Used by the one handler thread that serves the request.
#pragma once

#include <string>

namespace rs::server {

struct SocketAddress {
  std::string addr;  // numeric host, as getnameinfo(NI_NUMERICHOST) writes it (and httplib reports it)
  int port = -1;
};

class PeerConnection {
 public:
  // Finds the socket now, while the client is surely connected. `local` may have an empty addr (then only the peer
  // is matched).
  PeerConnection(SocketAddress remote, SocketAddress local);

  // True once the client has closed, half-closed or reset the connection, even with unread bytes queued. A socket
  // that could not be found counts as open (the request then simply runs to its end).
  bool closed() const;
  bool found() const { return fd_ >= 0; }

 private:
  int find_socket() const;

  SocketAddress remote_, local_;
  int fd_ = -1;
};

}  // namespace rs::server
