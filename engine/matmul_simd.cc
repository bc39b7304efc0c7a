// SIMD matmuls with Highway runtime dispatch (AVX3_DL/AVX3, AVX2, SSE4/SSSE3, scalar), in the
// canonical order of docs/numerics.md: lanes are output rows, each lane adds its block's exact
// products in k order with FMA, blocks are scaled and added in order. Every target therefore
// produces the scalar reference's bits (tested per target).
//
// Weights stay in their mapped storage format and are decoded in registers, tile by tile: a tile is
// 16 output rows x one 32-wide K block, gathered from the row-major codes into k-major float form
// (2 KB, L1-resident) and reused by every activation row of the call.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "engine/matmul_simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
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
    // Row indices of this vector's lanes (rows past the end read the last row; never stored).
    auto rows = hn::Min(hn::Iota(di, static_cast<int32_t>(n0 + v)), hn::Set(di, static_cast<int32_t>(w.n - 1)));
    switch (w.format) {
      case MatmulWeights::kFp8: {
        const auto base = hn::Mul(rows, hn::Set(di, static_cast<int32_t>(K / 4)));
        const int32_t* quads = reinterpret_cast<const int32_t*>(w.data) + b * 8;
        for (int q = 0; q < 8; ++q) {
          const auto g = hn::BitCast(du, hn::GatherIndex(di, quads + q, base));
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
        const auto base = hn::Mul(rows, hn::Set(di, static_cast<int32_t>(K / 8)));
        const int32_t* quads = reinterpret_cast<const int32_t*>(w.data) + b * 4;
        alignas(64) static const float kE2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
        for (int q = 0; q < 4; ++q) {
          const auto g = hn::BitCast(du, hn::GatherIndex(di, quads + q, base));
          for (int j = 0; j < 8; ++j) {
            const auto c = hn::BitCast(di, hn::And(hn::ShiftRightSame(g, 4 * j), hn::Set(du, 0xF)));
            hn::Store(hn::GatherIndex(df, kE2m1, c), df, T + (8 * q + j) * kTileRows + v);
          }
        }
        break;
      }
      case MatmulWeights::kBf16: {
        const auto base = hn::Mul(rows, hn::Set(di, static_cast<int32_t>(K / 2)));
        const int32_t* pairs = reinterpret_cast<const int32_t*>(w.data) + b * 16;
        for (int q = 0; q < 16; ++q) {
          const auto g = hn::BitCast(du, hn::GatherIndex(di, pairs + q, base));
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
  for (int64_t b = 0; b < nb; ++b) {
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
