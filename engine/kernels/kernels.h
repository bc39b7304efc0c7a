// Linear algebra with the engine's canonical summation order (docs/numerics.md): every dot
// product is split into blocks of 32 along K; inside a block the exact products are summed in
// order in fp32, each block's sum is scaled, and the blocks are added in K order in fp32. Because
// every product is exact in fp32, this order is what any SIMD width reproduces, so scalar and
// vector paths, any thread count and the Python oracle all agree bit for bit.
//
// Activations are "bf16-valued floats": float buffers holding values exactly representable in bf16.
// All functions are thread-compatible (no shared state).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/config/fp4_numerics.h"
#include "engine/loading/weights.h"

namespace ds41 {

class ThreadPool;

// QDQ8 activations for Lin8: the E4M3 codes' values and one power-of-two scale per 32 along K.
struct QuantActs {
  int64_t rows = 0, cols = 0;
  std::vector<float> codes;    // [rows, cols] E4M3 code values (the quantized value / its scale)
  std::vector<float> scales;   // [rows, cols / 32]
  std::vector<uint32_t> bf16_pairs;  // codes packed for the VDPBF16PS kernel, where the CPU has it; or empty
};

// Elements below which an element-wise pass is not worth spreading over a pool.
inline constexpr int64_t kParallelGrain = 1 << 16;

// REQUIRES: cols % 32 == 0. Spread over `pool` by rows when given; the result does not depend on it.
// `bf16_pairs`: also pack them where the VDPBF16PS kernel may use them.
void QuantizeActs(const float* x, int64_t rows, int64_t cols, QuantActs* out, ThreadPool* pool = nullptr,
                  bool bf16_pairs = true);

// How Lin8 multiplies activations with FP4 weights (engine/config/fp4_numerics.h): the grid makes
// every block sum exact and lets the integer kernel run, at other bits than canonical
// (docs/numerics.md). Process-wide; the start value is the environment's (canonical where it is not
// valid: Model::Open refuses that). Both are independent of SIMD target, thread count and batch.
Fp4Numerics Fp4NumericsInUse();
void SetFp4Numerics(Fp4Numerics n);
// The kernels the FP4 grid runs on with this CPU, for the logs: AMX from 16 rows and the AVX512-VBMI/VNNI
// integer kernel below, the integer kernel alone, or the FMA kernels.
std::string Fp4GridKernels();

// `a` on the FP4 grid: codes * 64 rounded to nearest even (zeros +0), scales / 64. Returns whether
// every value is finite.
bool ToFp4Grid(const QuantActs& a, QuantActs* grid);

// The matmuls below are SIMD-dispatched (engine/kernels/matmul.h) and spread over `pool` (null: the calling
// thread only); results are identical for any target and any thread count.

// Lin8 with FP8 weights: y[r, n] = sum_b ((sum_{k in b} a_rk w_nk) * sa_rb) * sw_nb   (fp32, unrounded).
void MatMulFp8(const QuantActs& a, const Fp8Linear& w, float* y, ThreadPool* pool);
// Lin8 with MXFP4 weights (same form, one weight scale per row and 32-block), in the Fp4Numerics in use.
void MatMulFp4(const QuantActs& a, const Fp4Linear& w, float* y, ThreadPool* pool);
// bf16 weights against bf16-valued activations (LinBF, and Lin32 whose inputs are bf16 values).
void MatMulBf16(const float* x, int64_t rows, const Bf16View& w, float* y, ThreadPool* pool);
// FP8 weights against bf16-valued activations without activation quantization (wo_a, MODEL.md §6.9).
void MatMulFp8Unquantized(const float* x, int64_t rows, const Fp8Linear& w, float* y, ThreadPool* pool);
// fp32 weights (hc_*_fn): products are not exact in fp32, so accumulate in fp64 and round once.
void MatMulF32Fp64(const float* x, int64_t rows, const F32View& w, float* y, ThreadPool* pool);

// Scalar references of the same arithmetic, for tests of the SIMD paths (canonical numerics; the
// grid's are MatMulFp4 on ToFp4Grid's activations).
namespace reference {
void MatMulFp8(const QuantActs& a, const Fp8Linear& w, float* y);
void MatMulFp4(const QuantActs& a, const Fp4Linear& w, float* y);
void MatMulBf16(const float* x, int64_t rows, const Bf16View& w, float* y);
void MatMulFp8Unquantized(const float* x, int64_t rows, const Fp8Linear& w, float* y);
}  // namespace reference

// Canonical block dot of two bf16-valued vectors (attention scores, indexer scores).
float DotBf16(const float* a, const float* b, int64_t n);

// Sum of squares of bf16-valued x divided by n, in fp64, rounded once to fp32.
float MeanSquare(const float* x, int64_t n);

// RMSNorm_w(x) = bf16(w * (x * rsqrt(mean(x^2) + eps))) over one row (MODEL.md §3).
void RmsNormRow(const float* x, const Bf16View& w, int64_t n, float eps, float* y);

// Rounds every element to the nearest bf16 value in place.
void RoundToBf16(float* x, int64_t n, ThreadPool* pool = nullptr);

// Lin8 convenience: quantize `x` [rows, w.in], multiply, round to bf16 -> y [rows, w.out].
void Lin8(const float* x, int64_t rows, const Fp8Linear& w, float* y, QuantActs* scratch, ThreadPool* pool);
void Lin8(const float* x, int64_t rows, const Fp4Linear& w, float* y, QuantActs* scratch, ThreadPool* pool);

}  // namespace ds41
