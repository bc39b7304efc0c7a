#include "engine/weight_tiles.h"

#include <algorithm>

namespace ds41 {

void PackFp8Tiles(const uint8_t* codes, int64_t n, int64_t k, uint8_t* out) {
  const int64_t nb = k / 32;
  for (int64_t t = 0; t * kTileRows < n; ++t)
    for (int64_t b = 0; b < nb; ++b, out += kFp8TileBytes)
      for (int64_t r = 0; r < kTileRows; ++r) {
        const uint8_t* src = codes + std::min(t * kTileRows + r, n - 1) * k + b * 32;
        for (int64_t j = 0; j < 32; ++j) out[j * kTileRows + r] = src[j];
      }
}

void PackFp4Tiles(const uint8_t* packed, int64_t n, int64_t k, uint8_t* out) {
  const int64_t nb = k / 32;
  for (int64_t t = 0; t * kTileRows < n; ++t)
    for (int64_t b = 0; b < nb; ++b, out += kFp4TileBytes)
      for (int64_t r = 0; r < kTileRows; ++r) {
        // Row-major FP4 already pairs codes 2j, 2j+1 in one byte, low nibble first: the same byte.
        const uint8_t* src = packed + std::min(t * kTileRows + r, n - 1) * (k / 2) + b * 16;
        for (int64_t j = 0; j < 16; ++j) out[j * kTileRows + r] = src[j];
      }
}

void PackBf16Tiles(const uint8_t* values, int64_t n, int64_t k, uint8_t* out) {
  const int64_t nb = k / 32;
  for (int64_t t = 0; t * kTileRows < n; ++t)
    for (int64_t b = 0; b < nb; ++b, out += kBf16TileBytes)
      for (int64_t r = 0; r < kTileRows; ++r) {
        const uint8_t* src = values + (std::min(t * kTileRows + r, n - 1) * k + b * 32) * 2;
        for (int64_t j = 0; j < 32; ++j) {
          out[(j * kTileRows + r) * 2] = src[2 * j];
          out[(j * kTileRows + r) * 2 + 1] = src[2 * j + 1];
        }
      }
}

}  // namespace ds41
