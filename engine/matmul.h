// The engine's matmul entry point over every weight format, SIMD-dispatched and threaded.
//
// y[r, n] = sum over 32-blocks b of ((sum_{k in b} x[r,k] w[n,k], fp32 in k order) * xs[r,b]) * ws[n,b],
// blocks added in order (docs/numerics.md). `values` are activation code values (Lin8: E4M3 code
// values with `scales` the per-32 powers of two) or bf16-valued activations (`scales` null).
// Results are independent of the SIMD target and of the thread count.
#pragma once

#include <cstdint>

namespace ds41 {

class ThreadPool;

struct MatmulActs {
  const float* values = nullptr;  // [rows, k]
  const float* scales = nullptr;  // [rows, k/32] or null
  int64_t rows = 0;
  // Optional: `values` as bf16 pairs for the VDPBF16PS kernel (engine/matmul_bf16_dot.h's layout).
  const uint32_t* bf16_pairs = nullptr;
};

struct MatmulWeights {
  enum Format { kFp8, kFp4, kBf16 } format = kFp8;
  const uint8_t* data = nullptr;    // row-major codes: FP8 [n, k], FP4 packed [n, k/2], BF16 [n, k]
  const uint8_t* scales = nullptr;  // FP8: E8M0 [ceil(n/32), ceil(k/32)]; FP4: E8M0 [n, k/32]; BF16: none
  int64_t n = 0, k = 0;             // REQUIRES k % 32 == 0; FP8 row tiles start at multiples of 32
  // Optional tile-major copy of the codes (engine/weight_packing.h); read instead of `data` when set.
  const uint8_t* tiles = nullptr;
  const uint8_t* tile_scales = nullptr;  // FP4 with tiles: the scales tile-major too (optional)
};

// y [rows, n]. `pool` may be null (single thread).
void Matmul(const MatmulActs& a, const MatmulWeights& w, float* y, ThreadPool* pool);

// Independent work items of a Matmul (groups of 64 output rows) and one item; for callers that
// schedule several matmuls on one pool.
int64_t MatmulGroups(const MatmulWeights& w);
void MatmulGroup(const MatmulActs& a, const MatmulWeights& w, int64_t group, float* y);

// The SIMD target the dispatcher chose on this CPU ("AVX3", "AVX2", ...).
const char* MatmulTargetName();

// Work counters (relaxed atomics, always on; one add per matmul): multiply-adds and weight bytes
// streamed, for benchmarks that report FLOP/s and bytes/s against the machine's limits.
struct WorkCounters {
  uint64_t macs = 0;
  uint64_t weight_bytes = 0;
};
WorkCounters ReadWorkCounters();
void ResetWorkCounters();
void CountWork(uint64_t macs, uint64_t weight_bytes);

}  // namespace ds41
