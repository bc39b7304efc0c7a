#include "ckpt/tensor_init.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/kernels/numerics.h"
#include "engine/sampling.h"
#include "util/sha256.h"

namespace ds41 {
namespace {

class Normal {
 public:
  explicit Normal(uint64_t seed) : rng_(seed) {}
  float Next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u1 = rng_.Uniform(), u2 = rng_.Uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    const double r = std::sqrt(-2.0 * std::log(u1)), t = 2.0 * M_PI * u2;
    spare_ = static_cast<float>(r * std::sin(t));
    has_spare_ = true;
    return static_cast<float>(r * std::cos(t));
  }
  Rng& rng() { return rng_; }

 private:
  Rng rng_;
  bool has_spare_ = false;
  float spare_ = 0;
};

uint64_t TensorSeed(uint64_t seed, const std::string& name) {
  Sha256 h;
  h.Update(&seed, sizeof(seed));
  h.Update(name);
  auto d = h.Digest();
  uint64_t s;
  std::memcpy(&s, d.data(), 8);
  return s;
}

void PutBf16(std::vector<uint8_t>* out, float v) {
  const uint16_t b = F32ToBf16(v);
  out->push_back(static_cast<uint8_t>(b & 0xFF));
  out->push_back(static_cast<uint8_t>(b >> 8));
}

void PutF32(std::vector<uint8_t>* out, float v) {
  uint8_t b[4];
  std::memcpy(b, &v, 4);
  out->insert(out->end(), b, b + 4);
}

// FP8 with one E8M0 scale per `tile_rows` x 32 block (32x32 linears, 1x32 Engram rows).
void QuantizeFp8(const std::vector<float>& w, int64_t rows, int64_t cols, int64_t tile_rows, GeneratedTensor* out) {
  out->data.assign(static_cast<size_t>(rows * cols), 0);
  const int64_t rb = (rows + tile_rows - 1) / tile_rows, cb = (cols + 31) / 32;
  out->scale.assign(static_cast<size_t>(rb * cb), 0);
  static const float kInv = static_cast<float>(1.0 / 448.0);
  for (int64_t bi = 0; bi < rb; ++bi) {
    for (int64_t bj = 0; bj < cb; ++bj) {
      float amax = 0.0f;
      for (int64_t r = bi * tile_rows; r < std::min(rows, (bi + 1) * tile_rows); ++r)
        for (int64_t c = bj * 32; c < std::min(cols, (bj + 1) * 32); ++c) amax = std::max(amax, std::fabs(w[r * cols + c]));
      const float s = FastRoundScale(std::max(amax, 1e-4f), kInv);
      out->scale[bi * cb + bj] = E8m0FromPow2(s);
      for (int64_t r = bi * tile_rows; r < std::min(rows, (bi + 1) * tile_rows); ++r)
        for (int64_t c = bj * 32; c < std::min(cols, (bj + 1) * 32); ++c)
          out->data[r * cols + c] = F32ToE4m3(std::clamp(w[r * cols + c] / s, -kFp8Max, kFp8Max));
    }
  }
}

}  // namespace

GeneratedTensor GenerateTensor(const TensorSpec& spec, uint64_t seed) {
  Normal g(TensorSeed(seed, spec.name));
  GeneratedTensor out;
  int64_t n = 1;
  for (int64_t d : spec.shape) n *= d;
  const int64_t fan_in = spec.shape.size() > 1 ? spec.shape[1] : 1;
  const double proj_std = std::pow(static_cast<double>(fan_in), -0.5) * spec.init.value;

  auto sample = [&]() -> float {
    switch (spec.init.kind) {
      case InitHint::kNorm: return static_cast<float>(spec.init.value * (1.0 + 0.1 * g.Next()));
      case InitHint::kEmbedding:
      case InitHint::kEngramTable: return static_cast<float>(spec.init.value * g.Next());
      case InitHint::kProjection: return static_cast<float>(proj_std * g.Next());
      case InitHint::kSmall:
      case InitHint::kRouterBias: return static_cast<float>(spec.init.value * g.Next());
    }
    return 0.0f;
  };

  switch (spec.format) {
    case TensorFormat::kBf16:
      out.data.reserve(static_cast<size_t>(2 * n));
      for (int64_t i = 0; i < n; ++i) PutBf16(&out.data, sample());
      break;
    case TensorFormat::kF32:
      out.data.reserve(static_cast<size_t>(4 * n));
      for (int64_t i = 0; i < n; ++i) PutF32(&out.data, sample());
      break;
    case TensorFormat::kFp8Linear:
    case TensorFormat::kFp8Rows: {
      std::vector<float> w(static_cast<size_t>(n));
      for (float& v : w) v = sample();
      QuantizeFp8(w, spec.shape[0], spec.shape[1], spec.format == TensorFormat::kFp8Linear ? 32 : 1, &out);
      break;
    }
    case TensorFormat::kFp4Linear: {
      // Codes drawn directly in the storage format (quantizing gaussians costs minutes at real
      // widths); uniform E2M1 codes have RMS ~3.2, so the scale aims at an RMS of fan_in^-1/2 * gain.
      const int64_t rows = spec.shape[0], in = spec.shape[1];
      out.data.resize(static_cast<size_t>(rows * in / 2));
      for (auto& b : out.data) b = static_cast<uint8_t>(g.rng().Next() & 0xFF);
      const int base = static_cast<int>(std::lround(std::log2(proj_std / 3.2)));
      out.scale.resize(static_cast<size_t>(rows * in / 32));
      for (auto& s : out.scale) s = static_cast<uint8_t>(127 + base + static_cast<int>(g.rng().Next() % 3) - 1);
      break;
    }
  }
  return out;
}

std::vector<int32_t> SyntheticEngramTokenMap(int vocab_size, int compressed) {
  std::vector<int32_t> map(vocab_size);
  for (int t = 0; t < vocab_size; ++t)
    map[t] = static_cast<int32_t>(static_cast<int64_t>(t) * compressed / vocab_size);
  return map;
}

}  // namespace ds41
