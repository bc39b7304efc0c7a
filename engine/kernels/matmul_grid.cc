#include "engine/kernels/matmul_grid.h"

#include <cmath>

#include "engine/loading/weight_tiles.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "engine/kernels/grid_avx512.h"
#endif

namespace ds41::grid {

bool KernelSupported() {
#if defined(__x86_64__)
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512vnni");
  }();
  return has;
#else
  return false;
#endif
}

void PackActs(const float* values, int64_t rows, int64_t K, uint32_t* pairs) {
  for (int64_t i = 0; i < rows * K; i += 8) {
    const float* v = values + i;
    uint32_t* p = pairs + i / 2;
    for (int q = 0; q < 4; ++q) {
      const auto lo = static_cast<uint16_t>(static_cast<int16_t>(v[q]));
      const auto hi = static_cast<uint16_t>(static_cast<int16_t>(v[4 + q]));
      p[q] = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
    }
  }
}

float ZeroBlockSign(const float* x, const uint8_t* tile, int lane) {
  // Once a product is nonzero, the chain's exact partial sums can only come back to zero as
  // y + (-y) = +0, and +0 + -0 = +0: the result is -0 only when every product is -0, a zero whose
  // factors' signs differ (grid values are never -0).
  for (int k = 0; k < 32; ++k) {
    const uint8_t byte = tile[(k / 2) * kTileRows + lane];
    const int code = k % 2 == 0 ? byte & 0xF : byte >> 4;
    const bool w_zero = (code & 7) == 0, w_negative = (code & 8) != 0;
    if ((x[k] != 0.0f && !w_zero) || std::signbit(x[k]) == w_negative) return 0.0f;
  }
  return -0.0f;
}

#if defined(__x86_64__)
namespace {

// (The maskz_ forms, with every lane selected, avoid GCC 12's false maybe-uninitialized warning on
// the plain intrinsics' undefined source operand.)
#define DS41_GRID_TARGET __attribute__((target("avx512f,avx512bw,avx512vbmi,avx512vnni")))

constexpr int kTileBytes = static_cast<int>(kFp4TileBytes);  // byte 16 j + r: codes 2j (low nibble), 2j + 1 of row r

// Twice each E2M1 value (an integer), indexed by the low five bits of a word: the fifth bit is the
// next code's, so the table repeats.
alignas(64) constexpr int16_t kE2m1Twice[32] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12,
                                                0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// A 64-byte quarter of a tile (bytes j = 0..3 of 16 rows: codes 8c..8c+7) regrouped by row: word 2r
// = bytes (j0, j1) of row r = codes 0, 1, 2, 3 (4 bits each, low first), word 2r + 1 = codes 4..7.
constexpr auto MakeGather() {
  struct {
    alignas(64) uint8_t idx[64];
  } g{};
  for (int r = 0; r < 16; ++r)
    for (int m = 0; m < 4; ++m) g.idx[4 * r + m] = static_cast<uint8_t>(16 * m + r);
  return g;
}
alignas(64) constexpr auto kGather = MakeGather();

// R rows against the group: per 32-block and tile, the integer block sum in two accumulators (odd
// and even q, for latency), then to float, halved (the table holds twice the values), scaled by the
// activation's then the weights' scale, and added in block order, as the canonical chain does.
template <int R>
DS41_GRID_TARGET void Group(const uint32_t* pairs, const float* values, const float* xs, int64_t K, const uint8_t* codes,
                            const uint8_t* scales, float* y) {
  constexpr int kG = 4;
  const int64_t nb = K / 32;
  const __m512i gather = _mm512_load_si512(kGather.idx), table = _mm512_load_si512(kE2m1Twice);
  __m512 sum[R][kG] = {};
  for (int64_t b = 0; b < nb; ++b) {
    if (b + 2 < nb)
      for (int g = 0; g < kG; ++g)
        for (int o = 0; o < kTileBytes; o += 64)
          _mm_prefetch(reinterpret_cast<const char*>(codes + (g * nb + b + 2) * kTileBytes + o), _MM_HINT_T0);
    __m512i acc[R][kG][2];
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
      for (int g = 0; g < kG; ++g) acc[i][g][0] = acc[i][g][1] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      __m512i x[R][4];
#pragma GCC unroll 4
      for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) x[i][q] = _mm512_set1_epi32(static_cast<int>(pairs[i * K / 2 + b * 16 + c * 4 + q]));
#pragma GCC unroll 4
      for (int g = 0; g < kG; ++g) {
        const __m512i u = _mm512_maskz_permutexvar_epi8(
            ~0ull, gather, _mm512_loadu_si512(codes + (g * nb + b) * kTileBytes + c * 64));
        // Code q of each word in its low bits (VPERMW reads five).
        const __m512i w0 = _mm512_maskz_permutexvar_epi16(~0u, u, table);
        const __m512i w1 = _mm512_maskz_permutexvar_epi16(~0u, _mm512_maskz_srli_epi16(~0u, u, 4), table);
        const __m512i w2 = _mm512_maskz_permutexvar_epi16(~0u, _mm512_maskz_srli_epi16(~0u, u, 8), table);
        const __m512i w3 = _mm512_maskz_permutexvar_epi16(~0u, _mm512_maskz_srli_epi16(~0u, u, 12), table);
#pragma GCC unroll 4
        for (int i = 0; i < R; ++i) {
          acc[i][g][0] = _mm512_dpwssd_epi32(acc[i][g][0], x[i][0], w0);
          acc[i][g][1] = _mm512_dpwssd_epi32(acc[i][g][1], x[i][1], w1);
          acc[i][g][0] = _mm512_dpwssd_epi32(acc[i][g][0], x[i][2], w2);
          acc[i][g][1] = _mm512_dpwssd_epi32(acc[i][g][1], x[i][3], w3);
        }
      }
    }
#pragma GCC unroll 4
    for (int g = 0; g < kG; ++g) {
      const __m512 sw = TileScales(scales + (g * nb + b) * 16);
#pragma GCC unroll 4
      for (int i = 0; i < R; ++i) {
        const __m512i total = _mm512_add_epi32(acc[i][g][0], acc[i][g][1]);
        const __m512 v = BlockTerm(_mm512_mul_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, total), _mm512_set1_ps(0.5f)),
                                   _mm512_cmpeq_epi32_mask(total, _mm512_setzero_si512()), values + i * K + b * 32,
                                   codes + (g * nb + b) * kTileBytes, xs[i * nb + b], sw);
        sum[i][g] = b == 0 ? v : _mm512_add_ps(sum[i][g], v);
      }
    }
  }
  for (int i = 0; i < R; ++i)
    for (int g = 0; g < kG; ++g) _mm512_storeu_ps(y + i * 64 + g * 16, sum[i][g]);
}

}  // namespace

void DecodeFp4Group(int rows, const uint32_t* pairs, const float* values, const float* xs, int64_t K,
                    const uint8_t* codes, const uint8_t* scales, float* y) {
  switch (rows) {
    case 4: return Group<4>(pairs, values, xs, K, codes, scales, y);
    case 3: return Group<3>(pairs, values, xs, K, codes, scales, y);
    case 2: return Group<2>(pairs, values, xs, K, codes, scales, y);
    default: return Group<1>(pairs, values, xs, K, codes, scales, y);
  }
}

#else  // not x86-64: KernelSupported() is false, so this is never called.

void DecodeFp4Group(int, const uint32_t*, const float*, const float*, int64_t, const uint8_t*, const uint8_t*, float*) {}

#endif

}  // namespace ds41::grid
