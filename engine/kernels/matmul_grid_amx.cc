// The FP4 grid's block sums on Intel AMX (matmul_grid.h): per 32-block, 16 activation rows x 16
// weight rows in one TDPBF16PS, then the canonical scaling and block order on AVX-512, 16 outputs a
// vector.
//
// Why TDPBF16PS gives the canonical bits here when it cannot for the canonical numerics
// (docs/numerics.md): its accumulation order and intermediate roundings are unspecified, but on the
// grid nothing needs rounding. A grid value is an integer with at most 4 significant bits (an E4M3
// code times 64, or an integer up to 8 where it was rounded), an E2M1 weight has 2, so both are
// exact bf16 and every product is a multiple of 1/2; a block's partial sums, in any order, are
// multiples of 1/2 below 28672 * 6 * 32 < 2^23, exact in fp32. Nothing is subnormal either (the
// unit flushes those): every nonzero product is at least 1/2.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "engine/kernels/matmul_grid.h"
#include "engine/kernels/numerics.h"
#include "engine/loading/weight_tiles.h"
#include "util/amx.h"
#include "util/thread_scratch.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "engine/kernels/grid_avx512.h"
#endif

namespace ds41::grid {

bool AmxSupported() {
  static const bool has = KernelSupported() && AmxGranted();
  return has;
}

namespace {
std::atomic<int> g_amx_enabled{-1};  // -1: not decided yet
}  // namespace

bool AmxEnabled() {
  int on = g_amx_enabled.load(std::memory_order_relaxed);
  if (on < 0) {
    const char* env = std::getenv("DS41_GRID_AMX");
    const bool off = env != nullptr && (std::strcmp(env, "0") == 0 || std::strcmp(env, "false") == 0 ||
                                        std::strcmp(env, "off") == 0);
    on = AmxSupported() && !off ? 1 : 0;
    int expected = -1;
    if (!g_amx_enabled.compare_exchange_strong(expected, on, std::memory_order_relaxed)) on = expected;
  }
  return on == 1;
}

void SetAmxEnabled(bool on) { g_amx_enabled.store(on && AmxSupported() ? 1 : 0, std::memory_order_relaxed); }

void PackAmxActs(const float* values, int64_t rows, int64_t K, int64_t r0, int64_t r1, uint16_t* out) {
  constexpr int64_t kT = kAmxTileRows;
  const int64_t nb = K / 32;
  for (int64_t r = r0; r < r1; ++r) {
    uint16_t* row = out + (r / kT) * nb * kT * 32 + (r % kT) * 32;
    for (int64_t k = 0; k < K; ++k) {
      uint32_t bits;  // the values are exact bf16 (see above): their float's high half
      std::memcpy(&bits, values + r * K + k, 4);
      row[(k / 32) * kT * 32 + k % 32] = static_cast<uint16_t>(bits >> 16);
    }
  }
  if (r1 == rows && rows % kT != 0)
    for (int64_t b = 0; b < nb; ++b)
      std::memset(out + ((rows / kT) * nb + b) * kT * 32 + (rows % kT) * 32, 0,
                  static_cast<size_t>((kT - rows % kT) * 32 * 2));
}

#if defined(__x86_64__)
namespace {

#define DS41_AMX_TARGET __attribute__((target("avx512f,avx512bw,avx512vbmi,amx-tile,amx-bf16")))

constexpr int kTileBytes = static_cast<int>(kFp4TileBytes);  // byte 16 j + n: codes 2j (low nibble), 2j + 1 of row n

// A B tile (TDPBF16PS's second operand) is 16 rows of 64 bytes: row j holds, for each weight row n,
// the bf16 pair of codes 2j, 2j + 1, which is byte j of the FP4 tile's row n. Each byte zero-extended
// into a dword; VPMULTISHIFTQB puts its low nibble in word 0's index bits and its high nibble in
// word 1's (the mask_ and maskz_ forms, every lane selected, avoid GCC 12's false
// maybe-uninitialized warning), and VPERMW looks both up.
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) inline void DecodeBTile(const uint8_t* tile, uint16_t* out) {
  const __m512i table = _mm512_load_si512(kE2m1Bf16), ctrl = _mm512_set1_epi64(0x0024002000040000);
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j) {
    const __m512i c = _mm512_maskz_cvtepu8_epi32(0xFFFF, _mm_loadu_si128(reinterpret_cast<const __m128i*>(tile + 16 * j)));
    const __m512i idx = _mm512_maskz_multishift_epi64_epi8(~0ull, ctrl, c);
    _mm512_storeu_si512(out + 32 * j, _mm512_maskz_permutexvar_epi16(~0u, idx, table));
  }
}

// Tiles (all 16 rows x 64 bytes): 0 and 1 hold two 16-row tiles of activations (one block), 2 and 5
// a B tile, 3-4 and 6-7 the products of the B tile before them with tiles 0 and 1.
AmxTileConfig GridTiles() {
  AmxTileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.Set(t, 16, 64);
  return cfg;
}

// One step: a block's products with one or two 16-row tiles of activations, 16 x 16 sums per B tile
// and activation tile.
struct Step {
  int64_t b = -1, m0 = 0;
  bool two = false;
};
using StepSums = float[4][512];  // [B tile][activation tile * 256 + row * 16 + column]

// The tile instructions name their registers in the instruction, so each B tile's set is spelled out.
#define DS41_GRID_PRODUCT(B, C0, C1, b_tile, c) \
  do {                                          \
    _tile_loadd(B, b_tile, 64);                 \
    _tile_zero(C0);                             \
    _tile_dpbf16ps(C0, 0, B);                   \
    if (two) {                                  \
      _tile_zero(C1);                           \
      _tile_dpbf16ps(C1, 1, B);                 \
    }                                           \
    _tile_stored(C0, (c), 64);                  \
    if (two) _tile_stored(C1, (c) + 256, 64);   \
  } while (0)

// The products of one or two activation tiles (a1 null for one) with a block's four B tiles.
DS41_AMX_TARGET inline void Products(const uint16_t* a0, const uint16_t* a1, const uint16_t (*bt)[512], StepSums& c) {
  const bool two = a1 != nullptr;
  DS41_TILE_BARRIER();  // (the B tiles were written by vector stores)
  _tile_loadd(0, a0, 64);
  if (two) _tile_loadd(1, a1, 64);
  DS41_GRID_PRODUCT(2, 3, 4, bt[0], c[0]);
  DS41_GRID_PRODUCT(5, 6, 7, bt[1], c[1]);
  DS41_GRID_PRODUCT(2, 3, 4, bt[2], c[2]);
  DS41_GRID_PRODUCT(5, 6, 7, bt[3], c[3]);
}

// One activation tile's sums against one B tile (c: 16 x 16) for `valid` rows from m0, each row's
// term (BlockTerm: zero sums' signs, the scales) added to its outputs in block order.
DS41_AMX_TARGET inline void Finish(const float* c, int valid, int64_t m0, int64_t b, int64_t nb, int64_t K,
                                   const float* values, const float* xs, const uint8_t* tile, __m512 sw, float* y) {
  for (int i = 0; i < valid; ++i) {
    const __m512 part = _mm512_load_ps(c + 16 * i);
    const int64_t r = m0 + i;
    const __m512 v = BlockTerm(part, _mm512_cmp_ps_mask(part, _mm512_setzero_ps(), _CMP_EQ_OQ), values + r * K + b * 32,
                               tile, xs[r * nb + b], sw);
    float* out = y + r * 64;
    _mm512_storeu_ps(out, b == 0 ? v : _mm512_add_ps(_mm512_loadu_ps(out), v));
  }
}

// Finish for every sum of a step (its block's tiles and weight scales).
DS41_AMX_TARGET inline void FinishStep(const Step& s, const StepSums& c, const uint8_t* const* tile, const __m512* sw,
                                       int64_t rows, int64_t K, const float* values, const float* xs, float* y) {
  constexpr int64_t kT = kAmxTileRows;
  const int64_t nb = K / 32;
  const int valid0 = static_cast<int>(std::min<int64_t>(kT, rows - s.m0));
  for (int g = 0; g < 4; ++g) {
    Finish(c[g], valid0, s.m0, s.b, nb, K, values, xs, tile[g], sw[g], y + 16 * g);
    if (s.two)
      Finish(c[g] + 256, static_cast<int>(std::min<int64_t>(kT, rows - s.m0 - kT)), s.m0 + kT, s.b, nb, K, values, xs,
             tile[g], sw[g], y + 16 * g);
  }
}

DS41_AMX_TARGET void Group(int64_t rows, const uint16_t* acts, const float* values, const float* xs, int64_t K,
                           const uint8_t* codes, const uint8_t* scales, float* y) {
  constexpr int kG = 4;
  constexpr int64_t kT = kAmxTileRows, kTileElems = kT * 32;
  const int64_t nb = K / 32;
  // The activation tiles two at a time through all blocks, so that their 32 rows' outputs stay in L1
  // while the tiles stream past; the B tiles are decoded (K / 32 blocks x 4 tiles x 1 KiB) during the
  // first pass and reused by the others.
  thread_local ThreadScratch<uint16_t> decoded;
  decoded.resize(static_cast<size_t>(nb * kG * 512));
  alignas(64) StepSums sums[2];
  // Scaling a step's sums waits for the tile stores to reach the cache, so it runs one step behind
  // the products: the next step's tile work overlaps it.
  const uint8_t* tile[2][kG];
  __m512 sw[2][kG];
  const AmxTileConfig cfg = GridTiles();
  DS41_TILE_BARRIER();
  _tile_loadconfig(&cfg);
  for (int64_t m0 = 0; m0 < rows; m0 += 2 * kT) {
    const bool two = m0 + kT < rows;
    const uint16_t* a = acts + (m0 / kT) * nb * kTileElems;
    for (int64_t b = 0; b < nb; ++b) {
      const int p = static_cast<int>(b & 1);
      for (int g = 0; g < kG; ++g) {
        tile[p][g] = codes + (g * nb + b) * kTileBytes;
        if (m0 == 0) {
          if (b + 2 < nb)
            for (int o = 0; o < kTileBytes; o += 64)
              _mm_prefetch(reinterpret_cast<const char*>(tile[p][g] + 2 * kTileBytes + o), _MM_HINT_T0);
          DecodeBTile(tile[p][g], decoded.data() + (b * kG + g) * 512);
        }
        sw[p][g] = TileScales(scales + (g * nb + b) * 16);
      }
      Products(a + b * kTileElems, two ? a + (nb + b) * kTileElems : nullptr,
               reinterpret_cast<const uint16_t(*)[512]>(decoded.data() + b * kG * 512), sums[p]);
      if (b > 0) FinishStep({b - 1, m0, two}, sums[p ^ 1], tile[p ^ 1], sw[p ^ 1], rows, K, values, xs, y);
    }
    FinishStep({nb - 1, m0, two}, sums[(nb - 1) & 1], tile[(nb - 1) & 1], sw[(nb - 1) & 1], rows, K, values, xs, y);
  }
  _tile_release();
  DS41_TILE_BARRIER();
}

}  // namespace

void AmxFp4Group(int64_t rows, const uint16_t* acts, const float* values, const float* xs, int64_t K,
                 const uint8_t* codes, const uint8_t* scales, float* y) {
  Group(rows, acts, values, xs, K, codes, scales, y);
}

void DecodeAmxBTile(const uint8_t* tile, uint16_t* out) { DecodeBTile(tile, out); }

#else  // not x86-64: AmxSupported() is false, so this is never called.

void AmxFp4Group(int64_t, const uint16_t*, const float*, const float*, int64_t, const uint8_t*, const uint8_t*, float*) {}
void DecodeAmxBTile(const uint8_t*, uint16_t*) {}

#endif

}  // namespace ds41::grid
