// PeerConnection: whether the client of a request still holds its connection, for handlers that answer only at the
// end (non-streaming completions). cpp-httplib 0.11 hands a handler no socket and no "connection closed" query, so
// the server-side socket is found among the process's open sockets by its peer address (unique per connection).
#pragma once

#include <string>

namespace rs::server {

class PeerConnection {
 public:
  // remote_addr / remote_port as httplib reports them (numeric host, port).
  PeerConnection(std::string remote_addr, int remote_port);

  // True once the client has closed or reset the connection. A socket that cannot be found counts as open (the
  // request then simply runs to its end, as before), so this never aborts a live client.
  bool closed();

 private:
  bool matches(int fd) const;
  int find_socket() const;

  std::string addr_;
  int port_;
  int fd_ = -1;
};

}  // namespace rs::server
