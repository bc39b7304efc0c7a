#include "engine/kernels/matmul_bf16_dot.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string_view>

#if defined(__x86_64__)
#include <immintrin.h>

#include "engine/kernels/e8m0_avx512.h"
#include "engine/kernels/numerics.h"
#endif

namespace ds41::bf16dot {
namespace {

std::atomic<bool> g_blocks{true}, g_decode{true};

bool CpuHasIt() {
  // DS41_BF16_DOT=0 keeps the FMA kernels (same results; an escape hatch should some CPU's
  // instruction round differently from the one matmul_test verified).
  if (FromEnvironment() == Setting::kOff) return false;
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

}  // namespace

Setting FromEnvironment() {
  static const Setting s = [] {
    const char* e = std::getenv("DS41_BF16_DOT");
    if (e == nullptr) return Setting::kTimed;
    return std::string_view(e) == "0" ? Setting::kOff : std::string_view(e) == "1" ? Setting::kOn : Setting::kTimed;
  }();
  return s;
}

bool Supported() {
  static const bool has = CpuHasIt();
  return has;
}

bool DecodeSupported() {
#if defined(__x86_64__)
  static const bool vbmi = __builtin_cpu_supports("avx512vbmi");
  return vbmi && Supported();
#else
  return false;
#endif
}

bool Available() { return Supported() && g_blocks.load(std::memory_order_relaxed); }
bool DecodeAvailable() { return DecodeSupported() && g_decode.load(std::memory_order_relaxed); }

void SetEnabled(bool blocks, bool decode) {
  g_blocks.store(blocks, std::memory_order_relaxed);
  g_decode.store(decode, std::memory_order_relaxed);
}

#if defined(__x86_64__)
// (The maskz_ forms below, with every lane selected, avoid GCC 12's false maybe-uninitialized
// warning on the plain intrinsics' undefined source operand.)
#define DS41_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16")))

// One 32-block of exactly-bf16 values as 16 pairs: word k = bf16(x[k]), then each (k, k + 1) dword
// rotated so that k is the high half.
DS41_BF16_TARGET inline __m512i BlockPairs(const float* x) {
  const __m512bh h = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + 16), _mm512_loadu_ps(x));
  return _mm512_maskz_rol_epi32(0xFFFF, reinterpret_cast<__m512i>(h), 16);
}

DS41_BF16_TARGET void PackActs(const float* values, int64_t rows, int64_t K, uint32_t* pairs) {
  const int64_t nb = K / 32;
  for (int64_t c0 = 0; c0 < rows; c0 += kChunkRows) {
    const int64_t cr = std::min(kChunkRows, rows - c0);
    uint32_t* chunk = pairs + c0 * (K / 2);
    for (int64_t r = 0; r < cr; ++r)
      for (int64_t b = 0; b < nb; ++b) _mm512_storeu_si512(chunk + (b * cr + r) * 16, BlockPairs(values + (c0 + r) * K + b * 32));
  }
}

DS41_BF16_TARGET bool ActsSafe(const float* values, int64_t n, int64_t K, ExponentRange w) {
  if (!w.known() || w.lo < -126 || w.hi > 127) return false;
  // Biased exponent fields of the nonzero values (min) and of all (max); any bit below bf16's.
  const __m512i low = _mm512_set1_epi32(0xFFFF), magnitude = _mm512_set1_epi32(0x7FFFFFFF);
  __m512i lo = _mm512_set1_epi32(0xFF), hi = _mm512_setzero_si512();
  __mmask16 inexact = 0;
  for (int64_t i = 0; i < n; i += 16) {  // n is a multiple of K, K of 32
    const __m512i v = _mm512_loadu_si512(values + i);
    const __m512i e = _mm512_maskz_srli_epi32(0xFFFF, _mm512_and_si512(v, magnitude), 23);
    lo = _mm512_mask_min_epu32(lo, _mm512_test_epi32_mask(v, magnitude), lo, e);
    hi = _mm512_maskz_max_epu32(0xFFFF, hi, e);
    inexact |= _mm512_test_epi32_mask(v, low);
  }
  if (inexact != 0) return false;
  alignas(64) uint32_t lo_lanes[16], hi_lanes[16];
  _mm512_store_si512(lo_lanes, lo);
  _mm512_store_si512(hi_lanes, hi);
  const int lo_e = static_cast<int>(*std::min_element(lo_lanes, lo_lanes + 16));
  const int hi_e = static_cast<int>(*std::max_element(hi_lanes, hi_lanes + 16));
  if (lo_e == 0xFF && hi_e == 0) return true;  // all zeros (inf and NaN alone leave lo_e at 0xFF too)
  const int x_lo = lo_e - 127, x_hi = hi_e - 127;  // (a subnormal counts as -127, inf and NaN as 128)
  if (x_lo < -126 || x_hi > 127 || x_lo + w.lo - 14 < -126) return false;
  // Every product is below 2^(x_hi + w.hi + 2) in magnitude and a partial sum of K of them below
  // K times that, which must stay below 2^127 (so that rounding never reaches infinity).
  int log2k = 0;
  while ((int64_t{1} << log2k) < K) ++log2k;
  return x_hi + w.hi + 2 + log2k <= 127;
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

namespace {

#define DS41_DECODE_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16,avx512vbmi")))

// bf16 of E4M3's magnitudes m * 2^-9 with a zero exponent field (0 and the subnormals), at index m.
alignas(64) constexpr uint16_t kE4m3SubnormalBf16[32] = {0x0000, 0x3B00, 0x3B80, 0x3BC0, 0x3C00, 0x3C20, 0x3C40, 0x3C60};

// The weights of one group of four tiles (64 output rows) for the decode kernel: for tile g of
// block b, pair p's codes as the kernel's bf16 pairs (row r in lane r: k = 2p high, k + 1 low), and
// the rows' scales.
struct Fp4Source {
  const uint8_t* codes;   // tile g's block b at (g * nb + b) * 256: byte 16 p + r = codes 2p (low nibble), 2p + 1
  const uint8_t* scales;  // tile-major: (g * nb + b) * 16 + r
  int64_t nb;
  static constexpr int kTileBytes = 256;
  DS41_DECODE_TARGET __m512bh Pair(int64_t b, int g, int p) const {
    // A code byte zero-extended into each dword: word 0's index is bits 4..7 (code k + 1), word 1's
    // is bits 0..3 (code k); the fifth index bit is don't-care (kE2m1Bf16 repeats).
    const __m512i c = _mm512_maskz_cvtepu8_epi32(
        0xFFFF, _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + (g * nb + b) * kTileBytes + p * 16)));
    const __m512i idx = _mm512_maskz_multishift_epi64_epi8(~0ull, _mm512_set1_epi64(0x2020242400000404), c);
    return reinterpret_cast<__m512bh>(_mm512_maskz_permutexvar_epi16(~0u, idx, _mm512_load_si512(kE2m1Bf16)));
  }
  DS41_DECODE_TARGET __m512 Scales(int64_t b, int g) const {
    return E8m0Avx512(_mm512_maskz_cvtepu8_epi32(0xFFFF, _mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + (g * nb + b) * 16))));
  }
};

struct Fp8Source {
  const uint8_t* codes;   // tile g's block b at (g * nb + b) * 512: byte 16 k + r = code k of row r
  const uint8_t* scales;  // E8M0 [2][nb]: the group's two 32-row scale tiles
  int64_t nb;
  static constexpr int kTileBytes = 512;
  // Constants, held in registers across the kernel's loop.
  __m512i spread, fields, bias, exponent, sign, subnormals;
  DS41_DECODE_TARGET Fp8Source(const uint8_t* c, const uint8_t* s, int64_t n) : codes(c), scales(s), nb(n) {
    // Byte j of code k (bytes 0..15) and code k + 1 (16..31) into both bytes of the words of
    // dword j: code k + 1 in word 0, code k in word 1.
    spread = _mm512_set_epi32(0x0F0F1F1F, 0x0E0E1E1E, 0x0D0D1D1D, 0x0C0C1C1C, 0x0B0B1B1B, 0x0A0A1A1A, 0x09091919,
                              0x08081818, 0x07071717, 0x06061616, 0x05051515, 0x04041414, 0x03031313, 0x02021212,
                              0x01011111, 0x00001010);
    fields = _mm512_set1_epi16(0x07F0);
    bias = _mm512_set1_epi16(0x3C00);
    exponent = _mm512_set1_epi16(0x0780);
    sign = _mm512_set1_epi16(static_cast<short>(0x8000));
    subnormals = _mm512_load_si512(kE4m3SubnormalBf16);
  }
  DS41_DECODE_TARGET __m512bh Pair(int64_t b, int g, int p) const {
    const __m512i src = _mm512_castsi256_si512(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + (g * nb + b) * kTileBytes + p * 32)));
    const __m512i u = _mm512_maskz_permutexvar_epi8(~0ull, spread, src);
    // Shifted down arithmetically by 4, the high byte's code has its magnitude in bits 4..10 (E4M3's
    // exponent and mantissa in bf16's fields) and its sign in bits 11..15: with 120 added to the
    // exponent, that is the value's bf16 for every code with a nonzero exponent field.
    const __m512i t = _mm512_maskz_srai_epi16(~0u, u, 4);
    __m512i bits = _mm512_add_epi16(_mm512_and_si512(t, fields), bias);
    // Zeros and subnormals (exponent field 0) from a table indexed by the low byte's code (bits 0..4:
    // the mantissa, then two zero exponent bits); then every sign put back.
    bits = _mm512_mask_permutexvar_epi16(bits, _mm512_testn_epi16_mask(t, exponent), u, subnormals);
    return reinterpret_cast<__m512bh>(_mm512_ternarylogic_epi32(bits, t, sign, 0xF8));
  }
  DS41_DECODE_TARGET __m512 Scales(int64_t b, int g) const {
    return E8m0Avx512(_mm512_set1_epi32(scales[(g / 2) * nb + b]));
  }
};

struct Bf16Source {
  const uint8_t* codes;  // tile g's block b at (g * nb + b) * 1024: element k of row r at 2 (16 k + r)
  int64_t nb;
  static constexpr int kTileBytes = 1024;
  __m512i interleave;
  DS41_DECODE_TARGET Bf16Source(const uint8_t* c, const uint8_t*, int64_t n) : codes(c), nb(n) {
    // Words 0..15 of a 64-byte load are k's 16 rows, 16..31 k + 1's: dword r = (k's r, k + 1's r),
    // k in the high word.
    alignas(64) uint16_t idx[32];
    for (int r = 0; r < 16; ++r) {
      idx[2 * r] = static_cast<uint16_t>(16 + r);
      idx[2 * r + 1] = static_cast<uint16_t>(r);
    }
    interleave = _mm512_load_si512(idx);
  }
  DS41_DECODE_TARGET __m512bh Pair(int64_t b, int g, int p) const {
    const __m512i src = _mm512_loadu_si512(codes + (g * nb + b) * kTileBytes + p * 64);
    return reinterpret_cast<__m512bh>(_mm512_maskz_permutexvar_epi16(~0u, interleave, src));
  }
  DS41_DECODE_TARGET __m512 Scales(int64_t, int) const { return _mm512_set1_ps(1.0f); }
};

// R activation rows against one group: for each 32-block, 4R canonical chains of VDPBF16PS from -0
// (the weights of a pair decoded once for all R rows), scaled by the activation's then the weights'
// scale and added in block order.
template <int R, class Source>
DS41_DECODE_TARGET void DecodeGroup(const Source& source, const float* x, const float* xs, int64_t K, float* y) {
  const Source w = source;  // (its constants in registers)
  constexpr int kG = 4;  // tiles (column vectors of 16 rows)
  const int64_t nb = K / 32;
  __m512 sum[R][kG] = {};  // (set by block 0)
  for (int64_t b = 0; b < nb; ++b) {
    if (b + 2 < nb)
      for (int g = 0; g < kG; ++g)
        for (int o = 0; o < Source::kTileBytes; o += 64)
          _mm_prefetch(reinterpret_cast<const char*>(w.codes + (g * nb + b + 2) * Source::kTileBytes + o), _MM_HINT_T0);
    alignas(64) uint32_t X[R][16];
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) _mm512_store_si512(X[i], BlockPairs(x + i * K + b * 32));
    __m512 part[R][kG];
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
      for (int g = 0; g < kG; ++g) part[i][g] = _mm512_set1_ps(-0.0f);
#pragma GCC unroll 16
    for (int p = 0; p < 16; ++p) {
#pragma GCC unroll 4
      for (int g = 0; g < kG; ++g) {
        const __m512bh wp = w.Pair(b, g, p);
#pragma GCC unroll 4
        for (int i = 0; i < R; ++i)
          part[i][g] = _mm512_dpbf16_ps(part[i][g], reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(X[i][p]))), wp);
      }
    }
#pragma GCC unroll 4
    for (int g = 0; g < kG; ++g) {
      const __m512 sw = w.Scales(b, g);
#pragma GCC unroll 4
      for (int i = 0; i < R; ++i) {
        // (Multiplying by 1 where there are no scales changes no bits.)
        const __m512 v = _mm512_mul_ps(_mm512_mul_ps(part[i][g], _mm512_set1_ps(xs != nullptr ? xs[i * nb + b] : 1.0f)), sw);
        sum[i][g] = b == 0 ? v : _mm512_add_ps(sum[i][g], v);
      }
    }
  }
  for (int i = 0; i < R; ++i)
    for (int g = 0; g < kG; ++g) _mm512_storeu_ps(y + i * 64 + g * 16, sum[i][g]);
}

template <class Source>
void DecodeRows(int rows, const Source& w, const float* x, const float* xs, int64_t K, float* y) {
  switch (rows) {
    case 4: return DecodeGroup<4>(w, x, xs, K, y);
    case 3: return DecodeGroup<3>(w, x, xs, K, y);
    case 2: return DecodeGroup<2>(w, x, xs, K, y);
    default: return DecodeGroup<1>(w, x, xs, K, y);
  }
}

}  // namespace

void DecodeFp4Group(int rows, const float* x, const float* xs, int64_t K, const uint8_t* codes, const uint8_t* scales,
                    float* y) {
  DecodeRows(rows, Fp4Source{codes, scales, K / 32}, x, xs, K, y);
}

void DecodeFp8Group(int rows, const float* x, const float* xs, int64_t K, const uint8_t* codes, const uint8_t* scales,
                    float* y) {
  DecodeRows(rows, Fp8Source{codes, scales, K / 32}, x, xs, K, y);
}

void DecodeBf16Group(int rows, const float* x, const float* xs, int64_t K, const uint8_t* codes, const uint8_t* scales,
                     float* y) {
  DecodeRows(rows, Bf16Source{codes, scales, K / 32}, x, xs, K, y);
}

#else  // not x86-64: Available() is false, so these are never called.

void PackActs(const float*, int64_t, int64_t, uint32_t*) {}
bool ActsSafe(const float*, int64_t, int64_t, ExponentRange) { return false; }
void BlockRows(const uint32_t*, const float*, int64_t, const uint32_t*, const float*, int, bool, float*, int64_t) {}
void DecodeFp4Group(int, const float*, const float*, int64_t, const uint8_t*, const uint8_t*, float*) {}
void DecodeFp8Group(int, const float*, const float*, int64_t, const uint8_t*, const uint8_t*, float*) {}
void DecodeBf16Group(int, const float*, const float*, int64_t, const uint8_t*, const uint8_t*, float*) {}

#endif

}  // namespace ds41::bf16dot
