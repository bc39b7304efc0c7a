// SIMD matmuls with Highway runtime dispatch (AVX3_DL/AVX3, AVX2, SSE4/SSSE3, scalar), in the
// canonical order of docs/numerics.md: lanes are output rows, each lane adds its block's exact
// products in k order with FMA, blocks are scaled and added in order. Every target therefore
// produces the scalar reference's bits (tested per target).
//
// Weights stay in their storage format and are decoded in registers, tile by tile (16 output rows x
// one 32-wide K block). From the tile-major copy (engine/loading/weight_tiles.h) a tile's codes are one
// contiguous k-major stream: for 1-7 activation rows they go from bytes to floats straight into the
// chains (DecodeRowsTiles); for more rows a tile is decoded once into L1 float form and shared by
// every row (GroupRows). Without the copy, tiles are transposed out of the row-major codes.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "engine/kernels/matmul_simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "engine/kernels/matmul.h"
#include "engine/kernels/matmul_bf16_dot.h"
#include "engine/kernels/matmul_grid.h"
#include "engine/kernels/numerics.h"
#include "engine/loading/weight_tiles.h"
#include "util/thread_scratch.h"

// The AVX-512 targets may hand 32-blocks to the VDPBF16PS kernel (engine/kernels/matmul_bf16_dot.h).
#undef DS41_BF16_DOT_TARGET
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#define DS41_BF16_DOT_TARGET 1
#else
#define DS41_BF16_DOT_TARGET 0
#endif

HWY_BEFORE_NAMESPACE();
namespace ds41 {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int kTilesPerGroup = 4;  // output rows per task step: 64, sharing every activation broadcast
// Below this many activation rows, tiles are decoded in registers for each 4-row chunk; from it on
// they are decoded once into L1 and shared by all rows (GroupRows): measured faster from 8.
constexpr int64_t kDirectRows = 8;
static_assert(kDirectRows == bf16dot::kMinRows, "activations are packed for the matmuls that can use them");
constexpr int kRowChunk = 64;      // activation rows per pass over a weight tile

// Word offsets (from row n0's) of rows n0 .. n0 + lanes - 1, clamped to the last row.
template <class DI>
HWY_INLINE hn::Vec<DI> RowWords(DI di, int64_t n0, int64_t n, int64_t words_per_row) {
  alignas(64) int32_t idx[hn::MaxLanes(di)];
  for (size_t r = 0; r < hn::Lanes(di); ++r)
    idx[r] = static_cast<int32_t>((std::min(n0 + static_cast<int64_t>(r), n - 1) - n0) * words_per_row);
  return hn::Load(di, idx);
}

inline int64_t TileBytes(MatmulWeights::Format f) {
  return f == MatmulWeights::kFp8 ? kFp8TileBytes : f == MatmulWeights::kFp4 ? kFp4TileBytes : kBf16TileBytes;
}

// E8M0 scales (one per 32-bit lane) -> 2^(e - 127): the exponent field, 0x00400000 (2^-127) for 0,
// NaN for 255 (as E8m0ToF32).
template <class DF, class VU>
HWY_INLINE hn::Vec<DF> E8m0Values(DF df, VU e) {
  const hn::RebindToUnsigned<DF> du;
  auto bits = hn::ShiftLeft<23>(e);
  bits = hn::IfThenElse(hn::Eq(e, hn::Zero(du)), hn::Set(du, 0x00400000u), bits);
  bits = hn::IfThenElse(hn::Eq(e, hn::Set(du, 255u)), hn::Set(du, 0x7FC00000u), bits);
  return hn::BitCast(df, bits);
}

// The scales of 16-aligned rows [n0, n0 + lanes) for block b, from FP4's tile-major scales.
template <class DF>
HWY_INLINE hn::Vec<DF> Fp4TileScales(DF df, const MatmulWeights& w, int64_t n0, int64_t b) {
  const hn::RebindToUnsigned<DF> du;
  const hn::Rebind<uint8_t, DF> du8;
  const uint8_t* p = w.tile_scales + ((n0 / kTileRows) * (w.k / 32) + b) * kTileRows + n0 % kTileRows;
  return E8m0Values(df, hn::PromoteTo(du, hn::LoadU(du8, p)));
}

// E2M1 codes (one per 32-bit lane, 0..15) -> their values.
template <class DF, class VU>
HWY_INLINE hn::Vec<DF> E2m1Values(DF df, VU c) {
  const hn::RebindToSigned<DF> di;
  const hn::RebindToUnsigned<DF> du;
  // As a lane table (16 entries on 16-lane targets; 8 magnitudes and the sign bit on 8-lane ones),
  // else a gather.
  alignas(64) static const float kMag[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, 0, 0, 0, 0, 0, 0, 0, 0};
  alignas(64) static const float kE2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  if constexpr (hn::MaxLanes(df) >= 16) {  // the whole signed table in one vector: one permute
    return hn::TableLookupLanes(hn::Load(df, kE2m1), hn::IndicesFromVec(df, hn::BitCast(di, c)));
  } else if constexpr (hn::MaxLanes(df) >= 8) {
    const auto mag = hn::TableLookupLanes(hn::Load(df, kMag), hn::IndicesFromVec(df, hn::BitCast(di, hn::And(c, hn::Set(du, 7)))));
    return hn::BitCast(df, hn::Or(hn::BitCast(du, mag), hn::ShiftLeft<28>(hn::And(c, hn::Set(du, 8)))));
  } else {
    return hn::GatherIndex(df, kE2m1, hn::BitCast(di, c));
  }
}

// FP8 codes k and k + 1 of a tile's rows (`p`: code k of the first row; code k + 1 follows 16 bytes
// later) as floats. Sign-extended to 16 bits and shifted by 7, a code is E4M3's fp16 bit pattern
// once bit 14 (the sign's copy) is cleared: exact, subnormals included. The values are /256 unless
// the caller moved the 256 into x (`fold`).
template <class D>
HWY_INLINE void Fp8Pair(D df, const uint8_t* HWY_RESTRICT p, bool fold, hn::Vec<D>* w0, hn::Vec<D>* w1) {
  const auto mask16 = [](auto d16) { return hn::Set(d16, static_cast<int16_t>(0xBF80)); };
#if HWY_TARGET != HWY_SCALAR  // (no UpperHalf there)
  if constexpr (hn::MaxLanes(df) == kTileRows) {
    // With 16 lanes both codes' rows are 32 adjacent bytes: widened and masked in one vector.
    const hn::Repartition<int16_t, D> dh;
    const hn::Repartition<hwy::float16_t, D> dhf;
    const hn::Rebind<int8_t, decltype(dh)> db;
    const auto code = hn::PromoteTo(dh, hn::LoadU(db, reinterpret_cast<const int8_t*>(p)));
    const auto h = hn::BitCast(dhf, hn::And(hn::ShiftLeft<7>(code), mask16(dh)));
    *w0 = hn::PromoteTo(df, hn::LowerHalf(h));
    *w1 = hn::PromoteTo(df, hn::UpperHalf(hn::Half<decltype(dhf)>(), h));
  } else
#endif
  {
    const hn::Rebind<int8_t, D> di8;
    const hn::Rebind<int16_t, D> di16;
    const hn::Rebind<hwy::float16_t, D> df16;
    for (int j = 0; j < 2; ++j) {
      const auto code = hn::PromoteTo(di16, hn::LoadU(di8, reinterpret_cast<const int8_t*>(p + j * kTileRows)));
      (j == 0 ? *w0 : *w1) = hn::PromoteTo(df, hn::BitCast(df16, hn::And(hn::ShiftLeft<7>(code), mask16(di16))));
    }
  }
  if (!fold) {
    *w0 = hn::Mul(*w0, hn::Set(df, 256.0f));
    *w1 = hn::Mul(*w1, hn::Set(df, 256.0f));
  }
}

// Calls sink(k, v, w0, w1) with the values of codes k and k + 1 (k even) of rows [v, v + lanes) of
// tile (n0, b), from the tile-major copy: no transposition, one load per k (or pair) and 16 rows.
template <class Sink>
HWY_INLINE void ForTilePairs(const MatmulWeights& w, int64_t n0, int64_t b, Sink sink) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const hn::Rebind<uint8_t, decltype(df)> du8;
  const int64_t L = static_cast<int64_t>(hn::Lanes(df));
  const int64_t tile = (n0 / kTileRows) * (w.k / 32) + b;
  if (w.format == MatmulWeights::kBf16) {
    const hn::Rebind<uint16_t, decltype(df)> du16;
    const uint16_t* src = reinterpret_cast<const uint16_t*>(w.tiles + tile * kBf16TileBytes);
    auto load = [&](int64_t k, int64_t v) HWY_ATTR {
      return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(du16, src + k * kTileRows + v))));
    };
    for (int64_t k = 0; k < 32; k += 2)
      for (int64_t v = 0; v < kTileRows; v += L) sink(k, v, load(k, v), load(k + 1, v));
  } else if (w.format == MatmulWeights::kFp8) {
    const uint8_t* src = w.tiles + tile * kFp8TileBytes;
    for (int64_t k = 0; k < 32; k += 2)
      for (int64_t v = 0; v < kTileRows; v += L) {
        hn::Vec<decltype(df)> w0, w1;
        Fp8Pair(df, src + k * kTileRows + v, /*fold=*/false, &w0, &w1);
        sink(k, v, w0, w1);
      }
  } else {
    const uint8_t* src = w.tiles + tile * kFp4TileBytes;
    for (int64_t j = 0; j < 16; ++j)
      for (int64_t v = 0; v < kTileRows; v += L) {
        const auto c = hn::PromoteTo(du, hn::LoadU(du8, src + j * kTileRows + v));
        sink(2 * j, v, E2m1Values(df, hn::And(c, hn::Set(du, 0xF))), E2m1Values(df, hn::ShiftRight<4>(c)));
      }
  }
}

// BuildTile from the tile-major copy.
HWY_ATTR void BuildTileFromTiles(const MatmulWeights& w, int64_t n0, int64_t b, float* HWY_RESTRICT T) {
  const hn::ScalableTag<float> df;
  ForTilePairs(w, n0, b, [&](int64_t k, int64_t v, hn::Vec<decltype(df)> w0, hn::Vec<decltype(df)> w1) HWY_ATTR {
    hn::Store(w0, df, T + k * kTileRows + v);
    hn::Store(w1, df, T + (k + 1) * kTileRows + v);
  });
}

// BuildTile from the row-major codes: a transposition through L1 (or a gather).
HWY_ATTR void BuildTileFromRows(const MatmulWeights& w, int64_t n0, int64_t b, float* HWY_RESTRICT T) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::RebindToUnsigned<decltype(df)> du;
  const hn::Rebind<uint16_t, decltype(df)> du16;
  const hn::Rebind<hwy::float16_t, decltype(df)> df16;
  const int64_t L = static_cast<int64_t>(hn::Lanes(df));
  const int64_t K = w.k;
  for (int64_t v = 0; v < kTileRows; v += L) {
    // Each lane is one weight row; its codes are brought k-major (rows past the end repeat the last
    // row and are never stored).
    switch (w.format) {
      case MatmulWeights::kFp8: {
        // Transpose the tile's 4-byte words through L1: U[q][lane] = codes 4q..4q+3 of row lane. (The
        // hardware gather is slower here for 8 words a row; FP4's 4 words a row gather faster.)
        alignas(64) uint32_t U[8][kTileRows];
        for (int64_t r = 0; r < L; ++r) {
          const uint8_t* src = w.data + std::min(n0 + v + r, w.n - 1) * K + b * 32;
          for (int q = 0; q < 8; ++q) std::memcpy(&U[q][r], src + 4 * q, 4);
        }
        for (int q = 0; q < 8; ++q) {
          const auto g = hn::BitCast(di, hn::Load(du, U[q]));
          // Code j, sign-extended into bits 7..31 (an arithmetic shift of it from bits 24..31), masked
          // to E4M3's fp16 bit pattern: exact, subnormals included; x 256 restores the exponent bias.
          const auto mask = hn::Set(di, 0xBF80);
          float* out = T + 4 * q * kTileRows + v;
          auto f16 = [&](auto bits) {
            const auto h = hn::DemoteTo(du16, hn::And(hn::ShiftRight<17>(bits), mask));
            return hn::Mul(hn::PromoteTo(df, hn::BitCast(df16, h)), hn::Set(df, 256.0f));
          };
          hn::Store(f16(hn::ShiftLeft<24>(g)), df, out);
          hn::Store(f16(hn::ShiftLeft<16>(g)), df, out + kTileRows);
          hn::Store(f16(hn::ShiftLeft<8>(g)), df, out + 2 * kTileRows);
          hn::Store(f16(g), df, out + 3 * kTileRows);
        }
        break;
      }
      case MatmulWeights::kFp4: {
        const auto words = RowWords(di, n0 + v, w.n, K / 8);
        const uint32_t* base = reinterpret_cast<const uint32_t*>(w.data + (n0 + v) * (K / 2) + b * 16);
        for (int q = 0; q < 4; ++q) {
          const auto g = hn::GatherIndex(du, base + q, words);
          for (int j = 0; j < 8; ++j) {
            const auto f = E2m1Values(df, hn::And(hn::ShiftRightSame(g, 4 * j), hn::Set(du, 0xF)));
            hn::Store(f, df, T + (8 * q + j) * kTileRows + v);
          }
        }
        break;
      }
      case MatmulWeights::kBf16: {
        alignas(64) uint32_t U[16][kTileRows];
        for (int64_t r = 0; r < L; ++r) {
          const uint8_t* src = w.data + std::min(n0 + v + r, w.n - 1) * (2 * K) + b * 64;
          for (int q = 0; q < 16; ++q) std::memcpy(&U[q][r], src + 4 * q, 4);
        }
        for (int q = 0; q < 16; ++q) {
          const auto g = hn::Load(du, U[q]);
          hn::Store(hn::BitCast(df, hn::ShiftLeft<16>(g)), df, T + (2 * q) * kTileRows + v);
          hn::Store(hn::BitCast(df, hn::And(g, hn::Set(du, 0xFFFF0000u))), df, T + (2 * q + 1) * kTileRows + v);
        }
        break;
      }
    }
  }
}

// The scales of tile (n0, b)'s rows.
HWY_ATTR void TileScales(const MatmulWeights& w, int64_t n0, int64_t b, float* HWY_RESTRICT sw) {
  const int64_t K = w.k;
  const hn::ScalableTag<float> df;
  if (w.tile_scales != nullptr) {
    for (int64_t v = 0; v < kTileRows; v += static_cast<int64_t>(hn::Lanes(df)))
      hn::Store(Fp4TileScales(df, w, n0 + v, b), df, sw + v);
    return;
  }
  if (w.format == MatmulWeights::kFp8) {  // the 16 rows lie in one 32 x 32 scale tile
    const float s = E8m0ToF32(w.scales[(n0 / 32) * ((K + 31) / 32) + b]);
    for (int64_t v = 0; v < kTileRows; v += static_cast<int64_t>(hn::Lanes(df))) hn::Store(hn::Set(df, s), df, sw + v);
    return;
  }
  for (int r = 0; r < kTileRows; ++r) {
    const int64_t row = std::min(n0 + r, w.n - 1);
    switch (w.format) {
      case MatmulWeights::kFp8: sw[r] = E8m0ToF32(w.scales[(row / 32) * ((K + 31) / 32) + b]); break;
      case MatmulWeights::kFp4: sw[r] = E8m0ToF32(w.scales[row * (K / 32) + b]); break;
      case MatmulWeights::kBf16: sw[r] = 1.0f; break;
    }
  }
}

// Tile (n0, b) of the weights as floats, k-major (T[k * kTileRows + row]), and its rows' scales.
HWY_ATTR void BuildTile(const MatmulWeights& w, int64_t n0, int64_t b, float* HWY_RESTRICT T,
                        float* HWY_RESTRICT sw) {
  if (w.tiles != nullptr) {
    BuildTileFromTiles(w, n0, b, T);
  } else {
    BuildTileFromRows(w, n0, b, T);
  }
  TileScales(w, n0, b, sw);
}

#if DS41_BF16_DOT_TARGET
// Codes k and k + 1 (exactly bf16 values) of a vector of rows as the VDPBF16PS kernel's pairs: the
// high half of k's float bits, then k + 1's (engine/kernels/matmul_bf16_dot.h).
template <class DF>
HWY_INLINE void StorePairs(DF df, hn::Vec<DF> w0, hn::Vec<DF> w1, uint32_t* HWY_RESTRICT dst) {
  const hn::RebindToUnsigned<DF> du;
  hn::Store(hn::Or(hn::And(hn::BitCast(du, w0), hn::Set(du, 0xFFFF0000u)), hn::ShiftRight<16>(hn::BitCast(du, w1))), du, dst);
}

// Tile (n0, b) as bf16 pairs (P[pair * kTileRows + row]): from the tile-major codes straight, or
// through the float tile T when there is no tile-major copy.
HWY_ATTR void BuildPairs(const MatmulWeights& w, int64_t n0, int64_t b, float* HWY_RESTRICT T, uint32_t* HWY_RESTRICT P) {
  const hn::ScalableTag<float> df;
  if (w.tiles != nullptr) {
    ForTilePairs(w, n0, b, [&](int64_t k, int64_t v, hn::Vec<decltype(df)> w0, hn::Vec<decltype(df)> w1) HWY_ATTR {
      StorePairs(df, w0, w1, P + (k / 2) * kTileRows + v);
    });
    return;
  }
  BuildTileFromRows(w, n0, b, T);
  for (int64_t k = 0; k < 32; k += 2)
    for (int64_t v = 0; v < kTileRows; v += static_cast<int64_t>(hn::Lanes(df)))
      StorePairs(df, hn::Load(df, T + k * kTileRows + v), hn::Load(df, T + (k + 1) * kTileRows + v), P + (k / 2) * kTileRows + v);
}
#endif

// MB activation rows x NV column vectors of one 32-block: MB*NV independent canonical chains
// (product of k = 0, then FMA for k = 1..31), interleaved so the FMA units are not waiting on one
// chain's latency, and each weight vector loaded once for MB rows. `t[j]` is column vector j's
// k = 0 entry in a tile (k stride kTileRows).
template <int MB, int NV, class D>
HWY_INLINE void BlockChains(D df, const float* HWY_RESTRICT const* x, const float* HWY_RESTRICT const* t,
                            hn::Vec<D>* HWY_RESTRICT out) {
  using V = hn::Vec<D>;
  V acc[MB * NV];
#pragma GCC unroll 8
  for (int j = 0; j < NV; ++j) {
    const V w = hn::Load(df, t[j]);
#pragma GCC unroll 8
    for (int i = 0; i < MB; ++i) acc[i * NV + j] = hn::Mul(hn::Set(df, x[i][0]), w);
  }
  // Unrolled by 8: 7-12% faster on prefill shapes (fewer loop-control uops beside the FMAs); fully
  // unrolled it ran 15% slower.
#pragma GCC unroll 8
  for (int k = 1; k < 32; ++k) {
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) {
      const V w = hn::Load(df, t[j] + k * kTileRows);
#pragma GCC unroll 8
      for (int i = 0; i < MB; ++i) acc[i * NV + j] = hn::MulAdd(hn::Set(df, x[i][k]), w, acc[i * NV + j]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MB * NV; ++i) out[i] = acc[i];
}

// Scales the block's chains (activation scale if kXs, then weight scale if kScaled) and adds them to
// the running sums of rows [m, m + MB) and column vectors [c, c + NV). The sums start at -0, the
// identity of IEEE addition, so block 0 adds like every other (-0 + p is p, bit for bit).
template <int MB, int NV, bool kXs, bool kScaled, class D>
HWY_INLINE void BlockRows(D df, const MatmulActs& a, int64_t nb, int64_t b, int64_t K, int64_t m, int64_t r0, int64_t c,
                          int64_t W, const float* HWY_RESTRICT T, const float* HWY_RESTRICT sw, float* HWY_RESTRICT acc) {
  const int64_t L = static_cast<int64_t>(hn::Lanes(df));
  const float* x[MB];
  for (int i = 0; i < MB; ++i) x[i] = a.values + (m + i) * K + b * 32;
  const float* t[NV];
  int64_t col[NV];
  for (int j = 0; j < NV; ++j) {
    col[j] = (c + j) * L;  // output column within the group
    t[j] = T + (col[j] / kTileRows) * 32 * kTileRows + col[j] % kTileRows;
  }
  hn::Vec<D> part[MB * NV];
  BlockChains<MB, NV>(df, x, t, part);
  // Unrolled, so that the chains stay in registers (a loop over them spilled them to the stack).
#pragma GCC unroll 8
  for (int i = 0; i < MB; ++i) {
    float* HWY_RESTRICT dst = acc + (m + i - r0) * W;
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      auto p = part[i * NV + j];
      if constexpr (kXs) p = hn::Mul(p, hn::Set(df, a.scales[(m + i) * nb + b]));
      if constexpr (kScaled) p = hn::Mul(p, hn::Load(df, sw + col[j]));
      hn::StoreU(hn::Add(hn::LoadU(df, dst + col[j]), p), df, dst + col[j]);
    }
  }
}

// Block b of rows [r0, r1) against the group's decoded tiles T (C column vectors, W columns).
template <bool kXs, bool kScaled>
HWY_ATTR void BlockAllRows(const MatmulActs& a, int64_t nb, int64_t b, int64_t K, int64_t r0, int64_t r1, int64_t C,
                           int64_t W, const float* HWY_RESTRICT T, const float* HWY_RESTRICT sw, float* HWY_RESTRICT acc) {
  const hn::ScalableTag<float> df;
  // With 512-bit vectors (32 registers) and a group of 4 tiles: 20 chains in flight (5 rows x 4
  // column vectors: 9 loads per 20 FMAs; prefill 5-8% faster than 4 x 4 on AVX3, while 6 x 4 spilled
  // and ran 30% slower). Otherwise, and for the rows left, 16 (4 x 4: 8 loads per 16 FMAs) where the
  // group has 4 column vectors, else 8 (x 2); fewer rows use more columns.
  constexpr int kMb = 4, kNv = 2;
  int64_t m = r0;
  if (hn::MaxLanes(df) >= 16 && C == 4) {
    // As many 5-row steps as leave a multiple of 4 rows (8 rows: two of 4, not 5 and three single
    // rows), else as many as fit.
    const int64_t rows = r1 - r0;
    int64_t fives = rows / 5;
    while (fives > 0 && (rows - 5 * fives) % 4 != 0) --fives;
    if ((rows - 5 * fives) % 4 != 0) fives = rows / 5;
    for (; m < r0 + 5 * fives; m += 5) BlockRows<5, 4, kXs, kScaled>(df, a, nb, b, K, m, r0, 0, W, T, sw, acc);
  }
  for (; m + kMb <= r1; m += kMb) {
    int64_t c = 0;
    for (; c + 4 <= C; c += 4) BlockRows<kMb, 4, kXs, kScaled>(df, a, nb, b, K, m, r0, c, W, T, sw, acc);
    for (; c + kNv <= C; c += kNv) BlockRows<kMb, kNv, kXs, kScaled>(df, a, nb, b, K, m, r0, c, W, T, sw, acc);
    for (; c < C; ++c) BlockRows<kMb, 1, kXs, kScaled>(df, a, nb, b, K, m, r0, c, W, T, sw, acc);
  }
  for (; m < r1; ++m) {
    int64_t c = 0;
    for (; c + 4 <= C; c += 4) BlockRows<1, 4, kXs, kScaled>(df, a, nb, b, K, m, r0, c, W, T, sw, acc);
    for (; c < C; ++c) BlockRows<1, 1, kXs, kScaled>(df, a, nb, b, K, m, r0, c, W, T, sw, acc);
  }
}

// Rows [r0, r1) of Y for output tiles [t0, t1) (t1 - t0 <= kTilesPerGroup).
HWY_ATTR void GroupRows(const MatmulActs& a, const MatmulWeights& w, int64_t t0, int64_t t1, int64_t r0, int64_t r1,
                        float* HWY_RESTRICT T, float* HWY_RESTRICT sw, float* HWY_RESTRICT acc, float* Y) {
  const hn::ScalableTag<float> df;
  const int64_t L = static_cast<int64_t>(hn::Lanes(df));
  const int64_t K = w.k, nb = K / 32, G = t1 - t0, W = G * kTileRows, C = W / L;
  const bool scaled = w.format != MatmulWeights::kBf16;
  const int64_t row_bytes = w.format == MatmulWeights::kFp8 ? K : w.format == MatmulWeights::kFp4 ? K / 2 : 2 * K;
  const int64_t block_bytes = row_bytes / nb;
#if DS41_BF16_DOT_TARGET
  // Activations packed as bf16 pairs (only where the kernel is exact for them): the VDPBF16PS kernel.
  static_assert(kRowChunk == bf16dot::kChunkRows, "row chunks are the packed activations' chunks");
  const bool dot = a.bf16_pairs != nullptr && a.dot_exact && bf16dot::Available();
#else
  constexpr bool dot = false;
#endif
  // The FMA kernel's variant for this matmul's scales, and its running sums' start.
  const bool xs = a.scales != nullptr;
  auto* block_rows = xs ? (scaled ? &BlockAllRows<true, true> : &BlockAllRows<true, false>)
                        : (scaled ? &BlockAllRows<false, true> : &BlockAllRows<false, false>);
  if (!dot) std::fill(acc, acc + (r1 - r0) * W, -0.0f);
  for (int64_t b = 0; b < nb; ++b) {
    // Software prefetch, one per cache line, ~1 KB ahead in every row of the group: with 16-64 rows
    // streaming at once the hardware prefetchers alone leave the loads waiting on DRAM.
    constexpr int64_t kAhead = 1024;
    const int64_t off = b * block_bytes + kAhead;
    if (w.tiles != nullptr) {
      // Tile-major: each tile's blocks are one contiguous stream; two blocks ahead.
      const int64_t tb = TileBytes(w.format);
      if (b + 2 < nb)
        for (int64_t t = t0; t < t1; ++t)
          for (int64_t o = 0; o < tb; o += 64) hwy::Prefetch(w.tiles + (t * nb + b + 2) * tb + o);
      // FP4's tile-major scales (kTileRows bytes a block): four blocks, about a line, ahead.
      if (w.tile_scales != nullptr && b + 4 < nb)
        for (int64_t t = t0; t < t1; ++t) hwy::Prefetch(w.tile_scales + (t * nb + b + 4) * kTileRows);
    } else if (off < row_bytes && (b * block_bytes) % 64 + block_bytes > 63) {
      for (int64_t r = t0 * kTileRows; r < std::min(w.n, t1 * kTileRows); ++r) hwy::Prefetch(w.data + r * row_bytes + off);
    }
#if DS41_BF16_DOT_TARGET
    if (dot) {
      alignas(64) uint32_t P[kTilesPerGroup * 16 * kTileRows];
      float as[kRowChunk];
      for (int64_t m = r0; m < r1; ++m) as[m - r0] = a.scales != nullptr ? a.scales[m * nb + b] : 1.0f;
      for (int64_t g = 0; g < G; ++g) {
        BuildPairs(w, (t0 + g) * kTileRows, b, T, P + g * 16 * kTileRows);
        TileScales(w, (t0 + g) * kTileRows, b, sw + g * kTileRows);
      }
      const uint32_t* X = a.bf16_pairs + r0 * (K / 2) + b * (r1 - r0) * 16;  // this chunk's block b
      bf16dot::BlockRows(X, as, r1 - r0, P, sw, static_cast<int>(G), b == 0, acc, W);
      continue;
    }
#endif
    for (int64_t g = 0; g < G; ++g) BuildTile(w, (t0 + g) * kTileRows, b, T + g * 32 * kTileRows, sw + g * kTileRows);
    block_rows(a, nb, b, K, r0, r1, C, W, T, sw, acc);
  }
  // The group's columns of each row are contiguous in Y: one copy per row (per tile, the calls cost
  // more than the 64 bytes they moved).
  const int64_t n0 = t0 * kTileRows, cnt = std::min<int64_t>(W, w.n - n0);
  for (int64_t m = r0; m < r1; ++m)
    std::memcpy(Y + m * w.n + n0, acc + (m - r0) * W, static_cast<size_t>(cnt) * sizeof(float));
}

// R activation rows (R <= 4: decode, or a routed expert's few tokens) against a full group of
// tile-major tiles: codes become floats in registers, once for all R rows, and feed the canonical
// chains directly, R x (column vectors) of them in flight. FP8 codes are read as fp16 patterns
// (value / 256); with quantized activations (|x| <= 448) the 256 moves to x, exactly, so every
// product and rounding is the canonical one.
template <int R>
HWY_ATTR void DecodeRowsTiles(const MatmulActs& a, const MatmulWeights& w, int64_t r0, int64_t t0, float* HWY_RESTRICT Y) {
  const hn::ScalableTag<float> df;
  using V = hn::Vec<decltype(df)>;
  const hn::RebindToUnsigned<decltype(df)> du;
  const hn::Rebind<uint8_t, decltype(df)> du8;
  const hn::Rebind<uint16_t, decltype(df)> du16;
  constexpr int64_t kL = static_cast<int64_t>(hn::MaxLanes(df));
  constexpr int kC = static_cast<int>(kTilesPerGroup * kTileRows / kL);  // column vectors
  constexpr int64_t kW = kTilesPerGroup * kTileRows;
  const int64_t K = w.k, nb = K / 32;
  const bool fp8 = w.format == MatmulWeights::kFp8, bf16 = w.format == MatmulWeights::kBf16;
  const bool fold = fp8 && a.scales != nullptr;
  const int64_t tile_bytes = TileBytes(w.format);
  const uint8_t* src[kC];
  alignas(64) float sw[kW];
  alignas(64) float acc[R * kW];  // running block sums (L1; in registers for one row)
  V acc1[kC];
  for (int64_t b = 0; b < nb; ++b) {
    for (int c = 0; c < kC; ++c) {
      const int64_t col = c * kL, t = t0 + col / kTileRows;
      src[c] = w.tiles + (t * nb + b) * tile_bytes + (col % kTileRows) * (bf16 ? 2 : 1);
    }
    if (b + 2 < nb)
      for (int64_t t = t0; t < t0 + kTilesPerGroup; ++t)
        for (int64_t o = 0; o < tile_bytes; o += 64) hwy::Prefetch(w.tiles + (t * nb + b + 2) * tile_bytes + o);
    // TileScales' cases, written out per column vector: calling it per tile costs this loop ~5-10%.
    if (fp8) {
      // One scale per 32 x 32 weight tile: each column vector (<= 16 rows, 16-aligned) lies in one.
      for (int c = 0; c < kC; ++c)
        hn::Store(hn::Set(df, E8m0ToF32(w.scales[((t0 * kTileRows + c * kL) / 32) * nb + b])), df, sw + c * kL);
    } else if (!bf16 && w.tile_scales != nullptr) {
      for (int c = 0; c < kC; ++c) hn::Store(Fp4TileScales(df, w, t0 * kTileRows + c * kL, b), df, sw + c * kL);
    } else if (!bf16) {
      for (int64_t r = 0; r < kW; ++r) sw[r] = E8m0ToF32(w.scales[std::min(t0 * kTileRows + r, w.n - 1) * nb + b]);
    }
    alignas(64) float xs[R][32];
    for (int i = 0; i < R; ++i) {
      const float* HWY_RESTRICT x = a.values + (r0 + i) * K + b * 32;
      for (int k = 0; k < 32; ++k) xs[i][k] = fold ? x[k] * 256.0f : x[k];
    }
    // Weights of codes k and k + 1 of column vector c (FP4 holds both in one byte).
    auto weights2 = [&](int c, int k, V* w0, V* w1) HWY_ATTR {
      if (bf16) {
        const uint16_t* p = reinterpret_cast<const uint16_t*>(src[c]) + k * kTileRows;
        *w0 = hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(du16, p))));
        *w1 = hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(du16, p + kTileRows))));
      } else if (fp8) {
        Fp8Pair(df, src[c] + k * kTileRows, fold, w0, w1);
      } else {
        const auto pair = hn::PromoteTo(du, hn::LoadU(du8, src[c] + (k / 2) * kTileRows));
        *w0 = E2m1Values(df, hn::And(pair, hn::Set(du, 0xF)));
        *w1 = E2m1Values(df, hn::ShiftRight<4>(pair));
      }
    };
    V part[R * kC];
#pragma GCC unroll 16
    for (int c = 0; c < kC; ++c) {
      V w0, w1;
      weights2(c, 0, &w0, &w1);
#pragma GCC unroll 4
      for (int i = 0; i < R; ++i) {
        part[i * kC + c] = hn::MulAdd(hn::Set(df, xs[i][1]), w1, hn::Mul(hn::Set(df, xs[i][0]), w0));
      }
    }
    for (int k = 2; k < 32; k += 2) {
#pragma GCC unroll 16
      for (int c = 0; c < kC; ++c) {
        V w0, w1;
        weights2(c, k, &w0, &w1);
#pragma GCC unroll 4
        for (int i = 0; i < R; ++i) {
          part[i * kC + c] = hn::MulAdd(hn::Set(df, xs[i][k + 1]), w1, hn::MulAdd(hn::Set(df, xs[i][k]), w0, part[i * kC + c]));
        }
      }
    }
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) {
      const float as = a.scales ? a.scales[(r0 + i) * nb + b] : 1.0f;
#pragma GCC unroll 16
      for (int c = 0; c < kC; ++c) {
        V p = part[i * kC + c];
        if (a.scales) p = hn::Mul(p, hn::Set(df, as));
        if (!bf16) p = hn::Mul(p, hn::Load(df, sw + c * kL));
        if constexpr (R == 1) {
          acc1[c] = b == 0 ? p : hn::Add(acc1[c], p);
        } else {
          float* dst = acc + i * kW + c * kL;
          hn::Store(b == 0 ? p : hn::Add(hn::Load(df, dst), p), df, dst);
        }
      }
    }
  }
  if constexpr (R == 1)
    for (int c = 0; c < kC; ++c) hn::Store(acc1[c], df, acc + c * kL);
  const int64_t n0 = t0 * kTileRows, cnt = std::min<int64_t>(kW, w.n - n0);
  for (int i = 0; i < R; ++i)
    std::memcpy(Y + (r0 + i) * w.n + n0, acc + i * kW, static_cast<size_t>(cnt) * sizeof(float));
}

#if DS41_BF16_DOT_TARGET
// The AVX-512 group kernels (matmul_bf16_dot.h's decode kernels, matmul_grid.h's): `kernel(r, rows,
// out)` for the activation rows in chunks of 4 from r, each writing its rows' 64 outputs to `out`,
// whose columns of the group (t0's four tiles, less any padding rows) are copied into Y.
static_assert(bf16dot::kDecodeRows == 4 && grid::kRows == 4 && kTilesPerGroup * kTileRows == 64,
              "the group kernels take 4 rows against groups of four tiles");
template <class Kernel>
HWY_INLINE void ByRowChunks(const MatmulActs& a, const MatmulWeights& w, int64_t t0, float* Y, const Kernel& kernel) {
  const int64_t n0 = t0 * kTileRows, cnt = std::min<int64_t>(64, w.n - n0);
  alignas(64) float out[4 * 64];
  for (int64_t r = 0; r < a.rows; r += 4) {
    const int rows = static_cast<int>(std::min<int64_t>(4, a.rows - r));
    kernel(r, rows, out);
    for (int i = 0; i < rows; ++i)
      std::memcpy(Y + (r + i) * w.n + n0, out + i * 64, static_cast<size_t>(cnt) * sizeof(float));
  }
}
#endif

HWY_ATTR void MatmulGroup(const MatmulActs& a, const MatmulWeights& w, int64_t group, float* Y) {
  const int64_t tiles = (w.n + kTileRows - 1) / kTileRows;
  const int64_t t0 = group * kTilesPerGroup, t1 = std::min(tiles, t0 + kTilesPerGroup);
#if DS41_BF16_DOT_TARGET
  // FP4-grid activations packed for the AMX kernel (16+ rows) or the integer kernel (fewer), where
  // the CPU has them: their bits are the FMA kernels' on the same values (matmul_grid.h), which the
  // other targets and partial groups run.
  const bool grid_tiles = w.format == MatmulWeights::kFp4 && w.tiles != nullptr && w.tile_scales != nullptr &&
                          t1 - t0 == kTilesPerGroup;
  if (a.grid_amx != nullptr && grid_tiles) {
    const int64_t nb = w.k / 32, n0 = t0 * kTileRows, cnt = std::min<int64_t>(64, w.n - n0);
    thread_local ThreadScratch<float> out;
    out.resize(static_cast<size_t>(a.rows * 64));
    grid::AmxFp4Group(a.rows, a.grid_amx, a.values, a.scales, w.k, w.tiles + t0 * nb * kFp4TileBytes,
                      w.tile_scales + t0 * nb * kTileRows, out.data());
    for (int64_t i = 0; i < a.rows; ++i)
      std::memcpy(Y + i * w.n + n0, out.data() + i * 64, static_cast<size_t>(cnt) * sizeof(float));
    return;
  }
  if (a.grid_pairs != nullptr && grid_tiles) {
    const int64_t nb = w.k / 32;
    return ByRowChunks(a, w, t0, Y, [&](int64_t r, int rows, float* out) {
      grid::DecodeFp4Group(rows, a.grid_pairs + r * (w.k / 2), a.values + r * w.k, a.scales + r * nb, w.k,
                           w.tiles + t0 * nb * kFp4TileBytes, w.tile_scales + t0 * nb * kTileRows, out);
    });
  }
#endif
  if (a.rows < kDirectRows && w.tiles != nullptr && t1 - t0 == kTilesPerGroup) {
#if DS41_BF16_DOT_TARGET
    // Activations the VDPBF16PS kernels are exact for (E4M3 code values, or bf16 values checked by
    // the caller) against FP8, FP4 or bf16 weights: the VDPBF16PS decode kernels.
    const bool fp4 = w.format == MatmulWeights::kFp4 && w.tile_scales != nullptr;
    if ((fp4 || w.format != MatmulWeights::kFp4) && a.dot_exact && bf16dot::DecodeAvailable()) {
      const int64_t nb = w.k / 32, n0 = t0 * kTileRows;
      const uint8_t* codes = w.tiles + t0 * nb * TileBytes(w.format);
      const uint8_t* scales = fp4                                 ? w.tile_scales + t0 * nb * kTileRows
                              : w.format == MatmulWeights::kFp8 ? w.scales + (n0 / 32) * nb
                                                                : nullptr;
      const bf16dot::DecodeGroupFn kernel = fp4                                 ? bf16dot::DecodeFp4Group
                                            : w.format == MatmulWeights::kFp8 ? bf16dot::DecodeFp8Group
                                                                              : bf16dot::DecodeBf16Group;
      return ByRowChunks(a, w, t0, Y, [&](int64_t r, int rows, float* out) {
        kernel(rows, a.values + r * w.k, a.scales != nullptr ? a.scales + r * nb : nullptr, w.k, codes, scales, out);
      });
    }
#endif
    int64_t r = 0;
    for (; r + 4 <= a.rows; r += 4) DecodeRowsTiles<4>(a, w, r, t0, Y);
    switch (a.rows - r) {
      case 3: DecodeRowsTiles<3>(a, w, r, t0, Y); break;
      case 2: DecodeRowsTiles<2>(a, w, r, t0, Y); break;
      case 1: DecodeRowsTiles<1>(a, w, r, t0, Y); break;
      default: break;
    }
    return;
  }
  if (a.rows < 8) {
    // Few activation rows (decode): one tile of 16 weight rows at a time, so only 16 rows stream from
    // memory at once and the hardware prefetchers keep up with them.
    alignas(64) float T[32 * kTileRows];
    alignas(64) float sw[kTileRows];
    std::vector<float> acc(static_cast<size_t>(a.rows) * kTileRows);
    for (int64_t t = t0; t < t1; ++t) GroupRows(a, w, t, t + 1, 0, a.rows, T, sw, acc.data(), Y);
    return;
  }
  alignas(64) float T[kTilesPerGroup * 32 * kTileRows];
  alignas(64) float sw[kTilesPerGroup * kTileRows];
  std::vector<float> acc(static_cast<size_t>(std::min<int64_t>(kRowChunk, a.rows)) * kTilesPerGroup * kTileRows);
  for (int64_t r0 = 0; r0 < a.rows; r0 += kRowChunk)
    GroupRows(a, w, t0, t1, r0, std::min(a.rows, r0 + kRowChunk), T, sw, acc.data(), Y);
}

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace ds41
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ds41 {

HWY_EXPORT(MatmulGroup);
HWY_EXPORT(TargetName);

int64_t MatmulGroups(const MatmulWeights& w) {
  const int64_t tiles = (w.n + kTileRows - 1) / kTileRows;
  return (tiles + HWY_NAMESPACE::kTilesPerGroup - 1) / HWY_NAMESPACE::kTilesPerGroup;
}

void MatmulGroup(const MatmulActs& a, const MatmulWeights& w, int64_t group, float* y) {
  HWY_DYNAMIC_DISPATCH(MatmulGroup)(a, w, group, y);
}

const char* MatmulTargetName() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }

}  // namespace ds41
#endif
