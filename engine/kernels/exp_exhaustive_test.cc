// ExpFMany against ExpF for every float input whose result is not settled by a range check (the
// unit test covers those and the special values), on every SIMD target: the proof behind the
// vector softmax's claim to ExpF's bits, rerun wherever the libm or Highway changes. Label: long.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "engine/kernels/numerics.h"
#include "engine/kernels/vector_ops.h"
#include "util/thread_pool.h"

namespace ds41 {
namespace {

// Bit patterns [begin, end) in chunks across the pool; returns how many differ.
uint64_t Mismatches(ThreadPool* pool, uint64_t begin, uint64_t end, float* first_x) {
  constexpr uint64_t kChunk = 1 << 16;
  std::atomic<uint64_t> bad{0};
  std::atomic<uint32_t> first{0};
  pool->ParallelFor(static_cast<int64_t>((end - begin + kChunk - 1) / kChunk), [&](int64_t c) {
    const uint64_t lo = begin + static_cast<uint64_t>(c) * kChunk, n = std::min(kChunk, end - lo);
    std::vector<float> x(n), y(n);
    for (uint64_t i = 0; i < n; ++i) {
      const uint32_t u = static_cast<uint32_t>(lo + i);
      std::memcpy(&x[i], &u, 4);
    }
    ExpFMany(x.data(), static_cast<int64_t>(n), y.data());
    for (uint64_t i = 0; i < n; ++i) {
      const float r = ExpF(x[i]);
      if (std::memcmp(&r, &y[i], 4) != 0 && bad.fetch_add(1) == 0) first = static_cast<uint32_t>(lo + i);
    }
  });
  const uint32_t f = first.load();
  std::memcpy(first_x, &f, 4);
  return bad.load();
}

TEST(ExpExhaustiveTest, EveryFloatInputBetweenMinus104And89GivesExpFsBitsOnEveryTarget) {
  ThreadPool pool(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  // [0, 89] and [-104, -0] as bit patterns.
  uint32_t pos_end, neg_end;
  const float p = 89.0f, n = -104.0f;
  std::memcpy(&pos_end, &p, 4);
  std::memcpy(&neg_end, &n, 4);
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    float x = 0;
    EXPECT_EQ(0u, Mismatches(&pool, 0, uint64_t{pos_end} + 1, &x)) << hwy::TargetName(target) << ", first at " << x;
    EXPECT_EQ(0u, Mismatches(&pool, 0x80000000u, uint64_t{neg_end} + 1, &x)) << hwy::TargetName(target) << ", first at " << x;
  }
  hwy::SetSupportedTargetsForTest(0);
}

}  // namespace
}  // namespace ds41
