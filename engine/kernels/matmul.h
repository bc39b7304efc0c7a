// The engine's matmul entry point over every weight format, SIMD-dispatched and threaded.
//
// y[r, n] = sum over 32-blocks b of ((sum_{k in b} x[r,k] w[n,k], fp32 in k order) * xs[r,b]) * ws[n,b],
// blocks added in order (docs/numerics.md). `values` are activation code values (Lin8: E4M3 code
// values with `scales` the per-32 powers of two) or bf16-valued activations (`scales` null).
// Results are independent of the SIMD target and of the thread count.
#pragma once

#include <cstdint>
#include <string>

namespace ds41 {

class ThreadPool;

struct MatmulActs {
  const float* values = nullptr;  // [rows, k]
  const float* scales = nullptr;  // [rows, k/32] or null
  int64_t rows = 0;
  // Optional: `values` as bf16 pairs for the VDPBF16PS kernel (engine/kernels/matmul_bf16_dot.h's layout).
  const uint32_t* bf16_pairs = nullptr;
  // The values are exactly bf16 and no product with the weights' values, nor any partial sum, is
  // subnormal (always so for QDQ8 codes; bf16dot::ActsSafe proves it for others): the VDPBF16PS
  // kernels, which flush subnormals, then give the canonical bits. Required with `bf16_pairs`.
  bool dot_exact = false;
  // Optional: `values` are FP4-grid integers (engine/kernels/matmul_grid.h), packed here as its int16
  // pairs for the integer kernel (FP4 tile-major weights with tile-major scales, CPUs that have it).
  const uint32_t* grid_pairs = nullptr;
  // Optional: the same values packed for the AMX kernel (grid::PackAmxActs; the rows padded to a
  // multiple of 16), read instead of `grid_pairs` where both are set.
  const uint16_t* grid_amx = nullptr;
};

struct MatmulWeights {
  enum Format { kFp8, kFp4, kBf16 } format = kFp8;
  const uint8_t* data = nullptr;    // row-major codes: FP8 [n, k], FP4 packed [n, k/2], BF16 [n, k]
  const uint8_t* scales = nullptr;  // FP8: E8M0 [ceil(n/32), ceil(k/32)]; FP4: E8M0 [n, k/32]; BF16: none
  int64_t n = 0, k = 0;             // REQUIRES k % 32 == 0; FP8 row tiles start at multiples of 32
  // Optional tile-major copy of the codes (engine/loading/weight_packing.h); read instead of `data` when set.
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

// Where the CPU has both exact kernel families (FMA, and VDPBF16PS: engine/kernels/matmul_bf16_dot.h),
// which is faster depends on the machine, not only on its CPUID: the same cloud machine type has
// run VDPBF16PS at 1.8x and at 0.5x the FMA rate. Both give the same bits, so this times both on
// synthetic tile-major matrices on `pool` (about 0.1 s), keeps the faster for decode (1-7 rows) and
// for blocks (8+ rows), and says what it chose. The first call decides; later ones return its
// answer. DS41_BF16_DOT=1 keeps VDPBF16PS without timing; =0 leaves only FMA.
std::string ChooseMatmulKernels(ThreadPool* pool);

// The decision ChooseMatmulKernels takes from its timings (seconds per round, best of its rounds):
// VDPBF16PS for a shape only where it was strictly faster, and for decode only where the CPU has the
// VDPBF16PS decode kernels.
struct MatmulKernelTimes {
  double fma_blocks = 0, dot_blocks = 0, fma_decode = 0, dot_decode = 0;
};
struct MatmulKernelChoice {
  bool blocks_dot = false, decode_dot = false;
};
MatmulKernelChoice DecideMatmulKernels(const MatmulKernelTimes& t, bool decode_supported);

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
