#include "util/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace ds41 {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // reflected Castagnoli polynomial

std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    t[i] = c;
  }
  return t;
}

const std::array<uint32_t, 256>& Table() {
  static const std::array<uint32_t, 256> table = MakeTable();
  return table;
}

// The raw CRC state (no pre/post inversion) after `n` more bytes.
uint32_t Software(const uint8_t* p, size_t n, uint32_t crc) {
  const auto& table = Table();
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__)
// The crc32 instruction has a latency of three cycles and a throughput of one, so one stream uses a
// third of it: three streams of kLane bytes run side by side and are joined afterwards. The raw
// state is linear, so the state after A then B is Shift(state after A, |B|) ^ (state of B from 0);
// LaneShift is that shift over kLane bytes, as four byte-indexed tables.
constexpr size_t kLane = 1024;

struct LaneShift {
  uint32_t t[4][256];
  LaneShift() {
    uint32_t column[32];  // the shift of each single-bit state
    for (int j = 0; j < 32; ++j) {
      uint32_t c = 1u << j;
      for (size_t i = 0; i < kLane; ++i) c = Table()[c & 0xFF] ^ (c >> 8);
      column[j] = c;
    }
    for (int byte = 0; byte < 4; ++byte)
      for (uint32_t v = 0; v < 256; ++v) {
        uint32_t s = 0;
        for (int bit = 0; bit < 8; ++bit)
          if (v & (1u << bit)) s ^= column[8 * byte + bit];
        t[byte][v] = s;
      }
  }
  uint32_t operator()(uint32_t c) const {
    return t[0][c & 0xFF] ^ t[1][(c >> 8) & 0xFF] ^ t[2][(c >> 16) & 0xFF] ^ t[3][c >> 24];
  }
};

inline uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

__attribute__((target("sse4.2"))) uint32_t Hardware(const uint8_t* p, size_t n, uint32_t crc) {
  static const LaneShift shift;
  uint64_t c = crc;
  while (n >= 3 * kLane) {
    uint64_t c1 = 0, c2 = 0;
    for (size_t i = 0; i < kLane; i += 8) {
      c = _mm_crc32_u64(c, Load64(p + i));
      c1 = _mm_crc32_u64(c1, Load64(p + kLane + i));
      c2 = _mm_crc32_u64(c2, Load64(p + 2 * kLane + i));
    }
    c = shift(shift(static_cast<uint32_t>(c)) ^ static_cast<uint32_t>(c1)) ^ static_cast<uint32_t>(c2);
    p += 3 * kLane;
    n -= 3 * kLane;
  }
  for (; n >= 8; p += 8, n -= 8) c = _mm_crc32_u64(c, Load64(p));
  uint32_t c32 = static_cast<uint32_t>(c);
  while (n--) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}
#endif

}  // namespace

uint32_t Crc32c(const void* data, size_t n, uint32_t crc) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  crc = ~crc;
#if defined(__x86_64__)
  static const bool has_sse42 = __builtin_cpu_supports("sse4.2");
  crc = has_sse42 ? Hardware(p, n, crc) : Software(p, n, crc);
#else
  crc = Software(p, n, crc);
#endif
  return ~crc;
}

}  // namespace ds41
