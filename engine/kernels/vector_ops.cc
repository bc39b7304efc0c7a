#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "engine/kernels/vector_ops.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "engine/kernels/vector_ops.h"

#include "engine/kernels/numerics.h"
#include "util/thread_scratch.h"

HWY_BEFORE_NAMESPACE();
namespace ds41 {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Block [b, b + 32) of the scores of NK keys x NH head vectors: NK * NH canonical chains at once
// (each q vector load serves NK keys and each key broadcast NH vectors, and the independent chains
// keep the FMA units busy), then added to the running scores in block order (block 0 stores).
template <int NH, int NK, class D>
HWY_INLINE void ScoresTile(D df, const float* HWY_RESTRICT qT, int H, int hd, int h0, int b,
                           const float* HWY_RESTRICT key, float* HWY_RESTRICT scores) {
  const int L = static_cast<int>(hn::Lanes(df));
  using V = hn::Vec<D>;
  V part[NK][NH];
#pragma GCC unroll 4
  for (int j = 0; j < NH; ++j) {
    const V q = hn::LoadU(df, qT + b * H + h0 + j * L);
#pragma GCC unroll 2
    for (int i = 0; i < NK; ++i) part[i][j] = hn::Mul(q, hn::Set(df, key[i * hd + b]));
  }
#pragma GCC unroll 8
  for (int d = b + 1; d < b + 32; ++d) {
#pragma GCC unroll 4
    for (int j = 0; j < NH; ++j) {
      const V q = hn::LoadU(df, qT + d * H + h0 + j * L);
#pragma GCC unroll 2
      for (int i = 0; i < NK; ++i) part[i][j] = hn::MulAdd(q, hn::Set(df, key[i * hd + d]), part[i][j]);
    }
  }
#pragma GCC unroll 2
  for (int i = 0; i < NK; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NH; ++j) {
      float* dst = scores + i * H + h0 + j * L;
      hn::StoreU(b == 0 ? part[i][j] : hn::Add(hn::LoadU(df, dst), part[i][j]), df, dst);
    }
}

// Blocks outermost: one block of q (32 x H floats) stays in L1 while every key passes, instead of
// all of q (hd x H, 128 KB for the release's heads) streaming from L2 for every key.
template <int NH, class D>
HWY_INLINE void ScoresHeads(D df, const float* HWY_RESTRICT qT, int H, int hd, int h0, const float* HWY_RESTRICT keys,
                            int nkeys, float* HWY_RESTRICT scores) {
  for (int b = 0; b < hd; b += 32) {
    int k = 0;
    for (; k + 2 <= nkeys; k += 2)
      ScoresTile<NH, 2>(df, qT, H, hd, h0, b, keys + static_cast<size_t>(k) * hd, scores + static_cast<size_t>(k) * H);
    for (; k < nkeys; ++k)
      ScoresTile<NH, 1>(df, qT, H, hd, h0, b, keys + static_cast<size_t>(k) * hd, scores + static_cast<size_t>(k) * H);
  }
}

// Heads [h0, h0 + NH) against L keys at once, the keys as the lanes (gathered from their rows): for
// heads that do not fill a vector, as the small model's 4 do on AVX2's 8 lanes. Each lane is the
// same canonical chain as above (a product, then fused products in d order, blocks added in order),
// so the bits are the same as the head-lane path's.
template <int NH, class D>
HWY_INLINE void ScoresKeyLanes(D df, const float* HWY_RESTRICT qT, int H, int hd, int h0,
                               const float* HWY_RESTRICT keys, float* HWY_RESTRICT scores) {
  const int L = static_cast<int>(hn::Lanes(df));
  const hn::RebindToSigned<D> di;
  const auto rows = hn::Mul(hn::Iota(di, 0), hn::Set(di, hd));  // lane j: key j's row
  using V = hn::Vec<D>;
  V acc[NH];
  for (int b = 0; b < hd; b += 32) {
    V part[NH];
    V kv = hn::GatherIndex(df, keys + b, rows);
#pragma GCC unroll 4
    for (int j = 0; j < NH; ++j) part[j] = hn::Mul(hn::Set(df, qT[b * H + h0 + j]), kv);
#pragma GCC unroll 4
    for (int d = b + 1; d < b + 32; ++d) {
      kv = hn::GatherIndex(df, keys + d, rows);
#pragma GCC unroll 4
      for (int j = 0; j < NH; ++j) part[j] = hn::MulAdd(hn::Set(df, qT[d * H + h0 + j]), kv, part[j]);
    }
#pragma GCC unroll 4
    for (int j = 0; j < NH; ++j) acc[j] = b == 0 ? part[j] : hn::Add(acc[j], part[j]);
  }
  HWY_ALIGN float lanes[hn::MaxLanes(df)];
#pragma GCC unroll 4
  for (int j = 0; j < NH; ++j) {
    hn::Store(acc[j], df, lanes);
    for (int k = 0; k < L; ++k) scores[static_cast<size_t>(k) * H + h0 + j] = lanes[k];
  }
}

HWY_ATTR void HeadScores(const float* qT, int H, int hd, const float* keys, int nkeys, float* scores) {
  const hn::ScalableTag<float> df;
  const int L = static_cast<int>(hn::Lanes(df));
  int h = 0;
  for (; h + 4 * L <= H; h += 4 * L) ScoresHeads<4>(df, qT, H, hd, h, keys, nkeys, scores);
  switch ((H - h) / L) {
    case 3: ScoresHeads<3>(df, qT, H, hd, h, keys, nkeys, scores); break;
    case 2: ScoresHeads<2>(df, qT, H, hd, h, keys, nkeys, scores); break;
    case 1: ScoresHeads<1>(df, qT, H, hd, h, keys, nkeys, scores); break;
    default: break;
  }
  h += (H - h) / L * L;
  // Heads beyond whole vectors: whole vectors of keys as the lanes, in groups of up to 4 heads.
  int k0 = 0;
  if (L > 1 && h < H) {
    for (; k0 + L <= nkeys; k0 += L) {
      const float* kb = keys + static_cast<size_t>(k0) * hd;
      float* sb = scores + static_cast<size_t>(k0) * H;
      int hh = h;
      for (; hh + 4 <= H; hh += 4) ScoresKeyLanes<4>(df, qT, H, hd, hh, kb, sb);
      switch (H - hh) {
        case 3: ScoresKeyLanes<3>(df, qT, H, hd, hh, kb, sb); break;
        case 2: ScoresKeyLanes<2>(df, qT, H, hd, hh, kb, sb); break;
        case 1: ScoresKeyLanes<1>(df, qT, H, hd, hh, kb, sb); break;
        default: break;
      }
    }
  }
  for (; h < H; ++h)  // and the keys left over: the same order, one lane
    for (int k = k0; k < nkeys; ++k) {
      const float* key = keys + static_cast<size_t>(k) * hd;
      float acc = 0.0f;
      for (int b = 0; b < hd; b += 32) {
        float part = qT[b * H + h] * key[b];
        for (int d = b + 1; d < b + 32; ++d) part += qT[d * H + h] * key[d];
        acc = b == 0 ? part : acc + part;
      }
      scores[static_cast<size_t>(k) * H + h] = acc;
    }
}

// NH heads x NV double vectors of pv in registers while the block's keys (in float64) stream past:
// each key vector loaded once for NH heads. `keys`: key k's element d0 is at keys[k * ks]. Per
// (head, d) the sum is 0.0 then + p_k * key_k[d] in k order (products exact in float64, so fused or
// not is the same).
template <int NH, int NV, class DD>
HWY_INLINE void PvTile(DD dd, const double* HWY_RESTRICT p, int nk, const double* HWY_RESTRICT keys, size_t ks, int hd,
                       int h0, int d0, double* HWY_RESTRICT pv) {
  const int L = static_cast<int>(hn::Lanes(dd));
  using V = hn::Vec<DD>;
  V acc[NH][NV];
#pragma GCC unroll 4
  for (int i = 0; i < NH; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) acc[i][j] = hn::Zero(dd);
  for (int k = 0; k < nk; ++k) {
    V kv[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) kv[j] = hn::LoadU(dd, keys + k * ks + j * L);
#pragma GCC unroll 4
    for (int i = 0; i < NH; ++i) {
      const V pk = hn::Set(dd, p[(h0 + i) * nk + k]);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[i][j] = hn::MulAdd(pk, kv[j], acc[i][j]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < NH; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) hn::StoreU(acc[i][j], dd, pv + static_cast<size_t>(h0 + i) * hd + d0 + j * L);
}

// Column tiles of 4 vectors outermost: the tile's keys are converted to float64 once (nk x 4
// vectors, L1) for every head, instead of once per group of heads; converts share the FMA ports.
HWY_ATTR void BlockPv(const double* p, int H, int nk, const float* keys, int hd, double* pv) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const int L = static_cast<int>(hn::Lanes(dd));
  const size_t tw = static_cast<size_t>(4 * L);  // a tile's width
  thread_local ThreadScratch<double> kd;
  if (kd.size() < static_cast<size_t>(nk) * tw) kd.resize(static_cast<size_t>(nk) * tw);
  // (hd is a multiple of 32, and a tile is at most 32 doubles wide on every target.)
  for (int d = 0; d < hd; d += 4 * L) {
    for (int k = 0; k < nk; ++k)
      for (int j = 0; j < 4; ++j)
        hn::StoreU(hn::PromoteTo(dd, hn::LoadU(df, keys + static_cast<size_t>(k) * hd + d + j * L)), dd, &kd[k * tw + j * L]);
    int h = 0;
    for (; h + 4 <= H; h += 4) PvTile<4, 4>(dd, p, nk, kd.data(), tw, hd, h, d, pv);
    for (; h < H; ++h) PvTile<1, 4>(dd, p, nk, kd.data(), tw, hd, h, d, pv);
  }
}

HWY_ATTR void QuantizeQdq8Blocks(const float* x, int64_t blocks, float* values, float* scales) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  using V = hn::Vec<decltype(df)>;
  constexpr int kMaxVecs = 32;  // 32 / lanes, lanes >= 1
  const int L = static_cast<int>(hn::Lanes(df));
  const int nv = 32 / L;
  for (int64_t b = 0; b < blocks; ++b) {
    const float* xb = x + b * 32;
    float* vb = values + b * 32;
    V v[kMaxVecs];
    auto amax = hn::Zero(df);
    auto finite = hn::Set(df, 0.0f);  // x * 0 is 0 unless x is NaN or infinite
    for (int j = 0; j < nv; ++j) {
      v[j] = hn::LoadU(df, xb + j * L);
      amax = hn::Max(amax, hn::Abs(v[j]));
      finite = hn::Add(finite, hn::Mul(v[j], hn::Zero(df)));
    }
    if (!hn::AllTrue(df, hn::Eq(finite, hn::Zero(df)))) {
      uint8_t codes[32];
      scales[b] = QuantizeQdq8(xb, 32, codes).scale;
      for (int k = 0; k < 32; ++k) vb[k] = E4m3ToF32(codes[k]);
      continue;
    }
    const float s = Qdq8Scale(hn::GetLane(hn::MaxOfLanes(df, amax)));
    scales[b] = s;
    const V inv = hn::Set(df, 1.0f / s), lim = hn::Set(df, 448.0f);
    for (int j = 0; j < nv; ++j) {
      // F32ToE4m3 in float form: below 2^-6 the subnormal grid of 2^-9 (round to nearest even),
      // above it the mantissa rounded to 3 bits on the bits.
      const V q = hn::Min(hn::Max(hn::Mul(v[j], inv), hn::Neg(lim)), lim);
      const V a = hn::Abs(q);
      const V sub = hn::Mul(hn::Round(hn::Mul(a, hn::Set(df, 512.0f))), hn::Set(df, 1.0f / 512.0f));
      auto bits = hn::BitCast(du, a);
      bits = hn::Add(bits, hn::Add(hn::Set(du, 0x7FFFFu), hn::And(hn::ShiftRight<20>(bits), hn::Set(du, 1u))));
      const V norm = hn::BitCast(df, hn::And(bits, hn::Set(du, 0xFFF00000u)));
      const V r = hn::IfThenElse(hn::Lt(a, hn::Set(df, 0.015625f)), sub, norm);
      hn::StoreU(hn::CopySign(r, q), df, vb + j * L);
    }
  }
}

HWY_ATTR double DotF32Weights(const float* x, const uint8_t* w, int64_t K) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const int64_t L = static_cast<int64_t>(hn::Lanes(dd));
  // Eight chains hide the FMA latency (two left the loop latency-bound). The products are exact in
  // float64; the order of their sum moves only float64 rounding errors, which its float32 rounding
  // almost never shows (docs/numerics.md: "Other reductions").
  constexpr int kChains = 8;
  hn::Vec<decltype(dd)> acc[kChains];
  for (auto& a : acc) a = hn::Zero(dd);
  int64_t k = 0;
  for (; k + kChains * L <= K; k += kChains * L) {
#pragma GCC unroll 8
    for (int j = 0; j < kChains; ++j)
      acc[j] = hn::MulAdd(hn::PromoteTo(dd, hn::LoadU(df, x + k + j * L)),
                          hn::PromoteTo(dd, hn::LoadU(df, reinterpret_cast<const float*>(w + 4 * (k + j * L)))), acc[j]);
  }
  for (; k + L <= K; k += L)
    acc[0] = hn::MulAdd(hn::PromoteTo(dd, hn::LoadU(df, x + k)),
                        hn::PromoteTo(dd, hn::LoadU(df, reinterpret_cast<const float*>(w + 4 * k))), acc[0]);
  for (int j = 1; j < kChains; ++j) acc[0] = hn::Add(acc[0], acc[j]);
  double s = hn::GetLane(hn::SumOfLanes(dd, acc[0]));
  for (; k < K; ++k) {
    float wk;
    std::memcpy(&wk, w + 4 * k, 4);
    s += static_cast<double>(x[k]) * wk;
  }
  return s;
}

HWY_ATTR ExponentRange Bf16ExponentRange(const uint16_t* v, int64_t n) {
  // Biased exponent fields: the smallest of the nonzero values', the largest of all.
  const hn::ScalableTag<uint16_t> d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  const auto magnitude = hn::Set(d, 0x7FFF), none = hn::Set(d, 0xFF);
  auto lo = none, hi = hn::Zero(d);
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    const auto m = hn::And(hn::LoadU(d, v + i), magnitude);
    const auto e = hn::ShiftRight<7>(m);
    lo = hn::Min(lo, hn::IfThenElse(hn::Eq(m, hn::Zero(d)), none, e));
    hi = hn::Max(hi, e);
  }
  uint32_t l = hn::GetLane(hn::MinOfLanes(d, lo)), h = hn::GetLane(hn::MaxOfLanes(d, hi));
  for (; i < n; ++i) {
    const uint32_t m = v[i] & 0x7FFFu;
    if (m != 0) l = std::min(l, m >> 7);
    h = std::max(h, m >> 7);
  }
  // Nothing nonzero leaves both at their start (inf and NaN raise h to 0xFF; a subnormal lowers l
  // to 0, -127 as an exponent).
  if (l == 0xFF && h == 0) return {};
  return {static_cast<int>(l) - 127, static_cast<int>(h) - 127};
}

// RoundBf16 of float lanes, as their bits: round to nearest even; a NaN keeps its high half with
// the quiet bit set (F32ToBf16).
template <class DU>
HWY_INLINE hn::Vec<DU> RoundBf16Bits(DU du, hn::Vec<DU> u) {
  const auto rounded = hn::Add(u, hn::Add(hn::Set(du, 0x7FFFu), hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u))));
  const auto nan = hn::Gt(hn::And(u, hn::Set(du, 0x7FFFFFFFu)), hn::Set(du, 0x7F800000u));
  return hn::And(hn::IfThenElse(nan, hn::Or(u, hn::Set(du, 0x00400000u)), rounded), hn::Set(du, 0xFFFF0000u));
}

HWY_ATTR void RoundBf16InPlace(float* x, int64_t n) {
  const hn::ScalableTag<uint32_t> du;
  const int64_t L = static_cast<int64_t>(hn::Lanes(du));
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    uint32_t* p = reinterpret_cast<uint32_t*>(x + i);
    hn::StoreU(RoundBf16Bits(du, hn::LoadU(du, p)), du, p);
  }
  for (; i < n; ++i) x[i] = RoundBf16(x[i]);
}

// The indexer's combination with the keys as the lanes (gathered from their rows of H): per head
// in head order, RoundBf16(max(RoundBf16(qk), 0) * w[h]) added to a float64 sum from 0.0, the sum
// rounded to float and then to bf16. Each lane is the scalar expression's chain, so the same bits.
// max(r, 0) is "0 if r < 0 else r", as std::max(r, 0.0f) is: -0 and NaN pass.
HWY_ATTR void IndexerKeyScores(const float* qk, int H, int nkeys, const float* w, float* score) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const hn::RebindToSigned<decltype(df)> di;
  const int L = static_cast<int>(hn::Lanes(dd));
  auto bf16 = [&](hn::Vec<decltype(df)> v) { return hn::BitCast(df, RoundBf16Bits(du, hn::BitCast(du, v))); };
  const auto rows = hn::Mul(hn::Iota(di, 0), hn::Set(di, H));
  int k = 0;
  for (; k + L <= nkeys; k += L) {
    const float* base = qk + static_cast<size_t>(k) * H;
    auto sum = hn::Zero(dd);
    for (int h = 0; h < H; ++h) {
      const auto r = bf16(hn::GatherIndex(df, base + h, rows));
      const auto t = bf16(hn::Mul(hn::IfThenZeroElse(hn::Lt(r, hn::Zero(df)), r), hn::Set(df, w[h])));
      sum = hn::Add(sum, hn::PromoteTo(dd, t));
    }
    hn::StoreU(bf16(hn::DemoteTo(df, sum)), df, score + k);
  }
  for (; k < nkeys; ++k) {
    double sum = 0.0;
    for (int h = 0; h < H; ++h) sum += RoundBf16(std::max(RoundBf16(qk[static_cast<size_t>(k) * H + h]), 0.0f) * w[h]);
    score[k] = RoundBf16(static_cast<float>(sum));
  }
}

// ExpF of float lanes (DF: floats rebound to a double tag), bit for bit. Highway's float64 exp is
// within 1 ulp of exp(x), as glibc's is, so the two round to the same float unless a float
// rounding boundary lies between them: lanes whose double is within 128 of its ulps of one (low 29
// mantissa bits near 2^28) take ExpF, as do those whose result would be subnormal or infinite, and
// NaN. At or below -104 the result is +0 (exp(-104) < 2^-150). The boundary fallback is a guard
// for other libm or Highway versions: with this host's, all 2^32 inputs give ExpF's bits on each
// of its 5 targets, with it and without it (exp_exhaustive_test proves the bits where tests run).
template <class DF>
HWY_INLINE hn::Vec<DF> ExpExact(DF df, hn::Vec<DF> x) {
  const hn::Rebind<double, DF> dd;
  const hn::RebindToUnsigned<decltype(dd)> du;
  const auto xd = hn::PromoteTo(dd, x);
  const auto e = hn::Exp(dd, xd);
  const auto near = hn::ShiftRight<7>(hn::And(hn::BitCast(du, e), hn::Set(du, (uint64_t{1} << 29) - 1)));
  const auto boundary = hn::Or(hn::Eq(near, hn::Set(du, (uint64_t{1} << 21) - 1)), hn::Eq(near, hn::Set(du, uint64_t{1} << 21)));
  // exp(-87) > 2^-126 and exp(88) < 2^128: inside, every result is a normal float.
  const auto inside = hn::And(hn::Ge(xd, hn::Set(dd, -87.0)), hn::Le(xd, hn::Set(dd, 88.0)));
  const auto y = hn::IfThenZeroElse(hn::Le(x, hn::Set(df, -104.0f)), hn::DemoteTo(df, e));
  const auto scalar = hn::AndNot(hn::Le(xd, hn::Set(dd, -104.0)), hn::Or(hn::RebindMask(dd, boundary), hn::Not(inside)));
  if (HWY_LIKELY(hn::AllFalse(dd, scalar))) return y;
  constexpr size_t kMax = hn::MaxLanes(df);
  alignas(64) float xs[kMax], ys[kMax];
  alignas(64) uint8_t lanes[(kMax + 7) / 8 + 8] = {};
  hn::StoreU(x, df, xs);
  hn::StoreU(y, df, ys);
  hn::StoreMaskBits(dd, scalar, lanes);
  for (size_t i = 0; i < hn::Lanes(df); ++i)
    if (lanes[i / 8] & (1u << (i % 8))) ys[i] = ExpF(xs[i]);
  return hn::LoadU(df, ys);
}

HWY_ATTR void ExpFMany(const float* x, int64_t n, float* out) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const int64_t L = static_cast<int64_t>(hn::Lanes(dd));
  int64_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(ExpExact(df, hn::LoadU(df, x + i)), df, out + i);
  for (; i < n; ++i) out[i] = ExpF(x[i]);
}

// SoftmaxBlock for the heads [h, h + lanes of D) (D: floats rebound to a double tag); `p` [nk][H].
template <class DF>
HWY_INLINE void SoftmaxHeads(DF df, const float* HWY_RESTRICT s, int H, int nk, int h, float* HWY_RESTRICT m,
                             float* HWY_RESTRICT l, float* HWY_RESTRICT sf, float* HWY_RESTRICT p) {
  const hn::Rebind<double, DF> dd;
  const hn::RebindToUnsigned<DF> du;
  // std::max(a, b) is (a < b ? b : a): spelled so, rather than with Max, it keeps a NaN score out of
  // the maximum and picks between zeros as the scalar loop does, bit for bit.
  const auto max = [](auto a, auto b) { return hn::IfThenElse(hn::Lt(a, b), b, a); };
  auto bm = hn::Set(df, -INFINITY);
  for (int k = 0; k < nk; ++k) bm = max(bm, hn::LoadU(df, s + static_cast<size_t>(k) * H + h));
  const auto m_old = hn::LoadU(df, m + h), m_new = max(m_old, bm);
  const auto f = ExpExact(df, hn::Sub(m_old, m_new));
  auto psum = hn::Zero(dd);
  for (int k = 0; k < nk; ++k) {
    const auto pk = ExpExact(df, hn::Sub(hn::LoadU(df, s + static_cast<size_t>(k) * H + h), m_new));
    psum = hn::Add(psum, hn::PromoteTo(dd, pk));
    hn::StoreU(hn::BitCast(df, RoundBf16Bits(du, hn::BitCast(du, pk))), df, p + static_cast<size_t>(k) * H + h);
  }
  hn::StoreU(f, df, sf + h);
  hn::StoreU(hn::Add(hn::Mul(hn::LoadU(df, l + h), f), hn::DemoteTo(df, psum)), df, l + h);
  hn::StoreU(m_new, df, m + h);
}

HWY_ATTR void ScaleInPlace(float* x, int64_t n, float s) {
  const hn::ScalableTag<float> df;
  const int64_t L = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(hn::Mul(hn::LoadU(df, x + i), hn::Set(df, s)), df, x + i);
  for (; i < n; ++i) x[i] *= s;
}

HWY_ATTR void RescaleAdd(float* acc, const float* sf, const double* pv, int H, int hd) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const int L = static_cast<int>(hn::Lanes(dd));
  for (int h = 0; h < H; ++h) {
    float* a = acc + static_cast<size_t>(h) * hd;
    const double* p = pv + static_cast<size_t>(h) * hd;
    int d = 0;
    for (; d + L <= hd; d += L)
      hn::StoreU(hn::Add(hn::Mul(hn::LoadU(df, a + d), hn::Set(df, sf[h])), hn::DemoteTo(df, hn::LoadU(dd, p + d))), df, a + d);
    for (; d < hd; ++d) a[d] = a[d] * sf[h] + static_cast<float>(p[d]);
  }
}

HWY_ATTR void SoftmaxBlock(const float* s, int H, int nk, float* m, float* l, float* sf, double* pb) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const int L = static_cast<int>(hn::Lanes(dd));
  thread_local ThreadScratch<float> p;
  if (p.size() < static_cast<size_t>(nk) * H) p.resize(static_cast<size_t>(nk) * H);
  int h = 0;
  for (; h + L <= H; h += L) SoftmaxHeads(df, s, H, nk, h, m, l, sf, p.data());
  for (; h < H; ++h) SoftmaxHeads(hn::CappedTag<float, 1>(), s, H, nk, h, m, l, sf, p.data());
  for (int hh = 0; hh < H; ++hh)
    for (int k = 0; k < nk; ++k) pb[static_cast<size_t>(hh) * nk + k] = p[static_cast<size_t>(k) * H + hh];
}

}  // namespace HWY_NAMESPACE
}  // namespace ds41
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ds41 {
HWY_EXPORT(HeadScores);
HWY_EXPORT(IndexerKeyScores);
HWY_EXPORT(BlockPv);
HWY_EXPORT(QuantizeQdq8Blocks);
HWY_EXPORT(DotF32Weights);
HWY_EXPORT(RoundBf16InPlace);
HWY_EXPORT(ExpFMany);
HWY_EXPORT(SoftmaxBlock);
HWY_EXPORT(ScaleInPlace);
HWY_EXPORT(RescaleAdd);
HWY_EXPORT(Bf16ExponentRange);

void HeadScores(const float* qT, int H, int hd, const float* keys, int nkeys, float* scores) {
  HWY_DYNAMIC_DISPATCH(HeadScores)(qT, H, hd, keys, nkeys, scores);
}
void IndexerKeyScores(const float* qk, int H, int nkeys, const float* w, float* score) {
  HWY_DYNAMIC_DISPATCH(IndexerKeyScores)(qk, H, nkeys, w, score);
}
void BlockPv(const double* p, int H, int nk, const float* keys, int hd, double* pv) {
  HWY_DYNAMIC_DISPATCH(BlockPv)(p, H, nk, keys, hd, pv);
}
void QuantizeQdq8Blocks(const float* x, int64_t blocks, float* values, float* scales) {
  HWY_DYNAMIC_DISPATCH(QuantizeQdq8Blocks)(x, blocks, values, scales);
}
double DotF32Weights(const float* x, const uint8_t* w, int64_t K) { return HWY_DYNAMIC_DISPATCH(DotF32Weights)(x, w, K); }
double SumOfSquares(const float* x, int64_t n) { return DotF32Weights(x, reinterpret_cast<const uint8_t*>(x), n); }
void RoundBf16InPlace(float* x, int64_t n) { HWY_DYNAMIC_DISPATCH(RoundBf16InPlace)(x, n); }
void ExpFMany(const float* x, int64_t n, float* out) { HWY_DYNAMIC_DISPATCH(ExpFMany)(x, n, out); }
void SoftmaxBlock(const float* s, int H, int nk, float* m, float* l, float* sf, double* pb) {
  HWY_DYNAMIC_DISPATCH(SoftmaxBlock)(s, H, nk, m, l, sf, pb);
}
void ScaleInPlace(float* x, int64_t n, float s) { HWY_DYNAMIC_DISPATCH(ScaleInPlace)(x, n, s); }
void RescaleAdd(float* acc, const float* sf, const double* pv, int H, int hd) {
  HWY_DYNAMIC_DISPATCH(RescaleAdd)(acc, sf, pv, H, hd);
}
ExponentRange Bf16ExponentRange(const uint16_t* v, int64_t n) { return HWY_DYNAMIC_DISPATCH(Bf16ExponentRange)(v, n); }
}  // namespace ds41
#endif
