#include "engine/kernels/kernels.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "engine/kernels/matmul.h"
#include "engine/kernels/matmul_bf16_dot.h"
#include "engine/kernels/matmul_grid.h"
#include "engine/kernels/numerics.h"
#include "engine/kernels/vector_ops.h"
#include "util/thread_pool.h"
#include "util/thread_scratch.h"

namespace ds41 {

namespace {
// bf16 pairs for the VDPBF16PS block kernel, chunk by chunk over `pool` (the layout is per chunk).
void PackPairs(const float* x, int64_t rows, int64_t cols, uint32_t* pairs, ThreadPool* pool) {
  constexpr int64_t kC = bf16dot::kChunkRows;
  ForRanges(pool, (rows + kC - 1) / kC, 1, [&](int64_t c0, int64_t c1) {
    const int64_t r0 = c0 * kC, r1 = std::min(rows, c1 * kC);
    bf16dot::PackActs(x + r0 * cols, r1 - r0, cols, pairs + r0 * cols / 2);
  });
}
}  // namespace

void QuantizeActs(const float* x, int64_t rows, int64_t cols, QuantActs* out, ThreadPool* pool, bool bf16_pairs) {
  out->rows = rows;
  out->cols = cols;
  out->codes.resize(static_cast<size_t>(rows * cols));
  out->scales.resize(static_cast<size_t>(rows * (cols / 32)));
  auto quantize = [x, cols, out](int64_t r0, int64_t r1) {
    QuantizeQdq8Blocks(x + r0 * cols, (r1 - r0) * (cols / 32), out->codes.data() + r0 * cols,
                       out->scales.data() + r0 * (cols / 32));
  };
  ForRanges(pool, rows, std::max<int64_t>(1, kParallelGrain / cols), quantize);
  // Packed once here rather than per weight tile group, chunk by chunk (each chunk's layout is its own).
  out->bf16_pairs.clear();
  if (bf16_pairs && rows >= bf16dot::kMinRows && bf16dot::Available()) {
    out->bf16_pairs.resize(static_cast<size_t>(rows * cols / 2));
    PackPairs(out->codes.data(), rows, cols, out->bf16_pairs.data(), pool);
  }
}

namespace {
MatmulWeights Fp8W(const Fp8Linear& w) { return {MatmulWeights::kFp8, w.codes, w.scales, w.out, w.in, w.tiles, nullptr}; }
MatmulWeights Fp4W(const Fp4Linear& w) {
  return {MatmulWeights::kFp4, w.packed, w.scales, w.out, w.in, w.tiles, w.tile_scales};
}
MatmulWeights Bf16W(const Bf16View& w) { return {MatmulWeights::kBf16, w.p, nullptr, w.rows, w.cols, w.tiles, nullptr}; }
MatmulActs Acts(const QuantActs& a) {
  return {a.codes.data(), a.scales.data(), a.rows, a.bf16_pairs.empty() ? nullptr : a.bf16_pairs.data(), true};
}
// bf16-valued activations take the VDPBF16PS kernels too when ActsSafe proves them exact against
// weights of these exponents; for 8+ rows they are packed (a copy per calling thread, reused: a
// prefill's is a few MB).
MatmulActs UnquantizedActs(const float* x, int64_t rows, int64_t K, ExponentRange w, ThreadPool* pool) {
  MatmulActs a{x, nullptr, rows};
  const bool blocks = rows >= bf16dot::kMinRows;  // else the decode kernels
  if (!(blocks ? bf16dot::Available() : bf16dot::DecodeAvailable()) || !bf16dot::ActsSafe(x, rows * K, K, w)) return a;
  a.dot_exact = true;
  if (blocks) {
    thread_local ThreadScratch<uint32_t> pairs;
    pairs.resize(static_cast<size_t>(rows * K / 2));
    PackPairs(x, rows, K, pairs.data(), pool);
    a.bf16_pairs = pairs.data();
  }
  return a;
}
}  // namespace

void MatMulFp8(const QuantActs& a, const Fp8Linear& w, float* y, ThreadPool* pool) { Matmul(Acts(a), Fp8W(w), y, pool); }
namespace {
std::atomic<Fp4Numerics> g_fp4_numerics{[] {
  const StatusOr<Fp4Numerics> n = Fp4NumericsFromEnvironment();
  return n.ok() ? *n : Fp4Numerics::kCanonical;
}()};
}  // namespace

Fp4Numerics Fp4NumericsInUse() { return g_fp4_numerics.load(std::memory_order_relaxed); }
void SetFp4Numerics(Fp4Numerics n) { g_fp4_numerics.store(n, std::memory_order_relaxed); }
std::string Fp4GridKernels() {
  if (!grid::KernelSupported()) return "FMA kernels (no AVX512-VBMI/VNNI)";
  if (grid::AmxEnabled()) return "AMX from " + std::to_string(grid::kAmxMinRows) + " rows, VPDPWSSD below";
  return grid::AmxSupported() ? "VPDPWSSD (AMX off: DS41_GRID_AMX=0)" : "VPDPWSSD";
}

namespace {
// n code values on the grid (code * 64 is exact; + 0.0f turns -0 into +0); whether all are finite.
bool GridValues(const float* codes, size_t n, float* out) {
  bool finite = true;
  for (size_t i = 0; i < n; ++i) {
    out[i] = std::nearbyint(codes[i] * grid::kScale) + 0.0f;
    finite &= std::isfinite(codes[i]);
  }
  return finite;
}
void GridScales(const std::vector<float>& scales, float* out) {
  for (size_t i = 0; i < scales.size(); ++i) out[i] = scales[i] / grid::kScale;
}
}  // namespace

bool ToFp4Grid(const QuantActs& a, QuantActs* grid) {
  grid->rows = a.rows;
  grid->cols = a.cols;
  grid->codes.resize(a.codes.size());
  grid->scales.resize(a.scales.size());
  grid->bf16_pairs.clear();
  GridScales(a.scales, grid->scales.data());
  return GridValues(a.codes.data(), a.codes.size(), grid->codes.data());
}

void MatMulFp4(const QuantActs& a, const Fp4Linear& w, float* y, ThreadPool* pool) {
  if (Fp4NumericsInUse() == Fp4Numerics::kCanonical) {
    Matmul(Acts(a), Fp4W(w), y, pool);
    return;
  }
  thread_local ThreadScratch<float> values, scales;
  thread_local ThreadScratch<uint32_t> pairs;
  thread_local ThreadScratch<uint16_t> amx;
  const int64_t K = a.cols;
  values.resize(a.codes.size());
  scales.resize(a.scales.size());
  GridScales(a.scales, scales.data());
  // The integer kernels for every row count: AMX from kAmxMinRows where the CPU has it, else VPDPWSSD,
  // which for 8+ rows re-reads a group's weights from cache per 4 rows and still ran prefill
  // 1.14-1.20x faster than the FMA kernels on the grid (AMD EPYC Zen 4).
  const bool use_amx = a.rows >= grid::kAmxMinRows && grid::AmxEnabled();
  const bool use_pairs = !use_amx && grid::KernelSupported();
  const int64_t padded = (a.rows + grid::kAmxTileRows - 1) / grid::kAmxTileRows * grid::kAmxTileRows;
  if (use_amx) amx.resize(static_cast<size_t>(padded * K));
  if (use_pairs) pairs.resize(static_cast<size_t>(a.rows * K / 2));
  // The pool's threads fill this thread's buffers (a thread_local named in the lambda would be theirs).
  float* const v = values.data();
  uint16_t* const packed_amx = use_amx ? amx.data() : nullptr;
  uint32_t* const packed_pairs = use_pairs ? pairs.data() : nullptr;
  std::atomic<bool> finite{true};
  ForRanges(pool, a.rows, std::max<int64_t>(1, kParallelGrain / K), [&](int64_t r0, int64_t r1) {
    const size_t n = static_cast<size_t>((r1 - r0) * K);
    if (!GridValues(a.codes.data() + r0 * K, n, v + r0 * K)) finite = false;
    if (packed_amx != nullptr) grid::PackAmxActs(v, a.rows, K, r0, r1, packed_amx);
    if (packed_pairs != nullptr) grid::PackActs(v + r0 * K, r1 - r0, K, packed_pairs + r0 * K / 2);
  });
  MatmulActs acts{v, scales.data(), a.rows};
  if (finite) {  // (a non-finite code: the FMA kernels' NaNs)
    acts.grid_amx = packed_amx;
    acts.grid_pairs = packed_pairs;
  }
  Matmul(acts, Fp4W(w), y, pool);
}
void MatMulBf16(const float* x, int64_t rows, const Bf16View& w, float* y, ThreadPool* pool) {
  Matmul(UnquantizedActs(x, rows, w.cols, w.exponents, pool), Bf16W(w), y, pool);
}
void MatMulFp8Unquantized(const float* x, int64_t rows, const Fp8Linear& w, float* y, ThreadPool* pool) {
  Matmul(UnquantizedActs(x, rows, w.in, kE4m3Exponents, pool), Fp8W(w), y, pool);
}

namespace {
std::atomic<uint64_t> g_macs{0}, g_weight_bytes{0};

uint64_t WeightBytes(const MatmulWeights& w) {
  switch (w.format) {
    case MatmulWeights::kFp8: return static_cast<uint64_t>(w.n * w.k + ((w.n + 31) / 32) * (w.k / 32));
    case MatmulWeights::kFp4: return static_cast<uint64_t>(w.n * w.k / 2 + w.n * (w.k / 32));
    case MatmulWeights::kBf16: return static_cast<uint64_t>(w.n * w.k * 2);
  }
  return 0;
}
}  // namespace

WorkCounters ReadWorkCounters() { return {g_macs.load(std::memory_order_relaxed), g_weight_bytes.load(std::memory_order_relaxed)}; }
void ResetWorkCounters() {
  g_macs = 0;
  g_weight_bytes = 0;
}
void CountWork(uint64_t macs, uint64_t weight_bytes) {
  g_macs.fetch_add(macs, std::memory_order_relaxed);
  g_weight_bytes.fetch_add(weight_bytes, std::memory_order_relaxed);
}

void Matmul(const MatmulActs& a, const MatmulWeights& w, float* y, ThreadPool* pool) {
  CountWork(static_cast<uint64_t>(a.rows * w.n * w.k), WeightBytes(w));
  const int64_t groups = MatmulGroups(w);
  if (pool == nullptr || groups == 1) {
    for (int64_t g = 0; g < groups; ++g) MatmulGroup(a, w, g, y);
    return;
  }
  pool->ParallelFor(groups, [&](int64_t g) { MatmulGroup(a, w, g, y); });
}

namespace reference {

void MatMulFp8(const QuantActs& a, const Fp8Linear& w, float* y) {
  const auto& lut = kE4m3Values;
  const int64_t K = w.in, nb = K / 32;
  for (int64_t r = 0; r < a.rows; ++r) {
    const float* ac = a.codes.data() + r * K;
    const float* as = a.scales.data() + r * nb;
    for (int64_t n = 0; n < w.out; ++n) {
      const uint8_t* wc = w.codes + n * K;
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        float part = ac[b * 32] * lut[wc[b * 32]];
        for (int64_t k = b * 32 + 1; k < b * 32 + 32; ++k) part += ac[k] * lut[wc[k]];
        const float scaled = part * as[b] * E8m0ToF32(w.scale(n, b));
        acc = b == 0 ? scaled : acc + scaled;
      }
      y[r * w.out + n] = acc;
    }
  }
}

void MatMulFp4(const QuantActs& a, const Fp4Linear& w, float* y) {
  const auto& lut4 = kE2m1Values;
  const int64_t K = w.in, nb = K / 32;
  for (int64_t r = 0; r < a.rows; ++r) {
    const float* ac = a.codes.data() + r * K;
    const float* as = a.scales.data() + r * nb;
    for (int64_t n = 0; n < w.out; ++n) {
      const uint8_t* wp = w.packed + n * (K / 2);
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        float part = ac[b * 32] * lut4[wp[b * 16] & 0xF];
        part += ac[b * 32 + 1] * lut4[wp[b * 16] >> 4];
        for (int64_t k = b * 32 + 2; k < b * 32 + 32; k += 2) {
          const uint8_t byte = wp[k / 2];
          part += ac[k] * lut4[byte & 0xF];
          part += ac[k + 1] * lut4[byte >> 4];
        }
        const float scaled = part * as[b] * E8m0ToF32(w.scale(n, b));
        acc = b == 0 ? scaled : acc + scaled;
      }
      y[r * w.out + n] = acc;
    }
  }
}

void MatMulBf16(const float* x, int64_t rows, const Bf16View& w, float* y) {
  const int64_t K = w.cols;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * K;
    for (int64_t n = 0; n < w.rows; ++n) {
      const uint8_t* wr = w.p + 2 * n * K;
      float acc = 0.0f;
      for (int64_t b = 0; b < K; b += 32) {
        float part = xr[b] * Bf16ToF32(LoadU16(wr + 2 * b));
        for (int64_t k = b + 1; k < b + 32; ++k) part += xr[k] * Bf16ToF32(LoadU16(wr + 2 * k));
        acc = b == 0 ? part : acc + part;
      }
      y[r * w.rows + n] = acc;
    }
  }
}

void MatMulFp8Unquantized(const float* x, int64_t rows, const Fp8Linear& w, float* y) {
  const auto& lut = kE4m3Values;
  const int64_t K = w.in;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * K;
    for (int64_t n = 0; n < w.out; ++n) {
      const uint8_t* wc = w.codes + n * K;
      float acc = 0.0f;
      for (int64_t b = 0; b < K / 32; ++b) {
        float part = xr[b * 32] * lut[wc[b * 32]];
        for (int64_t k = b * 32 + 1; k < b * 32 + 32; ++k) part += xr[k] * lut[wc[k]];
        const float scaled = part * E8m0ToF32(w.scale(n, b));
        acc = b == 0 ? scaled : acc + scaled;
      }
      y[r * w.out + n] = acc;
    }
  }
}

}  // namespace reference

void MatMulF32Fp64(const float* x, int64_t rows, const F32View& w, float* y, ThreadPool* pool) {
  const int64_t K = w.cols;
  CountWork(static_cast<uint64_t>(rows * w.rows * K), static_cast<uint64_t>(w.rows * K * 4));
  auto one = [&](int64_t i) {
    const int64_t r = i / w.rows, n = i % w.rows;
    y[r * w.rows + n] = static_cast<float>(DotF32Weights(x + r * K, w.p + 4 * n * K, K));
  };
  if (pool == nullptr) {
    for (int64_t i = 0; i < rows * w.rows; ++i) one(i);
  } else {
    pool->ParallelFor(rows * w.rows, one);
  }
}

float DotBf16(const float* a, const float* b, int64_t n) {
  float acc = 0.0f;
  for (int64_t blk = 0; blk < n; blk += 32) {
    float part = a[blk] * b[blk];
    for (int64_t k = blk + 1; k < blk + 32; ++k) part += a[k] * b[k];
    acc = blk == 0 ? part : acc + part;
  }
  return acc;
}

float MeanSquare(const float* x, int64_t n) { return static_cast<float>(SumOfSquares(x, n) / static_cast<double>(n)); }

void RmsNormRow(const float* x, const Bf16View& w, int64_t n, float eps, float* y) {
  const float r = RsqrtF(MeanSquare(x, n) + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = RoundBf16(w.at(i) * (x[i] * r));
}

void RoundToBf16(float* x, int64_t n, ThreadPool* pool) {
  ForRanges(pool, n, kParallelGrain, [x](int64_t i0, int64_t i1) { RoundBf16InPlace(x + i0, i1 - i0); });
}

void Lin8(const float* x, int64_t rows, const Fp8Linear& w, float* y, QuantActs* scratch, ThreadPool* pool) {
  QuantizeActs(x, rows, w.in, scratch, pool);
  MatMulFp8(*scratch, w, y, pool);
  RoundToBf16(y, rows * w.out, pool);
}

void Lin8(const float* x, int64_t rows, const Fp4Linear& w, float* y, QuantActs* scratch, ThreadPool* pool) {
  // (The grid numerics never read the VDPBF16PS kernel's packing.)
  QuantizeActs(x, rows, w.in, scratch, pool, Fp4NumericsInUse() == Fp4Numerics::kCanonical);
  MatMulFp4(*scratch, w, y, pool);
  RoundToBf16(y, rows * w.out, pool);
}

}  // namespace ds41
