// E8M0 scales as floats in an AVX-512 register, for the kernels compiled for AVX-512 targets
// (matmul_bf16_dot.cc, matmul_grid.cc).
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>

namespace ds41 {

// 2^(e - 127) as E8m0ToF32 (2^-127 for 0, NaN for 255) of 16 E8M0 scales, one per 32-bit lane.
__attribute__((target("avx512f"))) inline __m512 E8m0Avx512(__m512i e) {
  __m512i bits = _mm512_maskz_slli_epi32(0xFFFF, e, 23);
  bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(e, _mm512_setzero_si512()), _mm512_set1_epi32(0x00400000));
  bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(e, _mm512_set1_epi32(255)), _mm512_set1_epi32(0x7FC00000));
  return _mm512_castsi512_ps(bits);
}

}  // namespace ds41

#endif
