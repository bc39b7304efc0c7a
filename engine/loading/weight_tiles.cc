#include "engine/loading/weight_tiles.h"

#include <algorithm>
#include <cstring>

namespace ds41 {
namespace {

// Row r of a block holds `units` units of `unit` bytes (a code, a pair of FP4 codes, a bf16 value);
// in the tile, unit j of row r goes to [j][r].
template <int64_t unit>
void PackTiles(const uint8_t* src, int64_t n, int64_t k, int64_t units, uint8_t* out) {
  const int64_t nb = k / 32, row_bytes = nb * units * unit, tile_bytes = units * unit * kTileRows;
  for (int64_t t = 0; t * kTileRows < n; ++t)
    for (int64_t b = 0; b < nb; ++b, out += tile_bytes)
      for (int64_t r = 0; r < kTileRows; ++r) {
        const uint8_t* row = src + std::min(t * kTileRows + r, n - 1) * row_bytes + b * units * unit;
        for (int64_t j = 0; j < units; ++j) std::memcpy(out + (j * kTileRows + r) * unit, row + j * unit, unit);
      }
}

}  // namespace

void PackFp8Tiles(const uint8_t* codes, int64_t n, int64_t k, uint8_t* out) { PackTiles<1>(codes, n, k, 32, out); }

// Row-major FP4 already pairs codes 2j, 2j+1 in one byte, low nibble first: that byte is the unit.
void PackFp4Tiles(const uint8_t* packed, int64_t n, int64_t k, uint8_t* out) { PackTiles<1>(packed, n, k, 16, out); }

void PackBf16Tiles(const uint8_t* values, int64_t n, int64_t k, uint8_t* out) { PackTiles<2>(values, n, k, 32, out); }

void PackFp4ScaleTiles(const uint8_t* scales, int64_t n, int64_t k, uint8_t* out) { PackTiles<1>(scales, n, k, 1, out); }

}  // namespace ds41
