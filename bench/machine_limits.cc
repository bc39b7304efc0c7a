#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "bench/machine_limits.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "bench/machine_limits.h"
#include "engine/kernels/matmul_bf16_dot.h"
#include "util/thread_pool.h"

#if defined(__x86_64__) && HWY_ONCE
#include <immintrin.h>
#endif

HWY_BEFORE_NAMESPACE();
namespace ds41 {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// 12 independent accumulators hide the FMA latency; returns a value so nothing is optimized away.
HWY_ATTR float FmaLoop(int64_t iters, float seed) {
  const hn::ScalableTag<float> d;
  auto a = hn::Set(d, 1.0f + seed * 1e-9f), b = hn::Set(d, 0.999999f);
  auto c0 = hn::Set(d, 0.1f), c1 = hn::Set(d, 0.2f), c2 = hn::Set(d, 0.3f), c3 = hn::Set(d, 0.4f);
  auto c4 = hn::Set(d, 0.5f), c5 = hn::Set(d, 0.6f), c6 = hn::Set(d, 0.7f), c7 = hn::Set(d, 0.8f);
  auto c8 = hn::Set(d, 0.9f), c9 = hn::Set(d, 1.0f), c10 = hn::Set(d, 1.1f), c11 = hn::Set(d, 1.2f);
  for (int64_t i = 0; i < iters; ++i) {
    c0 = hn::MulAdd(a, b, c0);
    c1 = hn::MulAdd(a, b, c1);
    c2 = hn::MulAdd(a, b, c2);
    c3 = hn::MulAdd(a, b, c3);
    c4 = hn::MulAdd(a, b, c4);
    c5 = hn::MulAdd(a, b, c5);
    c6 = hn::MulAdd(a, b, c6);
    c7 = hn::MulAdd(a, b, c7);
    c8 = hn::MulAdd(a, b, c8);
    c9 = hn::MulAdd(a, b, c9);
    c10 = hn::MulAdd(a, b, c10);
    c11 = hn::MulAdd(a, b, c11);
  }
  auto s = hn::Add(hn::Add(hn::Add(c0, c1), hn::Add(c2, c3)), hn::Add(hn::Add(c4, c5), hn::Add(c6, c7)));
  s = hn::Add(s, hn::Add(hn::Add(c8, c9), hn::Add(c10, c11)));
  return hn::GetLane(s);
}

int64_t FmaLanes() { return static_cast<int64_t>(hn::Lanes(hn::ScalableTag<float>())); }
const char* Target() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace ds41
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ds41 {
HWY_EXPORT(FmaLoop);
HWY_EXPORT(FmaLanes);
HWY_EXPORT(Target);

const char* PeakKernelTarget() { return HWY_DYNAMIC_DISPATCH(Target)(); }

double MeasureTriadBandwidth(ThreadPool* pool, int64_t n, int runs) {
  std::vector<float> a(n), b(n, 1.0f), c(n, 2.0f);
  const int64_t chunks = pool->threads() * 8, chunk = (n + chunks - 1) / chunks;
  double best = 0;
  for (int r = 0; r < runs; ++r) {
    const float s = 1.5f + r;
    const auto t0 = std::chrono::steady_clock::now();
    pool->ParallelFor(chunks, [&](int64_t i) {
      const int64_t lo = i * chunk, hi = std::min(n, lo + chunk);
      for (int64_t k = lo; k < hi; ++k) a[k] = b[k] + s * c[k];
    });
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 3.0 * 4.0 * static_cast<double>(n) / t);
  }
  volatile float sink = a[n / 2];
  (void)sink;
  return best;
}

double MeasurePeakFmaFlops(ThreadPool* pool, int runs) {
  const int64_t iters = 20'000'000;
  const int64_t lanes = HWY_DYNAMIC_DISPATCH(FmaLanes)();
  double best = 0;
  for (int r = 0; r < runs; ++r) {
    std::vector<float> out(pool->threads());
    const auto t0 = std::chrono::steady_clock::now();
    pool->ParallelFor(pool->threads(), [&](int64_t i) { out[i] = HWY_DYNAMIC_DISPATCH(FmaLoop)(iters, static_cast<float>(i)); });
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * 12 * lanes * static_cast<double>(iters) * pool->threads() / t);
  }
  return best;
}

#if defined(__x86_64__)
namespace {
// 12 independent VDPBF16PS chains (32 multiply-adds each per instruction).
__attribute__((target("avx512f,avx512bf16"))) float DotLoop(int64_t iters, float seed) {
  const __m512bh a = reinterpret_cast<__m512bh>(_mm512_set1_epi32(0x3F803F80 + static_cast<int>(seed)));
  const __m512bh b = reinterpret_cast<__m512bh>(_mm512_set1_epi32(0x3F7F3F7F));
  __m512 c[12];
#pragma GCC unroll 12
  for (int j = 0; j < 12; ++j) c[j] = _mm512_set1_ps(0.1f * static_cast<float>(j));
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < 12; ++j) c[j] = _mm512_dpbf16_ps(c[j], a, b);
  }
  __m512 s = c[0];
  for (int j = 1; j < 12; ++j) s = _mm512_add_ps(s, c[j]);
  return _mm512_reduce_add_ps(s);
}
}  // namespace
#endif

double MeasurePeakBf16DotFlops(ThreadPool* pool, int runs) {
#if defined(__x86_64__)
  if (!bf16dot::Supported()) return 0;
  const int64_t iters = 20'000'000;
  double best = 0;
  for (int r = 0; r < runs; ++r) {
    std::vector<float> out(pool->threads());
    const auto t0 = std::chrono::steady_clock::now();
    pool->ParallelFor(pool->threads(), [&](int64_t i) { out[i] = DotLoop(iters, static_cast<float>(i)); });
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * 12 * 32 * static_cast<double>(iters) * pool->threads() / t);
  }
  return best;
#else
  (void)pool;
  (void)runs;
  return 0;
#endif
}

}  // namespace ds41
#endif
