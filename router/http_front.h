// HttpFront: the OpenAI-compatible HTTP routes on an HttpServer. Handlers parse on the io thread
// and run each request on a worker pool (generation blocks on the decoder's stream); streamed
// replies go out as server-sent events. Also /health and /metrics.
#pragma once

#include <prometheus/registry.h>

#include <memory>

#include "http/http_server.h"
#include "router/node_table.h"
#include "router/openai_api.h"
#include "util/thread_pool.h"

namespace ds41 {

// Dumps JSON for the wire; invalid UTF-8 from the model becomes U+FFFD instead of an exception.
std::string WireJson(const Json& j);

class HttpFront {
 public:
  HttpFront(OpenAiApi* api, const TenantTable* tenants, NodeTable* nodes, RouterMetrics* metrics,
            std::shared_ptr<prometheus::Registry> registry, ThreadPool* workers);
  // The API, /health, /livez and, unless `metrics` is false (--metrics-listen moves it to a listener
  // of its own: RegisterMetrics), /metrics.
  void Register(HttpServer* server, bool metrics = true) { Register(server->routes(), metrics); }
  // The same routes on a bare table: fuzz/http_request_fuzzer.cc drives them without sockets.
  void Register(HttpRouter* routes, bool metrics = true);
  void RegisterMetrics(HttpRouter* routes);

 private:
  void Api(const std::string& endpoint, const HttpRequest& req, std::shared_ptr<HttpResponder> resp);
  void Reply(const std::string& endpoint, HttpResponder& resp, const ApiOutcome& out);

  OpenAiApi* api_;
  const TenantTable* tenants_;
  NodeTable* nodes_;
  RouterMetrics* metrics_;
  std::shared_ptr<prometheus::Registry> registry_;
  ThreadPool* workers_;
};

}  // namespace ds41
