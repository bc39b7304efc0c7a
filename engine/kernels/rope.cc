#include "engine/kernels/rope.h"

#include <algorithm>
#include <cmath>

#include "engine/kernels/numerics.h"

namespace ds41 {

RopeTable::RopeTable(const ModelConfig& c, bool yarn) {
  const int dim = c.rope_head_dim;
  const double base = yarn ? c.compress_rope_theta : c.rope_theta;
  freqs_.resize(dim / 2);
  for (int k = 0; k < dim / 2; ++k) {
    const float expo = static_cast<float>(2 * k) / static_cast<float>(dim);
    const float p = static_cast<float>(std::pow(base, static_cast<double>(expo)));
    freqs_[k] = 1.0f / p;
  }
  if (yarn && c.original_seq_len > 0) {
    auto corrected_dim = [&](double rotations) {
      return dim * std::log(static_cast<double>(c.original_seq_len) / (rotations * 2 * M_PI)) / (2 * std::log(base));
    };
    const double low = std::max(std::floor(corrected_dim(c.beta_fast)), 0.0);
    const double high = std::min(std::ceil(corrected_dim(c.beta_slow)), static_cast<double>(dim - 1));
    const float span = static_cast<float>(std::max(high - low, 1e-3));
    const float factor = static_cast<float>(c.rope_factor);
    for (int k = 0; k < dim / 2; ++k) {
      const float ramp = std::clamp((static_cast<float>(k) - static_cast<float>(low)) / span, 0.0f, 1.0f);
      const float smooth = 1.0f - ramp;
      // REF: freqs / factor * (1 - smooth) + freqs * smooth, each op in fp32.
      freqs_[k] = freqs_[k] / factor * (1.0f - smooth) + freqs_[k] * smooth;
    }
  }
}

void RopeTable::Angles(int64_t pos, float* cos_out, float* sin_out) const {
  const float p = static_cast<float>(pos);
  for (size_t k = 0; k < freqs_.size(); ++k) {
    const double a = static_cast<double>(p * freqs_[k]);
    cos_out[k] = static_cast<float>(std::cos(a));
    sin_out[k] = static_cast<float>(std::sin(a));
  }
}

void ApplyRope(float* x, int pairs, const float* cos, const float* sin, bool inverse) {
  for (int k = 0; k < pairs; ++k) {
    const double xr = x[2 * k], xi = x[2 * k + 1];
    const double c = cos[k], s = inverse ? -static_cast<double>(sin[k]) : static_cast<double>(sin[k]);
    const float yr = static_cast<float>(xr * c - xi * s);
    const float yi = static_cast<float>(xr * s + xi * c);
    x[2 * k] = RoundBf16(yr);
    x[2 * k + 1] = RoundBf16(yi);
  }
}

}  // namespace ds41
