// SHA-256 (FIPS 180-4): the project's stable hash, identical on every machine and process.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ds41 {

class Sha256 {
 public:
  Sha256();
  void Update(const void* data, size_t n);
  void Update(std::string_view s) { Update(s.data(), s.size()); }
  std::array<uint8_t, 32> Digest();  // finalizes; call once
  std::string HexDigest();

 private:
  void Block(const uint8_t* p);

  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_{};
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

std::string ToHex(const uint8_t* p, size_t n);

}  // namespace ds41
