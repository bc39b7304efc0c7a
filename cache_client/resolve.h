// Host name resolution that honours a deadline. getaddrinfo cannot be interrupted, so names are
// resolved on one process-wide resolver thread; a caller whose deadline passes returns and leaves
// the lookup to finish there. Numeric addresses need no lookup and are answered at once.
// Thread-safe: each lookup hands its answer back through state of its own.
#pragma once

#include <asio/ip/tcp.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "util/status.h"

namespace ds41 {

// Every address `host` names, with `port`; Unavailable when it names none, DeadlineExceeded when
// the lookup has not finished by `deadline`.
StatusOr<std::vector<asio::ip::tcp::endpoint>> ResolveBefore(const std::string& host, int port,
                                                             std::chrono::steady_clock::time_point deadline);

}  // namespace ds41
