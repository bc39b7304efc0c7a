// Random matmul operands for the kernels' tests and benchmarks (header only).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "engine/kernels/kernels.h"
#include "engine/kernels/numerics.h"
#include "engine/loading/weight_tiles.h"

namespace ds41::testing {

// Random FP4 weights n x k: row-major codes and scales (E8M0 120..129), and their tile-major copies.
struct RandomFp4Weights {
  std::vector<uint8_t> packed, scales, tiles, tile_scales;
  int64_t n, k;
  RandomFp4Weights(std::mt19937& rng, int64_t rows, int64_t cols) : n(rows), k(cols) {
    packed.resize(static_cast<size_t>(n * k / 2));
    for (auto& b : packed) b = static_cast<uint8_t>(rng());
    scales.resize(static_cast<size_t>(n * k / 32));
    for (auto& s : scales) s = static_cast<uint8_t>(120 + rng() % 10);
    Pack();
  }
  // The tile-major copies again, after a test edited `packed` or `scales`.
  void Pack() {
    tiles.resize(static_cast<size_t>(Fp4TilesBytes(n, k)));
    tile_scales.resize(static_cast<size_t>(Fp4ScaleTilesBytes(n, k)));
    PackFp4Tiles(packed.data(), n, k, tiles.data());
    PackFp4ScaleTiles(scales.data(), n, k, tile_scales.data());
  }
  Fp4Linear RowMajor() const { return {packed.data(), scales.data(), n, k}; }
  Fp4Linear TileMajor() const { return {packed.data(), scales.data(), n, k, tiles.data(), tile_scales.data()}; }
};

// m x k activations drawn N(0, 1), rounded to bf16 and quantized to QDQ8 as the layers do.
inline QuantActs RandomQuantActs(std::mt19937& rng, int64_t m, int64_t k) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(m * k));
  for (auto& v : x) v = RoundBf16(d(rng));
  QuantActs qa;
  QuantizeActs(x.data(), m, k, &qa);
  return qa;
}

}  // namespace ds41::testing
