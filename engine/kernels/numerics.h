// Scalar number formats and the canonical numerics of the engine (docs/numerics.md).
//
// Codecs: bf16, E4M3 (e4m3fn), E2M1, E8M0, all round-to-nearest-even with the reference's
// saturation rules. Canonical transcendentals are evaluated in double and rounded once to float,
// so the engine and the oracle get identical bits without sharing a libm. The three fake-quant
// formats of MODEL.md §3 (QDQ8, QDQ4e8, QDQ4e4) produce codes plus scales.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace ds41 {

// ---- raw loads from possibly unaligned checkpoint memory -----------------------------------------
inline float LoadF32(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, 4);
  return f;
}
inline uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// ---- bf16 ------------------------------------------------------------------------------------------
inline float Bf16ToF32(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round-to-nearest-even, NaN stays NaN (quiet), overflow goes to inf: torch's float -> bfloat16.
inline uint16_t F32ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float RoundBf16(float f) { return Bf16ToF32(F32ToBf16(f)); }

// Binary exponents (floor of log2) of the smallest and largest nonzero magnitudes among a set of
// values; lo > hi when unknown or when there are none. Subnormal bf16 values count as -127, inf and
// NaN as 128. The VDPBF16PS kernels use it to prove that no product or partial sum is subnormal.
struct ExponentRange {
  int lo = 1, hi = 0;
  bool known() const { return lo <= hi; }
};
// (Bf16ExponentRange, in engine/kernels/vector_ops.h, measures it for bf16 values.)

// ---- E4M3 (e4m3fn: bias 7, max 448, 0x7F/0xFF = NaN, no inf) ------------------------------------
inline constexpr float kFp8Max = 448.0f;
inline constexpr float kFp4Max = 6.0f;

namespace numerics_internal {
constexpr float Pow2(int e) {
  float r = 1.0f;
  for (; e > 0; --e) r *= 2.0f;
  for (; e < 0; ++e) r *= 0.5f;
  return r;
}
// The codes' values at compile time (exact: small integers times powers of two), so that the
// per-element decodes of attention and Engram are one load each.
constexpr std::array<float, 256> E4m3Values() {
  std::array<float, 256> t{};
  for (int c = 0; c < 256; ++c) {
    const int e = (c >> 3) & 0xF, m = c & 7;
    const float mag = e == 0 ? static_cast<float>(m) * Pow2(-9) : static_cast<float>(8 + m) * Pow2(e - 10);
    t[c] = (e == 15 && m == 7) ? std::numeric_limits<float>::quiet_NaN() : ((c >> 7) ? -mag : mag);
  }
  return t;
}
}  // namespace numerics_internal

// Every E4M3 code's value (0x7F and 0xFF: a positive quiet NaN), and every E2M1 code's.
inline constexpr std::array<float, 256> kE4m3Values = numerics_internal::E4m3Values();
inline constexpr std::array<float, 16> kE2m1Values = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                                      -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

inline float E4m3ToF32(uint8_t code) { return kE4m3Values[code]; }
// Every nonzero E4M3 value lies in [2^-9, 448].
inline constexpr ExponentRange kE4m3Exponents{-9, 8};
// Round-to-nearest-even with saturation to +-448 (the reference clamps before casting). NaN -> 0x7F.
uint8_t F32ToE4m3(float x);

// ---- E2M1 (4-bit: bit 3 = sign) --------------------------------------------------------------------
// bf16 bits of every E2M1 code, twice (32 entries): the SIMD lookups' index (VPERMW) carries a
// don't-care fifth bit.
alignas(64) inline constexpr uint16_t kE2m1Bf16[32] = {
    0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000, 0x4040, 0x4080, 0x40C0, 0x8000, 0xBF00, 0xBF80, 0xBFC0, 0xC000, 0xC040, 0xC080, 0xC0C0,
    0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000, 0x4040, 0x4080, 0x40C0, 0x8000, 0xBF00, 0xBF80, 0xBFC0, 0xC000, 0xC040, 0xC080, 0xC0C0};

inline float E2m1ToF32(uint8_t code) { return kE2m1Values[code & 0xF]; }
// v in [-6, 6]; ties go to the even code (0.75, 1.75, 3.5 round up; 0.25, 1.25, 2.5, 5 round down).
// The sign bit follows signbit(v), so -0 and small negatives that round to zero give code 8.
uint8_t F32ToE2m1(float v);

// ---- E8M0 (power-of-two scale 2^(e-127); 255 is NaN) ------------------------------------------------
inline float E8m0ToF32(uint8_t e) {
  // Built from bits: 2^(e-127) is a normal float for e in [1, 254], 2^-127 the subnormal 0x00400000.
  const uint32_t bits = e == 255 ? 0x7FC00000u : e == 0 ? 0x00400000u : static_cast<uint32_t>(e) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
// REQUIRES: p is a normal power of two (what FastRoundScale returns for in-range inputs).
inline uint8_t E8m0FromPow2(float p) {
  uint32_t u;
  std::memcpy(&u, &p, 4);
  return static_cast<uint8_t>((u >> 23) & 0xFFu);
}

// 2^ceil(log2(amax * max_inv)) from the fp32 bit pattern, exactly as the reference kernel's
// fast_round_scale does (exponent + 1 when the mantissa is not zero).
float FastRoundScale(float amax, float max_inv);

// ---- canonical transcendentals: double evaluation, one rounding to float ----------------------------
inline float ExpF(float x) { return static_cast<float>(std::exp(static_cast<double>(x))); }
inline float SigmoidF(float x) { return static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(x)))); }
inline float SiluF(float x) {
  double d = x;
  return static_cast<float>(d / (1.0 + std::exp(-d)));
}
// torch.nn.functional.softplus with beta 1, threshold 20.
inline float SoftplusF(float x) {
  if (x > 20.0f) return x;
  return static_cast<float>(std::log1p(std::exp(static_cast<double>(x))));
}
inline float RsqrtF(float x) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(x))); }

// ---- fake quantizers (MODEL.md §3): codes and scales of one group --------------------------------
// QDQ8: 32 values -> 32 E4M3 codes and a power-of-two scale (returned as float and E8M0 byte).
struct Qdq8Group {
  float scale;
  uint8_t scale_e8m0;
};
Qdq8Group QuantizeQdq8(const float* x, int n, uint8_t* codes);
// QDQ8's scale for a group whose largest magnitude is `amax` (a power of two).
float Qdq8Scale(float amax);

// QDQ4e8: indexer q and k; groups of 32, power-of-two scale.
Qdq8Group QuantizeQdq4e8(const float* x, int n, uint8_t* codes4);

// QDQ4e4: compressed main KV; groups of 16, E4M3 scale (a true e4m3 number).
struct Qdq4e4Group {
  float scale;
  uint8_t scale_e4m3;
};
Qdq4e4Group QuantizeQdq4e4(const float* x, int n, uint8_t* codes4);

}  // namespace ds41
