// Process figures every role exports, read when scraped: the Prometheus client conventions'
// process_* names (prometheus-cpp has none of its own) and the heap as glibc's allocator sees it,
// so that resident memory that grows can be told apart as memory in use or freed memory retained.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>

#include <memory>
#include <string>
#include <vector>

#include "util/status.h"

namespace ds41 {

class ProcessMetrics : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override;
};

// One shared instance, for Exposer::RegisterCollectable (which keeps a weak pointer).
std::shared_ptr<ProcessMetrics> SharedProcessMetrics();

// A node's or the cache's metrics listener (prometheus-cpp's civetweb) on `listen` (host:port, port 0
// for any), serving `registry` and the process figures at /metrics. Its limits are set here rather
// than left to the library's defaults, which may change: a request's line and headers at most 16 KiB
// (refused beyond), and a connection idle for 10 s is closed. Errors (a bad address, a port in
// use) are Status.
inline constexpr int kMetricsMaxRequestBytes = 16 * 1024;
StatusOr<std::unique_ptr<prometheus::Exposer>> ServeMetrics(const std::string& listen,
                                                            const std::shared_ptr<prometheus::Collectable>& registry);

}  // namespace ds41
