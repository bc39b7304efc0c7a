#include "engine/matmul_bf16_dot.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string_view>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ds41::bf16dot {
namespace {

std::atomic<bool> g_enabled{true};

bool CpuHasIt() {
  // DS41_BF16_DOT=0 keeps the FMA kernels (same results; an escape hatch should some CPU's
  // instruction round differently from the one matmul_test verified).
  if (const char* e = std::getenv("DS41_BF16_DOT"); e != nullptr && std::string_view(e) == "0") return false;
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

}  // namespace

bool Available() {
  static const bool has = CpuHasIt();
  return has && g_enabled.load(std::memory_order_relaxed);
}

void SetEnabled(bool on) { g_enabled.store(on, std::memory_order_relaxed); }

#if defined(__x86_64__)
// (The maskz_ forms below, with every lane selected, avoid GCC 12's false maybe-uninitialized
// warning on the plain intrinsics' undefined source operand.)
#define DS41_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16")))

DS41_BF16_TARGET void PackActs(const float* values, int64_t rows, int64_t K, uint32_t* pairs) {
  const int64_t nb = K / 32;
  for (int64_t c0 = 0; c0 < rows; c0 += kChunkRows) {
    const int64_t cr = std::min(kChunkRows, rows - c0);
    uint32_t* chunk = pairs + c0 * (K / 2);
    for (int64_t r = 0; r < cr; ++r)
      for (int64_t b = 0; b < nb; ++b) {
        const float* x = values + (c0 + r) * K + b * 32;
        // Word k = bf16(x[k]) (exact), then each (k, k + 1) dword rotated so that k is the high half.
        const __m512bh h = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + 16), _mm512_loadu_ps(x));
        _mm512_storeu_si512(chunk + (b * cr + r) * 16, _mm512_maskz_rol_epi32(0xFFFF, reinterpret_cast<__m512i>(h), 16));
      }
  }
}

DS41_BF16_TARGET bool PackActsIfSafe(const float* values, int64_t rows, int64_t K, uint32_t* pairs) {
  const int64_t n = rows * K;
  const __m512i low = _mm512_set1_epi32(0xFFFF), expo = _mm512_set1_epi32(0x7F800000);
  const __m512i lo_e = _mm512_set1_epi32((127 - 100) << 23), hi_e = _mm512_set1_epi32((127 + 100) << 23);
  for (int64_t i = 0; i < n; i += 16) {  // K % 32 == 0
    const __m512i v = _mm512_loadu_si512(values + i);
    const __m512i e = _mm512_and_si512(v, expo);
    const __mmask16 nonzero = _mm512_test_epi32_mask(v, _mm512_set1_epi32(0x7FFFFFFF));
    const __mmask16 inexact = _mm512_test_epi32_mask(v, low);
    const __mmask16 out_of_range = _mm512_mask_cmplt_epu32_mask(nonzero, e, lo_e) | _mm512_cmpgt_epu32_mask(e, hi_e);
    if ((inexact | out_of_range) != 0) return false;
  }
  PackActs(values, rows, K, pairs);
  return true;
}

namespace {

// MB rows x NV tiles: MB * NV chains in registers, each weight vector loaded once for MB rows.
template <int MB, int NV>
DS41_BF16_TARGET inline void Chunk(const uint32_t* X, const float* as, const uint32_t* P, const float* sw, bool first,
                                   float* acc, int64_t ld) {
  __m512 c[MB][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MB; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) c[i][j] = _mm512_set1_ps(-0.0f);
#pragma GCC unroll 16
  for (int p = 0; p < 16; ++p) {
    __m512bh w[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) w[j] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(P + (j * 16 + p) * 16));
#pragma GCC unroll 8
    for (int i = 0; i < MB; ++i) {
      const __m512bh xb = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(X[i * 16 + p])));
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) c[i][j] = _mm512_dpbf16_ps(c[i][j], xb, w[j]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MB; ++i) {
    const __m512 s = _mm512_set1_ps(as[i]);
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      const __m512 v = _mm512_mul_ps(_mm512_mul_ps(c[i][j], s), _mm512_loadu_ps(sw + j * 16));
      float* d = acc + i * ld + j * 16;
      _mm512_storeu_ps(d, first ? v : _mm512_add_ps(_mm512_loadu_ps(d), v));
    }
  }
}

template <int NV>
DS41_BF16_TARGET void Rows(const uint32_t* X, const float* as, int64_t rows, const uint32_t* P, const float* sw,
                           bool first, float* acc, int64_t ld) {
  constexpr int kMb = NV >= 4 ? 4 : 8 / NV;  // 8-16 chains in flight cover the instruction's latency
  int64_t i = 0;
  for (; i + kMb <= rows; i += kMb) Chunk<kMb, NV>(X + i * 16, as + i, P, sw, first, acc + i * ld, ld);
  for (; i < rows; ++i) Chunk<1, NV>(X + i * 16, as + i, P, sw, first, acc + i * ld, ld);
}

}  // namespace

void BlockRows(const uint32_t* X, const float* as, int64_t rows, const uint32_t* P, const float* sw, int G, bool first,
               float* acc, int64_t ld) {
  switch (G) {
    case 4: return Rows<4>(X, as, rows, P, sw, first, acc, ld);
    case 3: return Rows<3>(X, as, rows, P, sw, first, acc, ld);
    case 2: return Rows<2>(X, as, rows, P, sw, first, acc, ld);
    default: return Rows<1>(X, as, rows, P, sw, first, acc, ld);
  }
}

#else  // not x86-64: Available() is false, so these are never called.

void PackActs(const float*, int64_t, int64_t, uint32_t*) {}
bool PackActsIfSafe(const float*, int64_t, int64_t, uint32_t*) { return false; }
void BlockRows(const uint32_t*, const float*, int64_t, const uint32_t*, const float*, int, bool, float*, int64_t) {}

#endif

}  // namespace ds41::bf16dot
