#include "util/crc32c.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace ds41 {
namespace {

// Bit at a time, straight from the definition: the oracle for every length and split below.
uint32_t BitwiseCrc32c(const std::string& s) {
  uint32_t c = ~0u;
  for (unsigned char byte : s) {
    c ^= byte;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
  }
  return ~c;
}

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& ch : s) ch = static_cast<char>(rng());
  return s;
}

TEST(Crc32cTest, KnownVectors) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(Crc32c("", 0), 0u);
  std::string zeros(32, '\0');
  EXPECT_EQ(Crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  // Incremental equals one shot.
  EXPECT_EQ(Crc32c("6789", 4, Crc32c("12345", 5)), 0xE3069283u);
}

// Lengths around the three-stream rounds (3 KiB) and a real unit's size, at unaligned starts.
TEST(Crc32cTest, EveryLengthAndOffsetMatchesTheDefinition) {
  const std::string buf = RandomBytes(60000, 7);
  std::vector<size_t> lengths;
  for (size_t n = 0; n < 40; ++n) lengths.push_back(n);
  for (size_t round : {3072u, 6144u, 9216u, 55296u})
    for (size_t d = 0; d < 20; ++d) lengths.push_back(round - 10 + d);
  lengths.insert(lengths.end(), {1024, 2048, 4096, 57120, 57124, 59990});
  for (size_t n : lengths)
    for (size_t off : {0u, 1u, 3u, 7u}) {
      if (off + n > buf.size()) continue;
      const std::string s = buf.substr(off, n);
      ASSERT_EQ(Crc32c(s.data(), s.size()), BitwiseCrc32c(s)) << "length " << n << " offset " << off;
    }
}

TEST(Crc32cTest, SplitAnywhereEqualsOneShot) {
  const std::string s = RandomBytes(20000, 11);
  const uint32_t whole = BitwiseCrc32c(s);
  for (size_t cut : {0u, 1u, 8u, 1023u, 3072u, 3073u, 10000u, 19999u, 20000u})
    EXPECT_EQ(Crc32c(s.data() + cut, s.size() - cut, Crc32c(s.data(), cut)), whole) << "cut " << cut;
}

}  // namespace
}  // namespace ds41
