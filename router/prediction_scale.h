// PredictionScale: how much longer first tokens take than the cost model predicts, over the last
// requests. The model's rates are learned on idle nodes (placement.h); on a host whose nodes share
// CPUs, or under any load the model does not see, the real wait is longer, and overload shedding
// (RouterOptions::max_queue_seconds) must judge the wait a request would really see. No I/O.
// Thread-safe: a mutex guards the window.
#pragma once

#include <cstddef>
#include <deque>
#include <utility>

#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace ds41 {

class PredictionScale {
 public:
  explicit PredictionScale(size_t window = 64, size_t min_samples = 8, double max_scale = 20)
      : window_(window), min_samples_(min_samples), max_scale_(max_scale) {}

  // One served request: its predicted and observed seconds to the first token (both > 0).
  void Add(double predicted_s, double observed_s);
  // Observed over predicted, summed over the window (so long waits weigh most), in [1, max_scale];
  // 1 until min_samples requests were seen.
  double Scale() const;

 private:
  const size_t window_, min_samples_;
  const double max_scale_;
  mutable Mutex mu_;
  std::deque<std::pair<double, double>> samples_ DS41_GUARDED_BY(mu_);
  double predicted_sum_ DS41_GUARDED_BY(mu_) = 0, observed_sum_ DS41_GUARDED_BY(mu_) = 0;
};

}  // namespace ds41
