// Small POSIX helpers of the load generator: resolving the server's address, the open-file limit, and the CPU time
// of the calling thread.
#pragma once

#include <sys/socket.h>

#include "loadgen/completion_request.h"

namespace rs::loadgen {

struct Address {
  sockaddr_storage storage{};
  socklen_t length = 0;
  int family = AF_INET;
};

// The first address `url`'s host and port resolve to; throws rs::Error when they do not.
Address resolve(const BaseUrl& url);

// Raises this process's soft limit on open files to its hard limit (a thousand streams need a thousand sockets).
void raise_open_file_limit();

// CPU time (user + system) the calling thread has used, in seconds.
double thread_cpu_seconds();

}  // namespace rs::loadgen
