// FP4 "grid" numerics: Lin8's activation code values rounded to multiples of 1/64 (the QDQ8
// scale divided by 64 to match), so that against FP4 weights every product is a multiple of 1/128
// and every 32-block sum is exact in fp32 (below 2^24 of those units). The block sums therefore
// do not depend on summation order: the FMA kernels, any SIMD target, any batch and the scalar
// reference give the same bits, and so does the integer kernel below, which sums the blocks with
// VPDPWSSD (int16 pairs) at about twice the bytes per cycle of the FMA decode path. The price
// against the canonical numerics is the rounding of codes below 1/8 to the grid (at most 2^-7
// absolute, against codes up to 448), measured in docs/numerics.md.
//
// Selected per process (engine/kernels/kernels.h Fp4Numerics); internal to the matmul otherwise.
#pragma once

#include <cstdint>

namespace ds41::grid {

// Code values are multiplied by this and rounded to integers (|v| <= 448 * 64 = 28672 < 2^15).
inline constexpr float kScale = 64.0f;

// True when the CPU has AVX512-F/BW, VBMI and VNNI (the integer kernel's instructions).
bool KernelSupported();

// Grid values (integers as floats, |v| < 2^15) [rows, K] as the kernel's int16 pairs [rows, K / 2]:
// for each 32-block b, 8-chunk c and q < 4, pair 16 b + 4 c + q of a row = (v[32 b + 8 c + q],
// v[32 b + 8 c + 4 + q]), the first in the low half.
void PackActs(const float* values, int64_t rows, int64_t K, uint32_t* pairs);

// Up to kRows activation rows against one group of four tile-major FP4 tiles with tile-major scales
// (engine/loading/weight_tiles.h, as bf16dot::DecodeFp4Group takes them); the matmul calls it for
// every 4 rows of any count. Row i: pairs at pairs + i * K / 2, grid values at values + i * K, scales
// at xs + i * K / 32. y[i * 64 + c]: the canonical order's bits on these values, signed zeros included.
inline constexpr int kRows = 4;
void DecodeFp4Group(int rows, const uint32_t* pairs, const float* values, const float* xs, int64_t K,
                    const uint8_t* codes, const uint8_t* scales, float* y);

// The AMX kernel (matmul_grid_amx.cc): the same block sums on the tile unit, for 16+ rows, with
// TDPBF16PS: grid values and E2M1 weights are exact bf16 and no partial sum needs rounding, so the
// unit's unspecified accumulation order cannot change them.

// True when the CPU has the integer kernel's instructions and AMX-BF16 and Linux granted the tile
// state (util/amx.h).
bool AmxSupported();
// Whether MatMulFp4 runs it: where supported, unless DS41_GRID_AMX is 0, false or off (read at the
// first call). The bits are the same either way; benchmarks and tests switch it to compare.
bool AmxEnabled();
void SetAmxEnabled(bool on);
// Row counts from which MatMulFp4 packs activations for the AMX kernel: one full tile. Below, the
// integer kernel above is faster (at 8 rows 1.08x, at 16 AMX is 1.5x: bench/matmul_bench, Intel Xeon).
inline constexpr int64_t kAmxMinRows = 16;
// The packed rows come in tiles of 16; the caller pads their count to a multiple with zero rows.
inline constexpr int64_t kAmxTileRows = 16;

// The AMX kernel's activations: grid values (REQUIRES: ToFp4Grid's, so exact bf16) as bf16, tile-major: 16 rows of one 32-block
// (1 KiB) at out + ((r / 16) * K / 32 + b) * 512. Packs rows [r0, r1) of values [rows, K]; the last
// tile's rows past `rows` are zeroed by whoever packs the last row (out holds whole tiles).
void PackAmxActs(const float* values, int64_t rows, int64_t K, int64_t r0, int64_t r1, uint16_t* out);

// `rows` activation rows (PackAmxActs's) against one group of four tile-major FP4 tiles, as
// DecodeFp4Group; y[i * 64 + c] for i < rows, the canonical order's bits, signed zeros included.
void AmxFp4Group(int64_t rows, const uint16_t* acts, const float* values, const float* xs, int64_t K,
                 const uint8_t* codes, const uint8_t* scales, float* y);

// One FP4 tile (256 bytes) as the kernel's B tile (TDPBF16PS's second operand: 16 rows of 16 bf16
// pairs, row j holding each weight row's codes 2j, 2j + 1), for tests of the layouts on any CPU with
// KernelSupported() (the tile unit itself needs AMX).
void DecodeAmxBTile(const uint8_t* tile, uint16_t* out);

// The canonical chain of a block whose exact sum is zero (x: its 32 grid values; tile: the weights'
// FP4 tile; lane: the weight row in it): +0, or -0 when every product is -0. Integer sums have no
// sign, so the kernels recompute such lanes, which real activations rarely give.
float ZeroBlockSign(const float* x, const uint8_t* tile, int lane);

}  // namespace ds41::grid
