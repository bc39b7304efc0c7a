#include "util/sha256.h"

#include <openssl/evp.h>

#include <cstdio>
#include <cstdlib>

namespace ds41 {
namespace {

// Fetched once: an implicit fetch (EVP_sha256()) per hash costs a lookup in the provider's table.
const EVP_MD* Md() {
  static const EVP_MD* md = [] {
    EVP_MD* m = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    if (m == nullptr) {
      std::fprintf(stderr, "ds41: libcrypto has no SHA-256\n");
      std::abort();
    }
    return m;
  }();
  return md;
}

// libcrypto fails these only when out of memory or misconfigured: no hash can be trusted then.
void Check(int ok, const char* what) {
  if (ok != 1) {
    std::fprintf(stderr, "ds41: SHA-256 %s failed\n", what);
    std::abort();
  }
}

}  // namespace

void Sha256::Free::operator()(evp_md_ctx_st* ctx) const { EVP_MD_CTX_free(ctx); }

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) { Check(ctx_ != nullptr && EVP_DigestInit_ex(ctx_.get(), Md(), nullptr), "init"); }

Sha256::Sha256(const Sha256& other) : ctx_(EVP_MD_CTX_new()) {
  Check(ctx_ != nullptr && EVP_MD_CTX_copy_ex(ctx_.get(), other.ctx_.get()), "copy");
}

Sha256& Sha256::operator=(const Sha256& other) {
  if (this == &other) return *this;
  if (!ctx_) ctx_.reset(EVP_MD_CTX_new());  // a moved-from hash
  Check(ctx_ != nullptr && EVP_MD_CTX_copy_ex(ctx_.get(), other.ctx_.get()), "copy");
  return *this;
}

Sha256::~Sha256() = default;

void Sha256::Update(const void* data, size_t n) {
  if (n > 0) Check(EVP_DigestUpdate(ctx_.get(), data, n), "update");
}

std::array<uint8_t, 32> Sha256::Digest() {
  std::array<uint8_t, 32> d{};
  unsigned int len = 0;
  Check(EVP_DigestFinal_ex(ctx_.get(), d.data(), &len), "final");
  return d;
}

std::string Sha256::HexDigest() {
  const auto d = Digest();
  return ToHex(d.data(), d.size());
}

std::string ToHex(const uint8_t* p, size_t n) {
  static const char kHex[] = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = kHex[p[i] >> 4];
    s[2 * i + 1] = kHex[p[i] & 15];
  }
  return s;
}

}  // namespace ds41
