// Engram of ForwardPass (MODEL.md §8.4): 24 FP8 table rows per position, projected to one key per
// stream copy and a shared value, gated per copy by a normalized dot product with a signed sqrt.
#include <cmath>

#include "engine/layers/forward.h"
#include "engine/kernels/numerics.h"

namespace ds41 {

void ForwardPass::EngramBlock(int L) {
  const LayerRole& role = c_.roles[L];
  const LayerWeights& w = model_.weights().layers[L];
  const EngramLayout& el = model_.engram();
  const int cols = el.cols(), ed = c_.engram_head_dim, D = c_.dim, hc = c_.hc_mult;
  const int nl = static_cast<int>(el.layers().size());
  const float eps = static_cast<float>(c_.norm_eps);
  const float inv_sqrt_d = static_cast<float>(std::pow(static_cast<double>(D), -0.5));

  std::vector<float> e(static_cast<size_t>(rows_) * cols * ed);
  for (int r = 0; r < rows_; ++r) {
    for (int col = 0; col < cols; ++col) {
      const int64_t row = engram_rows_[(static_cast<size_t>(r) * nl + role.engram_slot) * cols + col];
      const uint8_t* codes = w.engram_table.codes + row * ed;
      const uint8_t* scales = w.engram_table.scales + row * (ed / 32);
      float* out = &e[(static_cast<size_t>(r) * cols + col) * ed];
      for (int k = 0; k < ed; ++k) out[k] = E4m3ToF32(codes[k]) * E8m0ToF32(scales[k / 32]);
    }
  }
  std::vector<float> kv(static_cast<size_t>(rows_) * (hc + 1) * D);
  Lin8(e.data(), rows_, w.engram_wkv, kv.data(), &qa_, pool_);

  std::vector<float> wqk(static_cast<size_t>(hc) * D);
  for (int i = 0; i < hc; ++i)
    for (int d = 0; d < D; ++d) wqk[static_cast<size_t>(i) * D + d] = w.engram_q.at(i, d) * w.engram_k.at(i, d);

  for (int r = 0; r < rows_; ++r) {
    const float* kvr = &kv[static_cast<size_t>(r) * (hc + 1) * D];
    const float* value = kvr + static_cast<size_t>(hc) * D;
    for (int i = 0; i < hc; ++i) {
      float* h = &X_[(static_cast<size_t>(r) * hc + i) * D];
      const float* key = kvr + static_cast<size_t>(i) * D;
      const float* wi = &wqk[static_cast<size_t>(i) * D];
      const float rstd = RsqrtF(MeanSquare(h, D) + eps) * RsqrtF(MeanSquare(key, D) + eps);  // per copy
      double dot = 0.0;
      for (int d = 0; d < D; ++d) dot += static_cast<double>((h[d] * wi[d]) * key[d]);
      const float g = static_cast<float>(dot) * rstd * inv_sqrt_d;
      float gate = SigmoidF(std::copysign(std::sqrt(std::max(std::fabs(g), 1e-6f)), g));
      if (image_[r]) gate = 0.0f;
      for (int d = 0; d < D; ++d) h[d] = RoundBf16(h[d] + gate * value[d]);
    }
  }
}

}  // namespace ds41
