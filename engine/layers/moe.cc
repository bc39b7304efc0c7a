// MoE of ForwardPass (MODEL.md §7): sqrt-softplus router with selection bias (bias_vl for image-span
// tokens), clamped SwiGLU experts on MXFP4 weights, the FP8 shared expert, routed outputs added in
// ascending expert order and the shared one last, in fp32.
#include <algorithm>
#include <cmath>

#include "engine/layers/forward.h"
#include "engine/kernels/numerics.h"
#include "util/thread_pool.h"

namespace ds41 {
namespace {

template <typename Linear>
void RunExpert(const Linear& w1, const Linear& w2, const Linear& w3, const std::vector<float>& x, int n,
               const float* weights, float limit, std::vector<float>* y, QuantActs* qa, ThreadPool* pool) {
  const int64_t inter = w1.out;
  std::vector<float> a(static_cast<size_t>(n) * inter), u(a.size()), h(a.size());
  Lin8(x.data(), n, w1, a.data(), qa, pool);
  Lin8(x.data(), n, w3, u.data(), qa, pool);
  auto activate = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t k = 0; k < inter; ++k) {
        const size_t i = static_cast<size_t>(r) * inter + k;
        float gate = a[i], up = u[i];
        if (limit > 0.0f) {
          up = std::clamp(up, -limit, limit);
          gate = std::min(gate, limit);
        }
        float v = SiluF(gate) * up;
        if (weights != nullptr) v = weights[r] * v;
        h[i] = RoundBf16(v);
      }
    }
  };
  // SiLU is a float64 exp per element (docs/numerics.md): worth spreading from a few rows on.
  ForRanges(pool, n, std::max<int64_t>(1, kParallelGrain / 16 / inter), activate);
  y->resize(static_cast<size_t>(n) * w2.out);
  Lin8(h.data(), n, w2, y->data(), qa, pool);
}

}  // namespace

void ForwardPass::Moe(int L, const std::vector<float>& x, std::vector<float>* out) const {
  MoeOf(model_.weights().layers[L], c_.n_activated_experts, L, x, out);
}

void ForwardPass::MoeOf(const LayerWeights& w, int k, int L, const std::vector<float>& x, std::vector<float>* out) const {
  const int D = c_.dim, ne = static_cast<int>(w.experts.size());
  const float limit = static_cast<float>(c_.swiglu_limit);

  // Router (Lin32, fp32 scores); the bias only selects.
  std::vector<float> z(static_cast<size_t>(rows_) * ne);
  MatMulBf16(x.data(), rows_, w.gate, z.data(), pool_);
  std::vector<std::vector<std::pair<int, float>>> routed(ne);  // expert -> (row, weight)
  std::vector<float> s(ne), biased(ne);
  std::vector<int> order(ne);
  for (int r = 0; r < rows_; ++r) {
    const bool vl = image_[r] && w.gate_bias_vl.present();
    for (int e = 0; e < ne; ++e) {
      s[e] = std::sqrt(SoftplusF(z[static_cast<size_t>(r) * ne + e]));
      biased[e] = s[e] + (vl ? w.gate_bias_vl.at(e) : w.gate_bias.at(e));
    }
    for (int e = 0; e < ne; ++e) order[e] = e;
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int a, int b) { return biased[a] > biased[b] || (biased[a] == biased[b] && a < b); });
    double sum = 0.0;
    for (int i = 0; i < k; ++i) sum += s[order[i]];
    const float denom = static_cast<float>(sum) + 1e-20f;  // literal 1e-20, not norm_eps (REF)
    for (int i = 0; i < k; ++i) {
      float wt = s[order[i]];
      if (c_.norm_topk_prob && k > 1) wt = wt / denom;
      wt = wt * static_cast<float>(c_.route_scale);
      routed[order[i]].push_back({r, wt});
    }
  }

  // Experts in ascending index, each over the rows routed to it, accumulated in fp32.
  std::vector<float> acc(static_cast<size_t>(rows_) * D, 0.0f), xe, ye, wts;
  for (int e = 0; e < ne; ++e) {
    const auto& rows = routed[e];
    if (rows.empty()) continue;
    const int n = static_cast<int>(rows.size());
    xe.resize(static_cast<size_t>(n) * D);
    wts.resize(n);
    for (int i = 0; i < n; ++i) {
      std::copy_n(&x[static_cast<size_t>(rows[i].first) * D], D, &xe[static_cast<size_t>(i) * D]);
      wts[i] = rows[i].second;
    }
    std::shared_ptr<const CachedExpert> held;  // keeps a cached expert alive while it runs
    if (experts_ && L >= 0) held = experts_->Acquire(L, e);
    const ExpertWeights& ew = held ? held->weights : w.experts[e];
    RunExpert(ew.w1, ew.w2, ew.w3, xe, n, wts.data(), limit, &ye, &qa_, pool_);
    // An expert sees a row at most once, so its rows' sums are independent.
    ForRows(n, D, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        for (int d = 0; d < D; ++d) acc[static_cast<size_t>(rows[i].first) * D + d] += ye[static_cast<size_t>(i) * D + d];
    });
  }
  RunExpert(w.sh_w1, w.sh_w2, w.sh_w3, x, rows_, nullptr, limit, &ye, &qa_, pool_);
  out->resize(acc.size());
  ForRows(rows_, D, [&](int64_t r0, int64_t r1) {
    for (size_t i = static_cast<size_t>(r0) * D; i < static_cast<size_t>(r1) * D; ++i) (*out)[i] = RoundBf16(acc[i] + ye[i]);
  });
}

}  // namespace ds41
