#include "engine/loading/numpy_random.h"

#include <array>

namespace ds41 {
namespace {

// SeedSequence constants (numpy/random/bit_generator.pyx).
constexpr uint32_t kInitA = 0x43b0d7e5u;
constexpr uint32_t kMultA = 0x931e8875u;
constexpr uint32_t kInitB = 0x8b51f9ddu;
constexpr uint32_t kMultB = 0x58f38dedu;
constexpr uint32_t kMixMultL = 0xca01f9ddu;
constexpr uint32_t kMixMultR = 0x4973f715u;
constexpr int kXShift = 16;
constexpr int kPoolSize = 4;

class SeedSequence {
 public:
  explicit SeedSequence(uint64_t seed) {
    // The integer seed as little-endian 32-bit words (at least one word).
    std::vector<uint32_t> entropy;
    do {
      entropy.push_back(static_cast<uint32_t>(seed & 0xFFFFFFFFu));
      seed >>= 32;
    } while (seed != 0);
    uint32_t hash_const = kInitA;
    auto hashmix = [&hash_const](uint32_t value) {
      value ^= hash_const;
      hash_const *= kMultA;
      value *= hash_const;
      value ^= value >> kXShift;
      return value;
    };
    auto mix = [](uint32_t x, uint32_t y) {
      uint32_t r = kMixMultL * x - kMixMultR * y;
      r ^= r >> kXShift;
      return r;
    };
    for (int i = 0; i < kPoolSize; ++i)
      pool_[i] = hashmix(i < static_cast<int>(entropy.size()) ? entropy[i] : 0u);
    for (int src = 0; src < kPoolSize; ++src)
      for (int dst = 0; dst < kPoolSize; ++dst)
        if (src != dst) pool_[dst] = mix(pool_[dst], hashmix(pool_[src]));
    for (size_t src = kPoolSize; src < entropy.size(); ++src)
      for (int dst = 0; dst < kPoolSize; ++dst) pool_[dst] = mix(pool_[dst], hashmix(entropy[src]));
  }

  // generate_state(n, np.uint64): 2n 32-bit words, paired little-endian.
  std::vector<uint64_t> GenerateState64(int n) const {
    uint32_t hash_const = kInitB;
    std::vector<uint32_t> words(2 * n);
    for (int i = 0; i < 2 * n; ++i) {
      uint32_t v = pool_[i % kPoolSize];
      v ^= hash_const;
      hash_const *= kMultB;
      v *= hash_const;
      v ^= v >> kXShift;
      words[i] = v;
    }
    std::vector<uint64_t> out(n);
    for (int i = 0; i < n; ++i) out[i] = words[2 * i] | (static_cast<uint64_t>(words[2 * i + 1]) << 32);
    return out;
  }

 private:
  std::array<uint32_t, kPoolSize> pool_{};
};

constexpr uint128 kPcgMult =
    (static_cast<uint128>(0x2360ED051FC65DA4ull) << 64) | 0x4385DF649FCCF645ull;

}  // namespace

NumpyPcg64::NumpyPcg64(uint64_t seed) {
  std::vector<uint64_t> v = SeedSequence(seed).GenerateState64(4);
  const uint128 initstate = (static_cast<uint128>(v[0]) << 64) | v[1];
  const uint128 initseq = (static_cast<uint128>(v[2]) << 64) | v[3];
  state_ = 0;
  inc_ = (initseq << 1) | 1u;
  state_ = state_ * kPcgMult + inc_;
  state_ += initstate;
  state_ = state_ * kPcgMult + inc_;
}

uint64_t NumpyPcg64::NextU64() {
  state_ = state_ * kPcgMult + inc_;
  const uint64_t hi = static_cast<uint64_t>(state_ >> 64);
  const uint64_t lo = static_cast<uint64_t>(state_);
  const uint64_t x = hi ^ lo;
  const unsigned rot = static_cast<unsigned>(hi >> 58);
  return (x >> rot) | (x << ((64u - rot) & 63u));
}

StatusOr<std::vector<int64_t>> NumpyPcg64::Integers(int64_t high, int n) {
  if (high < 1) return InvalidArgumentError("integers: high must be at least 1");
  const uint64_t rng = static_cast<uint64_t>(high) - 1;  // inclusive range
  std::vector<int64_t> out(n, 0);
  if (rng == 0) return out;
  if (rng <= 0xFFFFFFFFull)
    return InvalidArgumentError("integers: ranges below 2^32 use numpy's buffered path, not reproduced");
  const uint64_t rng_excl = rng + 1;
  for (int i = 0; i < n; ++i) {
    uint128 m = static_cast<uint128>(NextU64()) * rng_excl;
    uint64_t leftover = static_cast<uint64_t>(m);
    if (leftover < rng_excl) {
      const uint64_t threshold = (UINT64_MAX - rng) % rng_excl;
      while (leftover < threshold) {
        m = static_cast<uint128>(NextU64()) * rng_excl;
        leftover = static_cast<uint64_t>(m);
      }
    }
    out[i] = static_cast<int64_t>(m >> 64);
  }
  return out;
}

}  // namespace ds41
