// SIMD matmuls with Highway runtime dispatch (AVX3_DL/AVX3, AVX2, SSE4/SSSE3, scalar), in the
// canonical order of docs/numerics.md: lanes are output rows, each lane adds its block's exact
// products in k order with FMA, blocks are scaled and added in order. Every target therefore
// produces the scalar reference's bits (tested per target).
//
// Weights stay in their mapped storage format and are decoded in registers, tile by tile: a tile is
// 16 output rows x one 32-wide K block, transposed from the row-major codes into k-major float form
// (2 KB, L1-resident) and reused by every activation row of the call. For decode (one activation
// row) that transposition is the cost: see the engine-speed notes for the measured ratios.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "engine/matmul_simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "engine/matmul.h"
#include "engine/numerics.h"

HWY_BEFORE_NAMESPACE();
namespace ds41 {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int kTileRows = 16;
constexpr int kTilesPerGroup = 4;  // output rows per task step: 64, sharing every activation broadcast
constexpr int kRowChunk = 64;      // activation rows per pass over a weight tile

HWY_ATTR void BuildTile(const MatmulWeights& w, int64_t n0, int64_t b, float* HWY_RESTRICT T,
                        float* HWY_RESTRICT sw) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::RebindToUnsigned<decltype(df)> du;
  const hn::Rebind<uint16_t, decltype(df)> du16;
  const hn::Rebind<hwy::float16_t, decltype(df)> df16;
  const int64_t L = static_cast<int64_t>(hn::Lanes(df));
  const int64_t K = w.k;
  for (int64_t v = 0; v < kTileRows; v += L) {
    // Each lane is one weight row; its codes are copied k-major through U (rows past the end repeat
    // the last row and are never stored).
    switch (w.format) {
      case MatmulWeights::kFp8: {
        // Transpose the tile's 4-byte words through L1: U[q][lane] = bytes 4q..4q+3 of row lane.
        alignas(64) uint32_t U[8][kTileRows];
        for (int64_t r = 0; r < L; ++r) {
          const uint8_t* src = w.data + std::min(n0 + v + r, w.n - 1) * K + b * 32;
          for (int q = 0; q < 8; ++q) std::memcpy(&U[q][r], src + 4 * q, 4);
        }
        for (int q = 0; q < 8; ++q) {
          const auto g = hn::Load(du, U[q]);
          for (int j = 0; j < 4; ++j) {
            const auto c = hn::And(hn::ShiftRightSame(g, 8 * j), hn::Set(du, 0xFF));
            // E4M3 -> fp16 bit pattern (exact, subnormals included), x 256 restores the exponent bias.
            const auto h = hn::Or(hn::ShiftLeft<7>(hn::And(c, hn::Set(du, 0x7F))), hn::ShiftLeft<8>(hn::And(c, hn::Set(du, 0x80))));
            const auto f = hn::PromoteTo(df, hn::BitCast(df16, hn::DemoteTo(du16, hn::BitCast(di, h))));
            hn::Store(hn::Mul(f, hn::Set(df, 256.0f)), df, T + (4 * q + j) * kTileRows + v);
          }
        }
        break;
      }
      case MatmulWeights::kFp4: {
        alignas(64) uint32_t U[4][kTileRows];
        for (int64_t r = 0; r < L; ++r) {
          const uint8_t* src = w.data + std::min(n0 + v + r, w.n - 1) * (K / 2) + b * 16;
          for (int q = 0; q < 4; ++q) std::memcpy(&U[q][r], src + 4 * q, 4);
        }
        // E2M1 magnitudes as a lane table (8 entries: one vector on 8- and 16-lane targets).
        alignas(64) static const float kMag[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, 0, 0, 0, 0, 0, 0, 0, 0};
        alignas(64) static const float kE2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
        for (int q = 0; q < 4; ++q) {
          const auto g = hn::Load(du, U[q]);
          for (int j = 0; j < 8; ++j) {
            const auto c = hn::And(hn::ShiftRightSame(g, 4 * j), hn::Set(du, 0xF));
            hn::Vec<decltype(df)> f;
            if constexpr (hn::MaxLanes(df) >= 8) {
              const auto mag = hn::TableLookupLanes(hn::Load(df, kMag), hn::IndicesFromVec(df, hn::BitCast(di, hn::And(c, hn::Set(du, 7)))));
              f = hn::BitCast(df, hn::Or(hn::BitCast(du, mag), hn::ShiftLeft<28>(hn::And(c, hn::Set(du, 8)))));
            } else {
              f = hn::GatherIndex(df, kE2m1, hn::BitCast(di, c));
            }
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
  for (int r = 0; r < kTileRows; ++r) {
    const int64_t row = std::min(n0 + r, w.n - 1);
    switch (w.format) {
      case MatmulWeights::kFp8: sw[r] = E8m0ToF32(w.scales[(row / 32) * ((K + 31) / 32) + b]); break;
      case MatmulWeights::kFp4: sw[r] = E8m0ToF32(w.scales[row * (K / 32) + b]); break;
      case MatmulWeights::kBf16: sw[r] = 1.0f; break;
    }
  }
}

// Rows [r0, r1) of Y for output tiles [t0, t1) (t1 - t0 <= kTilesPerGroup).
HWY_ATTR void GroupRows(const MatmulActs& a, const MatmulWeights& w, int64_t t0, int64_t t1, int64_t r0, int64_t r1,
                        float* HWY_RESTRICT T, float* HWY_RESTRICT sw, float* HWY_RESTRICT acc, float* Y) {
  const hn::ScalableTag<float> df;
  const int64_t L = static_cast<int64_t>(hn::Lanes(df));
  const int64_t K = w.k, nb = K / 32, G = t1 - t0, W = G * kTileRows;
  const bool scaled = w.format != MatmulWeights::kBf16;
  const int64_t row_bytes = w.format == MatmulWeights::kFp8 ? K : w.format == MatmulWeights::kFp4 ? K / 2 : 2 * K;
  const int64_t block_bytes = row_bytes / nb;
  for (int64_t b = 0; b < nb; ++b) {
    // Software prefetch, one per cache line, ~1 KB ahead in every row of the group: with 16-64 rows
    // streaming at once the hardware prefetchers alone leave the loads waiting on DRAM.
    constexpr int64_t kAhead = 1024;
    const int64_t off = b * block_bytes + kAhead;
    if (off < row_bytes && (b * block_bytes) % 64 + block_bytes > 63) {
      for (int64_t r = t0 * kTileRows; r < std::min(w.n, t1 * kTileRows); ++r) hwy::Prefetch(w.data + r * row_bytes + off);
    }
    for (int64_t g = 0; g < G; ++g) BuildTile(w, (t0 + g) * kTileRows, b, T + g * 32 * kTileRows, sw + g * kTileRows);
    for (int64_t m = r0; m < r1; ++m) {
      const float* HWY_RESTRICT x = a.values + m * K + b * 32;
      const float as = a.scales ? a.scales[m * nb + b] : 1.0f;
      for (int64_t g = 0; g < G; ++g) {
        const float* HWY_RESTRICT Tg = T + g * 32 * kTileRows;
        for (int64_t v = 0; v < kTileRows; v += L) {
          auto part = hn::Mul(hn::Set(df, x[0]), hn::Load(df, Tg + v));
          for (int k = 1; k < 32; ++k) part = hn::MulAdd(hn::Set(df, x[k]), hn::Load(df, Tg + k * kTileRows + v), part);
          if (a.scales) part = hn::Mul(part, hn::Set(df, as));
          if (scaled) part = hn::Mul(part, hn::Load(df, sw + g * kTileRows + v));
          float* HWY_RESTRICT dst = acc + (m - r0) * W + g * kTileRows + v;
          hn::StoreU(b == 0 ? part : hn::Add(hn::LoadU(df, dst), part), df, dst);
        }
      }
    }
  }
  for (int64_t m = r0; m < r1; ++m)
    for (int64_t g = 0; g < G; ++g) {
      const int64_t n0 = (t0 + g) * kTileRows, cnt = std::min<int64_t>(kTileRows, w.n - n0);
      std::memcpy(Y + m * w.n + n0, acc + (m - r0) * W + g * kTileRows, static_cast<size_t>(cnt) * sizeof(float));
    }
}

HWY_ATTR void MatmulGroup(const MatmulActs& a, const MatmulWeights& w, int64_t group, float* Y) {
  const int64_t tiles = (w.n + kTileRows - 1) / kTileRows;
  const int64_t t0 = group * kTilesPerGroup, t1 = std::min(tiles, t0 + kTilesPerGroup);
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
  const int64_t tiles = (w.n + HWY_NAMESPACE::kTileRows - 1) / HWY_NAMESPACE::kTileRows;
  return (tiles + HWY_NAMESPACE::kTilesPerGroup - 1) / HWY_NAMESPACE::kTilesPerGroup;
}

void MatmulGroup(const MatmulActs& a, const MatmulWeights& w, int64_t group, float* y) {
  HWY_DYNAMIC_DISPATCH(MatmulGroup)(a, w, group, y);
}

const char* MatmulTargetName() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }

}  // namespace ds41
#endif
