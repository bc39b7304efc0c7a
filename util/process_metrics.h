// Process figures every role exports, read when scraped: the Prometheus client conventions'
// process_* names (prometheus-cpp has none of its own) and the heap as glibc's allocator sees it,
// so that resident memory that grows can be told apart as memory in use or freed memory retained.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <memory>
#include <vector>

namespace ds41 {

class ProcessMetrics : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override;
};

// One shared instance, for Exposer::RegisterCollectable (which keeps a weak pointer).
std::shared_ptr<ProcessMetrics> SharedProcessMetrics();

}  // namespace ds41
