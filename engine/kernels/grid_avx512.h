// The FP4 grid kernels' shared AVX-512 steps (matmul_grid.cc's integer kernel and
// matmul_grid_amx.cc's): a block's weight scales, and a block's term of 16 outputs from its exact sums.
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>

#include "engine/kernels/e8m0_avx512.h"
#include "engine/kernels/matmul_grid.h"

namespace ds41::grid {

// The 16 weight rows' E8M0 scales of one tile (tile-major scales: 16 bytes) as floats.
__attribute__((target("avx512f"))) inline __m512 TileScales(const uint8_t* scales) {
  return E8m0Avx512(_mm512_maskz_cvtepu8_epi32(0xFFFF, _mm_loadu_si128(reinterpret_cast<const __m128i*>(scales))));
}

// One block's term for one activation row: its exact sums `part` against the tile's 16 weight rows,
// the lanes in `zero` (sums of zero, whose sign no integer or tile unit keeps) recomputed from the
// block's 32 grid values `x` and the weights' FP4 `tile`, then times the activation's scale and the
// weights' scales, left to right as the canonical chain does. The caller adds it in block order.
__attribute__((target("avx512f"))) inline __m512 BlockTerm(__m512 part, __mmask16 zero, const float* x,
                                                           const uint8_t* tile, float scale, __m512 weight_scales) {
  if (zero != 0) [[unlikely]] {
    alignas(64) float p[16];
    _mm512_store_ps(p, part);
    for (int lane = 0; lane < 16; ++lane)
      if ((zero >> lane) & 1) p[lane] = ZeroBlockSign(x, tile, lane);
    part = _mm512_load_ps(p);
  }
  return _mm512_mul_ps(_mm512_mul_ps(part, _mm512_set1_ps(scale)), weight_scales);
}

}  // namespace ds41::grid

#endif
