// Internal: state the server shares with its connections. Connections hold it by shared_ptr so it
// outlives any handler still queued on the io_context.
//
// Thread-safe: options, formatter and dispatch are set before the io threads start and never change;
// metrics are atomics; mu guards the registry of open connections.
#pragma once

#include <functional>
#include <memory>
#include <unordered_map>

#include "http/http_options.h"
#include "http/http_types.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

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

  Mutex mu;
  std::unordered_map<Connection*, std::weak_ptr<Connection>> connections DS41_GUARDED_BY(mu);
};

}  // namespace ds41::http_internal
