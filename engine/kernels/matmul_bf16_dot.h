// The block kernels on VDPBF16PS (AVX512-BF16): two multiply-adds per fp32 lane per instruction,
// twice the FMA path's rate, with the canonical arithmetic of docs/numerics.md unchanged.
//
// Why it is exact: Lin8 operands are E4M3 code values (activations) and E4M3 or E2M1 code values
// (weights), all exactly bf16; their products are exact in fp32 and never subnormal (>= 2^-18), so
// the instruction's two fused steps per lane (the odd element's product added first, then the even
// one's, each rounded to nearest even; denormals flushed, which never arise here) are two canonical
// chain steps. Pairs are packed with k in the odd (high) half and k + 1 in the even half, and each
// chain starts from -0 (so that x + -0 == x for every x, including -0), which makes the result the
// canonical chain's bits: the matmul tests compare it with the scalar reference on every shape.
// Unquantized bf16 activations (against FP8 codes or bf16 weights, whose products of 8 + 8
// significant bits are exact too) take these kernels only when ActsSafe proves that nothing is
// subnormal.
//
// Internal to the matmul (engine/matmul_simd.cc), which calls it for 8+ activation rows when the
// CPU has the instruction, and for decode (1-7 rows) when it also has AVX512-VBMI. Other CPUs (and
// other architectures) never reach these functions.
#pragma once

#include <cstdint>

#include "engine/kernels/numerics.h"

namespace ds41::bf16dot {

// The environment's DS41_BF16_DOT at start: 0 the FMA kernels only, 1 these kernels without
// timing, else (or unset) ChooseMatmulKernels times both.
enum class Setting { kTimed, kOff, kOn };
Setting FromEnvironment();

// True when the CPU has AVX512-BF16 and DS41_BF16_DOT is not 0.
bool Supported();
// Whether the matmul uses the block kernel (8+ rows), where supported: on unless SetEnabled (tests,
// or ChooseMatmulKernels in engine/kernels/matmul.h, which times both kernel families) turned it off.
bool Available();
// Either kernel may be switched at any time, even while matmuls run: both give the same bits.
void SetEnabled(bool blocks, bool decode);
inline void SetEnabled(bool on) { SetEnabled(on, on); }

// The matmul hands its blocks to the kernel from this many activation rows (fewer take the decode
// kernel), so activations are packed only for such matmuls.
inline constexpr int64_t kMinRows = 8;

// Activation rows are packed once per matmul (QuantizeActs), as bf16 pairs in the order the kernel
// reads them: chunks of kChunkRows rows (the last may be shorter), inside a chunk 32-block by 32-block,
// inside a block row by row, 16 pairs each. Chunk c's block b starts at c * kChunkRows * K / 2 +
// b * (rows in chunk c) * 16 words; pair p of a row = (bf16(x[2p]) << 16) | bf16(x[2p + 1]).
inline constexpr int64_t kChunkRows = 64;
// `values` [rows, K], exactly bf16 (E4M3 code values); `pairs` [rows * K / 2].
void PackActs(const float* values, int64_t rows, int64_t K, uint32_t* pairs);

// For activations that are not quantized (bf16 values against FP8 codes or bf16 weights): true when
// every one of the n values is exactly bf16 and, against weights whose nonzero values have the
// exponents `w`, every product and every fp32 partial sum of K of them is zero or normal and finite
// (the instruction flushes subnormals). Why that suffices: the products are multiples of
// 2^(lo_x - 7 + lo_w - 7), and so is every rounded partial sum, so no nonzero one is below it.
bool ActsSafe(const float* values, int64_t n, int64_t K, ExponentRange w);

// X: one chunk's block (`rows` rows of 16 pairs); P: G weight tiles as pairs, P[g][pair][row] =
// (bf16(w[row][2 pair]) << 16) | bf16(w[row][2 pair + 1]). For rows i < rows and columns c < 16 * G:
// part = the block's canonical chain, then part * as[i] * sw[c] (left to right), stored to
// acc[i * ld + c] (first block) or added to it.
void BlockRows(const uint32_t* X, const float* as, int64_t rows, const uint32_t* P, const float* sw, int G, bool first,
               float* acc, int64_t ld);

// The decode kernels (1-4 activation rows) on VDPBF16PS: they also need AVX512-VBMI, whose byte
// permutes turn codes into bf16 pairs in one or two shuffles (the FMA path spends three to five and
// a second multiply-add per pair). DecodeAvailable: supported and enabled (as Available).
bool DecodeSupported();
bool DecodeAvailable();
// Up to kDecodeRows activation rows against one group of four tiles (64 output rows) in the
// tile-major layout of engine/loading/weight_tiles.h. x: row i's values at x + i * K (E4M3 code values, or
// bf16 values that ActsSafe accepted); xs: row i's block scales at xs + i * K / 32, or null for
// unscaled activations; codes: the group's first tile (tile g's block b at (g * K / 32 + b) * tile
// bytes). y[i * 64 + c]: the canonical result (the FMA decode kernel's bits).
inline constexpr int kDecodeRows = 4;
using DecodeGroupFn = void (*)(int rows, const float* x, const float* xs, int64_t K, const uint8_t* codes,
                               const uint8_t* scales, float* y);
// scales: tile-major E8M0 of the group's first tile (tile g's block b at (g * K / 32 + b) * 16).
void DecodeFp4Group(int rows, const float* x, const float* xs, int64_t K, const uint8_t* codes, const uint8_t* scales,
                    float* y);
// scales: the E8M0 scale tiles of the group's 64 rows, [2, K / 32].
void DecodeFp8Group(int rows, const float* x, const float* xs, int64_t K, const uint8_t* codes, const uint8_t* scales,
                    float* y);
// bf16 weights (no scales; `scales` is ignored).
void DecodeBf16Group(int rows, const float* x, const float* xs, int64_t K, const uint8_t* codes, const uint8_t* scales,
                     float* y);

}  // namespace ds41::bf16dot
