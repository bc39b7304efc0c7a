// The tile-major weight layout the SIMD matmul reads without transposing: tiles of 16 output rows x
// one 32-wide K block, k-major inside (byte [k][row] for FP8; for FP4 byte [k/2][row] holds code k
// in its low nibble when k is even, high when odd; BF16 element [k][row]), tiles ordered by row
// tile, then K block. Rows
// past the end repeat the last row. Same codes, other order: results are bit-identical.
#pragma once

#include <cstdint>

namespace ds41 {

inline constexpr int64_t kTileRows = 16;
inline constexpr int64_t kFp8TileBytes = 32 * kTileRows;
inline constexpr int64_t kFp4TileBytes = 16 * kTileRows;
inline constexpr int64_t kBf16TileBytes = 64 * kTileRows;

inline int64_t TileCount(int64_t n, int64_t k) { return (n + kTileRows - 1) / kTileRows * (k / 32); }

// Bytes of the tile-major copy of an [n, k] FP8 or FP4 matrix.
inline int64_t Fp8TilesBytes(int64_t n, int64_t k) { return TileCount(n, k) * kFp8TileBytes; }
inline int64_t Fp4TilesBytes(int64_t n, int64_t k) { return TileCount(n, k) * kFp4TileBytes; }
inline int64_t Bf16TilesBytes(int64_t n, int64_t k) { return TileCount(n, k) * kBf16TileBytes; }
// FP4's per-row block scales, tile-major too: tile (t, b) holds its 16 rows' E8M0 scales.
inline int64_t Fp4ScaleTilesBytes(int64_t n, int64_t k) { return TileCount(n, k) * kTileRows; }

// Row-major codes (FP8 [n, k]; FP4 [n, k/2], element 2j in the low nibble) -> tile-major `out`.
void PackFp8Tiles(const uint8_t* codes, int64_t n, int64_t k, uint8_t* out);
void PackFp4Tiles(const uint8_t* packed, int64_t n, int64_t k, uint8_t* out);
void PackBf16Tiles(const uint8_t* values, int64_t n, int64_t k, uint8_t* out);  // [n, k] bf16
void PackFp4ScaleTiles(const uint8_t* scales, int64_t n, int64_t k, uint8_t* out);  // [n, k/32] E8M0

}  // namespace ds41
