#include "router/prediction_scale.h"

#include <algorithm>

namespace ds41 {

void PredictionScale::Add(double predicted_s, double observed_s) {
  if (!(predicted_s > 0) || !(observed_s > 0)) return;
  MutexLock l(&mu_);
  samples_.emplace_back(predicted_s, observed_s);
  predicted_sum_ += predicted_s;
  observed_sum_ += observed_s;
  while (samples_.size() > window_) {
    predicted_sum_ -= samples_.front().first;
    observed_sum_ -= samples_.front().second;
    samples_.pop_front();
  }
}

double PredictionScale::Scale() const {
  MutexLock l(&mu_);
  if (samples_.size() < min_samples_ || !(predicted_sum_ > 0)) return 1.0;
  return std::clamp(observed_sum_ / predicted_sum_, 1.0, max_scale_);
}

}  // namespace ds41
