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

}  // namespace ds41::grid
