#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "engine/vector_ops.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstring>

#include "engine/vector_ops.h"

HWY_BEFORE_NAMESPACE();
namespace ds41 {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

HWY_ATTR void HeadScores(const float* qT, int H, int hd, const float* key, float* scores) {
  const hn::ScalableTag<float> df;
  const int L = static_cast<int>(hn::Lanes(df));
  int h = 0;
  for (; h + L <= H; h += L) {
    auto acc = hn::Zero(df);
    for (int b = 0; b < hd; b += 32) {
      auto part = hn::Mul(hn::LoadU(df, qT + b * H + h), hn::Set(df, key[b]));
      for (int d = b + 1; d < b + 32; ++d) part = hn::MulAdd(hn::LoadU(df, qT + d * H + h), hn::Set(df, key[d]), part);
      acc = b == 0 ? part : hn::Add(acc, part);
    }
    hn::StoreU(acc, df, scores + h);
  }
  for (; h < H; ++h) {  // heads beyond a whole vector: the same order, one lane
    float acc = 0.0f;
    for (int b = 0; b < hd; b += 32) {
      float part = qT[b * H + h] * key[b];
      for (int d = b + 1; d < b + 32; ++d) part += qT[d * H + h] * key[d];
      acc = b == 0 ? part : acc + part;
    }
    scores[h] = acc;
  }
}

HWY_ATTR void AccumulatePv(double p, const float* key, double* pv, int hd) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const int L = static_cast<int>(hn::Lanes(dd));
  const auto vp = hn::Set(dd, p);
  int d = 0;
  for (; d + L <= hd; d += L)
    hn::StoreU(hn::MulAdd(vp, hn::PromoteTo(dd, hn::LoadU(df, key + d)), hn::LoadU(dd, pv + d)), dd, pv + d);
  for (; d < hd; ++d) pv[d] += p * key[d];
}

HWY_ATTR double DotF32Weights(const float* x, const uint8_t* w, int64_t K) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const int64_t L = static_cast<int64_t>(hn::Lanes(dd));
  auto acc0 = hn::Zero(dd), acc1 = hn::Zero(dd);
  int64_t k = 0;
  for (; k + 2 * L <= K; k += 2 * L) {
    acc0 = hn::MulAdd(hn::PromoteTo(dd, hn::LoadU(df, x + k)),
                      hn::PromoteTo(dd, hn::LoadU(df, reinterpret_cast<const float*>(w + 4 * k))), acc0);
    acc1 = hn::MulAdd(hn::PromoteTo(dd, hn::LoadU(df, x + k + L)),
                      hn::PromoteTo(dd, hn::LoadU(df, reinterpret_cast<const float*>(w + 4 * (k + L)))), acc1);
  }
  double s = hn::GetLane(hn::SumOfLanes(dd, hn::Add(acc0, acc1)));
  for (; k < K; ++k) {
    float wk;
    std::memcpy(&wk, w + 4 * k, 4);
    s += static_cast<double>(x[k]) * wk;
  }
  return s;
}

}  // namespace HWY_NAMESPACE
}  // namespace ds41
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ds41 {
HWY_EXPORT(HeadScores);
HWY_EXPORT(AccumulatePv);
HWY_EXPORT(DotF32Weights);

void HeadScores(const float* qT, int H, int hd, const float* key, float* scores) {
  HWY_DYNAMIC_DISPATCH(HeadScores)(qT, H, hd, key, scores);
}
void AccumulatePv(double p, const float* key, double* pv, int hd) { HWY_DYNAMIC_DISPATCH(AccumulatePv)(p, key, pv, hd); }
double DotF32Weights(const float* x, const uint8_t* w, int64_t K) { return HWY_DYNAMIC_DISPATCH(DotF32Weights)(x, w, K); }
}  // namespace ds41
#endif
