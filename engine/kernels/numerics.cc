#include "engine/kernels/numerics.h"

#include <algorithm>
#include <cstring>

namespace ds41 {

uint8_t F32ToE4m3(float x) {
  if (std::isnan(x)) return 0x7F;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  float a = std::fabs(x);
  if (a >= kFp8Max) return sign | 0x7E;
  if (a < 0.015625f) {  // below 2^-6: subnormal grid of 2^-9; q == 8 is the smallest normal (code 8)
    const float q = std::nearbyint(a * 512.0f);
    return sign | static_cast<uint8_t>(q);
  }
  // Normal range [2^-6, 448): round the f32 mantissa to 3 bits, to nearest even, on the bits (a
  // carry moves into the exponent); then rebias the exponent (127 -> 7). 0x7F would be NaN: saturate.
  uint32_t bits;
  std::memcpy(&bits, &a, 4);
  bits += 0x7FFFFu + ((bits >> 20) & 1u);
  const uint32_t code = ((bits >> 20) - ((127u - 7u) << 3));
  return sign | static_cast<uint8_t>(std::min<uint32_t>(code, 0x7E));
}

uint8_t F32ToE2m1(float v) {
  static constexpr float kMid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  static constexpr bool kTieUp[7] = {false, true, false, true, false, true, false};
  const float a = std::fabs(v);
  uint8_t code = 0;
  for (int i = 0; i < 7; ++i) code += (a > kMid[i]) || (a == kMid[i] && kTieUp[i]);
  return code | (std::signbit(v) ? 8 : 0);
}

float FastRoundScale(float amax, float max_inv) {
  const float x = amax * max_inv;
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  const int exp = static_cast<int>((bits >> 23) & 0xFFu);
  const int log2_ceil = exp - 127 + ((bits & 0x7FFFFFu) != 0 ? 1 : 0);
  const uint32_t out = static_cast<uint32_t>(log2_ceil + 127) << 23;
  float r;
  std::memcpy(&r, &out, 4);
  return r;
}

namespace {
float GroupAmax(const float* x, int n) {
  float a = 0.0f;
  for (int i = 0; i < n; ++i) a = std::max(a, std::fabs(x[i]));
  return a;
}
}  // namespace

float Qdq8Scale(float amax) {
  static const float kInv = static_cast<float>(1.0 / 448.0);
  return FastRoundScale(std::max(amax, 1e-4f), kInv);
}

Qdq8Group QuantizeQdq8(const float* x, int n, uint8_t* codes) {
  const float s = Qdq8Scale(GroupAmax(x, n));
  // s is a power of two: x * (1/s) is the same correctly rounded value as x / s, and cheaper.
  const float inv = 1.0f / s;
  for (int i = 0; i < n; ++i) codes[i] = F32ToE4m3(std::clamp(x[i] * inv, -kFp8Max, kFp8Max));
  return {s, E8m0FromPow2(s)};
}

Qdq8Group QuantizeQdq4e8(const float* x, int n, uint8_t* codes4) {
  static const float kInv = static_cast<float>(1.0 / 6.0);
  static const float kFloor = 6.0f * std::ldexp(1.0f, -126);
  const float amax = std::max(GroupAmax(x, n), kFloor);
  const float s = FastRoundScale(amax, kInv);
  const float inv = 1.0f / s;  // a power of two, as above
  for (int i = 0; i < n; ++i) codes4[i] = F32ToE2m1(std::clamp(x[i] * inv, -kFp4Max, kFp4Max));
  return {s, E8m0FromPow2(s)};
}

Qdq4e4Group QuantizeQdq4e4(const float* x, int n, uint8_t* codes4) {
  static const float kFloor = 6.0f * std::ldexp(1.0f, -9);
  const float amax = std::max(GroupAmax(x, n), kFloor);
  const uint8_t sc = F32ToE4m3(std::clamp(amax / kFp4Max, -kFp8Max, kFp8Max));
  const float s = E4m3ToF32(sc);
  for (int i = 0; i < n; ++i) codes4[i] = F32ToE2m1(std::clamp(x[i] / s, -kFp4Max, kFp4Max));
  return {s, sc};
}

}  // namespace ds41
