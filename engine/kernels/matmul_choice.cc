// ChooseMatmulKernels (engine/kernels/matmul.h): both exact kernel families timed on synthetic tile-major
// matrices, the faster kept for each shape.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "engine/kernels/kernels.h"
#include "engine/kernels/matmul.h"
#include "engine/kernels/matmul_bf16_dot.h"
#include "engine/kernels/vector_ops.h"
#include "engine/loading/weight_tiles.h"

namespace ds41 {
namespace {

// One matrix of each weight format, tile-major as the engine binds them, and activations of 1 and
// 32 rows: the shapes of a decode step and of a batched step or a prefill chunk.
struct Synthetic {
  static constexpr int64_t kN = 512, kK = 2048;  // 8 groups: every thread of a small pool has work
  std::vector<uint8_t> fp8, fp8_scales, fp8_tiles, fp4, fp4_scales, fp4_tiles, fp4_tile_scales, bf16_tiles;
  std::vector<uint16_t> bf16;
  Fp8Linear w8;
  Fp4Linear w4;
  Bf16View wb;
  std::vector<float> x1, x32;
  QuantActs q1, q32;
  std::vector<float> y;

  Synthetic() {
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    fp8.resize(kN * kK);
    for (auto& c : fp8) c = static_cast<uint8_t>(rng() % 0x7F) | static_cast<uint8_t>(rng() & 0x80);  // no NaN
    fp8_scales.assign((kN / 32) * (kK / 32), 127);
    fp8_tiles.resize(Fp8TilesBytes(kN, kK));
    PackFp8Tiles(fp8.data(), kN, kK, fp8_tiles.data());
    w8 = {fp8.data(), fp8_scales.data(), kN, kK, fp8_tiles.data()};
    fp4.resize(kN * kK / 2);
    for (auto& c : fp4) c = static_cast<uint8_t>(rng());
    fp4_scales.assign(kN * (kK / 32), 127);
    fp4_tiles.resize(Fp4TilesBytes(kN, kK));
    fp4_tile_scales.resize(Fp4ScaleTilesBytes(kN, kK));
    PackFp4Tiles(fp4.data(), kN, kK, fp4_tiles.data());
    PackFp4ScaleTiles(fp4_scales.data(), kN, kK, fp4_tile_scales.data());
    w4 = {fp4.data(), fp4_scales.data(), kN, kK, fp4_tiles.data(), fp4_tile_scales.data()};
    bf16.resize(kN * kK);
    for (auto& v : bf16) v = F32ToBf16(0.02f * normal(rng));
    bf16_tiles.resize(Bf16TilesBytes(kN, kK));
    PackBf16Tiles(reinterpret_cast<const uint8_t*>(bf16.data()), kN, kK, bf16_tiles.data());
    wb.p = reinterpret_cast<const uint8_t*>(bf16.data());
    wb.rows = kN;
    wb.cols = kK;
    wb.tiles = bf16_tiles.data();
    wb.exponents = Bf16ExponentRange(bf16.data(), kN * kK);
    for (auto* x : {&x1, &x32}) {
      x->resize((x == &x1 ? 1 : 32) * kK);
      for (auto& v : *x) v = RoundBf16(normal(rng));
    }
    y.resize(32 * kN);
  }

  // (QuantizeActs packs pairs only while the block kernel is enabled.)
  void Quantize() {
    QuantizeActs(x1.data(), 1, kK, &q1);
    QuantizeActs(x32.data(), 32, kK, &q32);
  }
  void Run(const QuantActs& q, const std::vector<float>& x, ThreadPool* pool) {
    MatMulFp8(q, w8, y.data(), pool);
    MatMulFp4(q, w4, y.data(), pool);
    MatMulBf16(x.data(), q.rows, wb, y.data(), pool);
  }
};

double Seconds(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string Verdict(const char* shape, double dot, double fma, bool use_dot) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s: VDPBF16PS %.2f ms, FMA %.2f ms -> %s", shape, dot * 1e3, fma * 1e3,
                use_dot ? "VDPBF16PS" : "FMA");
  return buf;
}

std::string Choose(ThreadPool* pool) {
  if (!bf16dot::Supported()) return "FMA kernels (no AVX512-BF16, or DS41_BF16_DOT=0)";
  if (bf16dot::FromEnvironment() == bf16dot::Setting::kOn) return "VDPBF16PS kernels (DS41_BF16_DOT=1)";
  Synthetic s;
  bf16dot::SetEnabled(true);
  s.Quantize();
  s.Run(s.q32, s.x32, pool);  // warm the pool and the caches
  // Alternating rounds, the best of each: another tenant's bursts hit both kernels alike. The
  // decode shape is timed only where VDPBF16PS could take it.
  constexpr int kRounds = 5;
  const bool decode_supported = bf16dot::DecodeSupported();
  MatmulKernelTimes t{1e9, 1e9, 1e9, 1e9};
  for (int r = 0; r < kRounds; ++r) {
    for (bool dot : {true, false}) {
      bf16dot::SetEnabled(dot);
      double& blocks = dot ? t.dot_blocks : t.fma_blocks;
      blocks = std::min(blocks, Seconds([&] { s.Run(s.q32, s.x32, pool); }));
      if (!decode_supported) continue;
      double& decode = dot ? t.dot_decode : t.fma_decode;
      decode = std::min(decode, Seconds([&] {
                          for (int i = 0; i < 4; ++i) s.Run(s.q1, s.x1, pool);
                        }));
    }
  }
  const MatmulKernelChoice c = DecideMatmulKernels(t, decode_supported);
  bf16dot::SetEnabled(c.blocks_dot, c.decode_dot);
  std::string out = Verdict("blocks (8+ rows)", t.dot_blocks, t.fma_blocks, c.blocks_dot) + "; ";
  if (!decode_supported) return out + "decode (1-7 rows): FMA (no AVX512-VBMI)";
  return out + Verdict("decode (1-7 rows)", t.dot_decode, t.fma_decode, c.decode_dot);
}

}  // namespace

MatmulKernelChoice DecideMatmulKernels(const MatmulKernelTimes& t, bool decode_supported) {
  return {t.dot_blocks < t.fma_blocks, decode_supported && t.dot_decode < t.fma_decode};
}

std::string ChooseMatmulKernels(ThreadPool* pool) {
  static const std::string chosen = Choose(pool);
  return chosen;
}

}  // namespace ds41
