#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "bench/machine_limits.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "bench/machine_limits.h"
#include "util/thread_pool.h"

#if HWY_ONCE
#include <hwy/aligned_allocator.h>
#include <hwy/cache_control.h>
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

// a[i] = b[i] + s * c[i] over [lo, hi); lo is a multiple of the vector (the arrays are aligned).
// Streaming stores skip the read-for-ownership of a's lines, a quarter of the traffic.
HWY_ATTR void Triad(float* HWY_RESTRICT a, const float* HWY_RESTRICT b, const float* HWY_RESTRICT c, float s,
                    int64_t lo, int64_t hi, bool stream) {
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const auto vs = hn::Set(d, s);
  int64_t i = lo;
  if (stream) {
    for (; i + N <= hi; i += N) hn::Stream(hn::MulAdd(vs, hn::Load(d, c + i), hn::Load(d, b + i)), d, a + i);
  } else {
    for (; i + N <= hi; i += N) hn::Store(hn::MulAdd(vs, hn::Load(d, c + i), hn::Load(d, b + i)), d, a + i);
  }
  for (; i < hi; ++i) a[i] = b[i] + s * c[i];
}

// The sum of x[lo, hi) with 8 accumulators (loads, not the adds, bound it).
HWY_ATTR float Sum(const float* HWY_RESTRICT x, int64_t lo, int64_t hi) {
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  auto s0 = hn::Zero(d), s1 = hn::Zero(d), s2 = hn::Zero(d), s3 = hn::Zero(d);
  auto s4 = hn::Zero(d), s5 = hn::Zero(d), s6 = hn::Zero(d), s7 = hn::Zero(d);
  int64_t i = lo;
  for (; i + 8 * N <= hi; i += 8 * N) {
    s0 = hn::Add(s0, hn::Load(d, x + i));
    s1 = hn::Add(s1, hn::Load(d, x + i + N));
    s2 = hn::Add(s2, hn::Load(d, x + i + 2 * N));
    s3 = hn::Add(s3, hn::Load(d, x + i + 3 * N));
    s4 = hn::Add(s4, hn::Load(d, x + i + 4 * N));
    s5 = hn::Add(s5, hn::Load(d, x + i + 5 * N));
    s6 = hn::Add(s6, hn::Load(d, x + i + 6 * N));
    s7 = hn::Add(s7, hn::Load(d, x + i + 7 * N));
  }
  auto s = hn::Add(hn::Add(hn::Add(s0, s1), hn::Add(s2, s3)), hn::Add(hn::Add(s4, s5), hn::Add(s6, s7)));
  float total = hn::GetLane(hn::SumOfLanes(d, s));
  for (; i < hi; ++i) total += x[i];
  return total;
}

}  // namespace HWY_NAMESPACE
}  // namespace ds41
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ds41 {
HWY_EXPORT(FmaLoop);
HWY_EXPORT(FmaLanes);
HWY_EXPORT(Target);
HWY_EXPORT(Triad);
HWY_EXPORT(Sum);

namespace {

using Steady = std::chrono::steady_clock;
double Seconds(Steady::time_point t0) { return std::chrono::duration<double>(Steady::now() - t0).count(); }

// Share t of n elements (one per thread of the pool, as OpenMP's static schedule splits them; the pool
// hands shares to whichever thread is free), rounded to whole cache lines so every share starts aligned.
struct Share {
  int64_t lo, hi;
};
Share ShareOf(int64_t n, int64_t t, int64_t threads) {
  const int64_t per = (n / threads + 15) / 16 * 16;
  return {std::min(n, t * per), t + 1 == threads ? n : std::min(n, (t + 1) * per)};
}

}  // namespace

const char* PeakKernelTarget() { return HWY_DYNAMIC_DISPATCH(Target)(); }

TriadBandwidth MeasureTriadBandwidth(ThreadPool* pool, int64_t n, int runs) {
  auto a = hwy::AllocateAligned<float>(static_cast<size_t>(n));
  auto b = hwy::AllocateAligned<float>(static_cast<size_t>(n));
  auto c = hwy::AllocateAligned<float>(static_cast<size_t>(n));
  const int64_t threads = pool->threads();
  pool->ParallelFor(threads, [&](int64_t t) {  // first touch in parallel, as STREAM does
    const Share s = ShareOf(n, t, threads);
    std::fill(a.get() + s.lo, a.get() + s.hi, 0.0f);
    std::fill(b.get() + s.lo, b.get() + s.hi, 1.0f);
    std::fill(c.get() + s.lo, c.get() + s.hi, 2.0f);
  });
  TriadBandwidth best;
  for (int r = 0; r < 2 * runs; ++r) {  // the two store kinds in turn, over the same arrays
    const bool stream = r % 2 == 0;
    const float s = 1.5f + static_cast<float>(r);
    const auto t0 = Steady::now();
    pool->ParallelFor(threads, [&](int64_t t) {
      const Share sh = ShareOf(n, t, threads);
      HWY_DYNAMIC_DISPATCH(Triad)(a.get(), b.get(), c.get(), s, sh.lo, sh.hi, stream);
      hwy::FlushStream();
    });
    double& kept = stream ? best.streaming : best.plain;
    kept = std::max(kept, 3.0 * 4.0 * static_cast<double>(n) / Seconds(t0));
  }
  volatile float sink = a[static_cast<size_t>(n / 2)];
  (void)sink;
  return best;
}

double MeasureReadBandwidth(ThreadPool* pool, int64_t n, int runs) {
  auto x = hwy::AllocateAligned<float>(static_cast<size_t>(n));
  const int64_t threads = pool->threads();
  pool->ParallelFor(threads, [&](int64_t t) {
    const Share s = ShareOf(n, t, threads);
    std::fill(x.get() + s.lo, x.get() + s.hi, 1.0f);
  });
  std::vector<float> sums(static_cast<size_t>(threads));
  double best = 0;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = Steady::now();
    pool->ParallelFor(threads, [&](int64_t t) {
      const Share s = ShareOf(n, t, threads);
      sums[static_cast<size_t>(t)] = HWY_DYNAMIC_DISPATCH(Sum)(x.get(), s.lo, s.hi);
    });
    best = std::max(best, 4.0 * static_cast<double>(n) / Seconds(t0));
  }
  volatile float sink = sums[0];
  (void)sink;
  return best;
}

double MeasurePeakFmaFlops(ThreadPool* pool, int runs) {
  const int64_t iters = 20'000'000;
  const int64_t lanes = HWY_DYNAMIC_DISPATCH(FmaLanes)();
  double best = 0;
  for (int r = 0; r < runs; ++r) {
    std::vector<float> out(static_cast<size_t>(pool->threads()));
    const auto t0 = Steady::now();
    pool->ParallelFor(pool->threads(), [&](int64_t i) {
      out[static_cast<size_t>(i)] = HWY_DYNAMIC_DISPATCH(FmaLoop)(iters, static_cast<float>(i));
    });
    best = std::max(best, 2.0 * 12 * static_cast<double>(lanes * iters) * pool->threads() / Seconds(t0));
  }
  return best;
}

float FmaLoopForTest(int64_t iters) { return HWY_DYNAMIC_DISPATCH(FmaLoop)(iters, 0.0f); }

void TriadForTest(float* a, const float* b, const float* c, float s, int64_t n, bool stream) {
  HWY_DYNAMIC_DISPATCH(Triad)(a, b, c, s, 0, n, stream);
  hwy::FlushStream();
}

float SumForTest(const float* x, int64_t n) { return HWY_DYNAMIC_DISPATCH(Sum)(x, 0, n); }

double MachineLimits::triad_bytes_per_s() const { return std::max(triad_stream_bytes_per_s, triad_plain_bytes_per_s); }

double MachineLimits::read_bandwidth() const {
  return std::max({read_bytes_per_s, triad_stream_bytes_per_s * 2 / 3, triad_plain_bytes_per_s});
}

double MachineLimits::matrix_peak() const {
  return std::max({fma_flops, bf16_dot_flops, int8_dot_ops, amx_bf16_flops, amx_int8_ops});
}

std::string MachineLimits::matrix_unit() const {
  const double p = matrix_peak();  // a copy of one field, so equal to it exactly
  if (p <= 0) return "none";
  if (p == amx_int8_ops) return "AMX TDPBSSD";
  if (p == amx_bf16_flops) return "AMX TDPBF16PS";
  if (p == int8_dot_ops) return "int8 dot (" + int8_unit + ")";
  if (p == bf16_dot_flops) return "VDPBF16PS";
  return std::string("fp32 FMA (") + PeakKernelTarget() + ")";
}

std::string MachineLimits::Describe() const {
  char buf[768];
  auto g = [](double v) { return v / 1e9; };
  std::snprintf(buf, sizeof buf,
                "bandwidth: read %.1f GB/s, triad %.1f GB/s with streaming stores (2/3 of it read), %.1f GB/s with "
                "plain ones (all read) -> reading %.1f GB/s\n"
                "peaks: fp32 FMA %.1f GFLOP/s (%s), VDPBF16PS %s, int8 dot %.1f GOP/s (%s), AMX %s\n"
                "fastest matrix unit: %s, %.1f G/s",
                g(read_bytes_per_s), g(triad_stream_bytes_per_s), g(triad_plain_bytes_per_s), g(read_bandwidth()), g(fma_flops), PeakKernelTarget(),
                bf16_dot_flops > 0 ? (std::to_string(static_cast<int>(g(bf16_dot_flops))) + " GFLOP/s").c_str()
                                   : "not on this CPU",
                g(int8_dot_ops), int8_unit.c_str(),
                amx_bf16_flops > 0 || amx_int8_ops > 0 ? ("TDPBF16PS " + std::to_string(static_cast<int>(g(amx_bf16_flops))) + " GFLOP/s, TDPBSSD " +
                                  std::to_string(static_cast<int>(g(amx_int8_ops))) + " GOP/s")
                                     .c_str()
                               : "not on this CPU (or not granted by the OS)",
                matrix_unit().c_str(), g(matrix_peak()));
  return buf;
}

MachineLimits MeasureMachineLimits(ThreadPool* pool, int64_t bandwidth_bytes, int runs) {
  MachineLimits m;
  const TriadBandwidth triad = MeasureTriadBandwidth(pool, bandwidth_bytes / 12, runs);
  m.triad_stream_bytes_per_s = triad.streaming;
  m.triad_plain_bytes_per_s = triad.plain;
  m.read_bytes_per_s = MeasureReadBandwidth(pool, bandwidth_bytes / 4, runs);
  m.fma_flops = MeasurePeakFmaFlops(pool, runs);
  m.bf16_dot_flops = MeasurePeakBf16DotFlops(pool, runs);
  m.int8_dot_ops = MeasurePeakInt8DotOps(pool, runs, &m.int8_unit);
  m.amx_bf16_flops = MeasurePeakAmxBf16Flops(pool, runs);
  m.amx_int8_ops = MeasurePeakAmxInt8Ops(pool, runs);
  return m;
}

}  // namespace ds41
#endif
