// SHA-256 (FIPS 180-4): the project's stable hash, identical on every machine and process. OpenSSL's
// (libcrypto's EVP interface, which runs the SHA extensions where the CPU has them).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

struct evp_md_ctx_st;

namespace ds41 {

class Sha256 {
 public:
  Sha256();
  Sha256(const Sha256& other);  // the same hash so far, to go on in two ways
  Sha256& operator=(const Sha256& other);
  Sha256(Sha256&&) noexcept = default;
  Sha256& operator=(Sha256&&) noexcept = default;
  ~Sha256();

  void Update(const void* data, size_t n);
  void Update(std::string_view s) { Update(s.data(), s.size()); }
  std::array<uint8_t, 32> Digest();  // finalizes; call once
  std::string HexDigest();

 private:
  struct Free {
    void operator()(evp_md_ctx_st* ctx) const;
  };
  std::unique_ptr<evp_md_ctx_st, Free> ctx_;
};

std::string ToHex(const uint8_t* p, size_t n);

}  // namespace ds41
