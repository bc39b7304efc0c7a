// Intel AMX (the tile matrix unit): whether this process may use it, and the tile configuration
// that every AMX kernel loads (per thread) before its tile instructions.
#pragma once

#include <cstdint>

namespace ds41 {

// True when the CPU has AMX-TILE, AMX-INT8 and AMX-BF16 and Linux granted this process the tile
// data state (arch_prctl ARCH_REQ_XCOMP_PERM, asked once; without it the first tile instruction
// faults). False on other CPUs and architectures.
bool AmxGranted();

// LDTILECFG's 64-byte operand, palette 1: tile t holds rows[t] rows of colsb[t] bytes (at most 16 x 64).
struct alignas(64) AmxTileConfig {
  uint8_t palette_id = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
  void Set(int tile, int tile_rows, int tile_colsb) {
    rows[tile] = static_cast<uint8_t>(tile_rows);
    colsb[tile] = static_cast<uint16_t>(tile_colsb);
  }
};
static_assert(sizeof(AmxTileConfig) == 64, "LDTILECFG reads 64 bytes");

// GCC's tile intrinsics are asm whose operands do not cover the configuration or the buffers they
// read: a compiler barrier before them keeps every store to those ahead of them.
#define DS41_TILE_BARRIER() asm volatile("" ::: "memory")

}  // namespace ds41
