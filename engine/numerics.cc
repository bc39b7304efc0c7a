#include "engine/numerics.h"

#include <algorithm>

namespace ds41 {

float E4m3ToF32(uint8_t code) {
  const int sign = code >> 7;
  const int e = (code >> 3) & 0xF;
  const int m = code & 7;
  if (e == 15 && m == 7) return std::nanf("");
  float mag = (e == 0) ? std::ldexp(static_cast<float>(m), -9) : std::ldexp(static_cast<float>(8 + m), e - 10);
  return sign ? -mag : mag;
}

uint8_t F32ToE4m3(float x) {
  if (std::isnan(x)) return 0x7F;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  float a = std::fabs(x);
  if (a >= kFp8Max) return sign | 0x7E;
  if (a < 0.015625f) {  // below 2^-6: subnormal grid of 2^-9; q == 8 is the smallest normal (code 8)
    const float q = std::nearbyint(a * 512.0f);
    return sign | static_cast<uint8_t>(q);
  }
  int e2;
  std::frexp(a, &e2);  // a = f * 2^e2, f in [0.5, 1)
  int exp = e2 - 1;    // a in [2^exp, 2^(exp+1))
  float q = std::nearbyint(std::ldexp(a, 3 - exp));  // in [8, 16]
  if (q == 16.0f) {
    q = 8.0f;
    ++exp;
  }
  if (exp > 8 || (exp == 8 && q > 14.0f)) return sign | 0x7E;
  return sign | static_cast<uint8_t>(((exp + 7) << 3) | (static_cast<int>(q) - 8));
}

float E2m1ToF32(uint8_t code) {
  static constexpr float kMag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  float v = kMag[code & 7];
  return (code & 8) ? -v : v;
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

Qdq8Group QuantizeQdq8(const float* x, int n, uint8_t* codes) {
  static const float kInv = static_cast<float>(1.0 / 448.0);
  const float amax = std::max(GroupAmax(x, n), 1e-4f);
  const float s = FastRoundScale(amax, kInv);
  for (int i = 0; i < n; ++i) codes[i] = F32ToE4m3(std::clamp(x[i] / s, -kFp8Max, kFp8Max));
  return {s, E8m0FromPow2(s)};
}

Qdq8Group QuantizeQdq4e8(const float* x, int n, uint8_t* codes4) {
  static const float kInv = static_cast<float>(1.0 / 6.0);
  static const float kFloor = 6.0f * std::ldexp(1.0f, -126);
  const float amax = std::max(GroupAmax(x, n), kFloor);
  const float s = FastRoundScale(amax, kInv);
  for (int i = 0; i < n; ++i) codes4[i] = F32ToE2m1(std::clamp(x[i] / s, -kFp4Max, kFp4Max));
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
