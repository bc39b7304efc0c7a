// Internal: state the server shares with its connections. Connections hold it by shared_ptr so it
// outlives any handler still queued on the io_context.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "http/http_options.h"
#include "http/http_types.h"

namespace ds41 {
class HttpResponder;
}

namespace ds41::http_internal {

class Connection;

struct ServerShared {
  HttpServerOptions options;
  std::shared_ptr<const ErrorFormatter> formatter;
  // Routes one request; runs on the connection's strand and must not block.
  std::function<void(const HttpRequest&, std::shared_ptr<HttpResponder>)> dispatch;
  HttpMetrics metrics;

  std::mutex mu;
  std::unordered_map<Connection*, std::weak_ptr<Connection>> connections;  // guarded by mu
};

}  // namespace ds41::http_internal
