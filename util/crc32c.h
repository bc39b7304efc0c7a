// CRC-32C (Castagnoli), the checksum of cache units: SSE4.2 (three interleaved streams) when the CPU
// has it, tables otherwise.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ds41 {

uint32_t Crc32c(const void* data, size_t n, uint32_t crc = 0);

}  // namespace ds41
